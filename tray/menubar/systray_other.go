//go:build !((darwin && cgo) || linux)

package menubar

import (
	"context"
	"errors"
)

// Show fails: fyne.io/systray needs cgo on macOS, and this build has none.
func Show(context.Context, *App, func()) error {
	return errors.New("this build of freeagent has no menu bar (a macOS build needs cgo); run `freeagent run` for a headless worker")
}
