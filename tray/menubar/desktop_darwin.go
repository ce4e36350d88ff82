//go:build darwin && cgo

package menubar

// checkDesktop: a Mac always has its menu bar.
func checkDesktop() error { return nil }
