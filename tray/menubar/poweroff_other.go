//go:build !(darwin && cgo)

package menubar

// observePowerOff: only macOS announces a logout, restart or shutdown to
// the app; elsewhere the session manager's SIGTERM is what arrives.
func observePowerOff(func()) {}
