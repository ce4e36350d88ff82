//go:build !linux

package main

import "os/exec"

// dieWithTest: only Linux can tie a child's life to its parent; elsewhere
// the test's cleanup kills it.
func dieWithTest(*exec.Cmd) {}
