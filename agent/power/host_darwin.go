package power

import "os"

// ForHost is the power assertion of this Mac: caffeinate(8), which every
// macOS has, with or without cgo.
func ForHost() Assertion {
	return &Caffeinate{Path: "/usr/bin/caffeinate", PID: os.Getpid()}
}
