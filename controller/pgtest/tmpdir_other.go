//go:build !linux

package pgtest

// fastTempParent: no well-known tmpfs elsewhere; use the default temp dir.
func fastTempParent() string { return "" }
