package menubar

import (
	"fmt"

	"github.com/godbus/dbus/v5"
)

// checkDesktop: on Linux the menu is served over the session bus; without
// one systray would run with no menu at all (and fail on Quit).
func checkDesktop() error {
	conn, err := dbus.SessionBusPrivate()
	if err != nil {
		return fmt.Errorf("no DBus session bus for the menu bar (%w); run `freeagent run` for a headless worker", err)
	}
	return conn.Close()
}
