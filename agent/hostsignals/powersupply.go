package hostsignals

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ReadPowerSupplies fills the power fields of s from Linux's power-supply
// class (one folder per supply, with type, online, status and capacity
// files). With a mains supply the machine is on battery when no mains is
// online; without one (some laptops list only the battery), when a battery
// is discharging. A missing folder is a machine without supplies: on mains.
func ReadPowerSupplies(dir string, s *Signals) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("power supplies: %w", err)
	}
	var mains, mainsOnline, discharging bool
	for _, e := range entries {
		read := func(name string) string {
			b, err := os.ReadFile(filepath.Join(dir, e.Name(), name))
			if err != nil || len(b) > 256 {
				return ""
			}
			return strings.TrimSpace(string(b))
		}
		switch read("type") {
		case "Mains":
			mains = true
			mainsOnline = mainsOnline || read("online") == "1"
		case "Battery":
			if read("scope") == "Device" { // a mouse's or keyboard's battery
				continue
			}
			s.HasBattery = true
			if n, err := strconv.Atoi(read("capacity")); err == nil && n >= 0 && n <= 100 && s.BatteryPercent == nil {
				s.BatteryPercent = &n
			}
			discharging = discharging || read("status") == "Discharging"
		}
	}
	if mains {
		s.OnBattery = !mainsOnline
	} else {
		s.OnBattery = discharging
	}
	return nil
}
