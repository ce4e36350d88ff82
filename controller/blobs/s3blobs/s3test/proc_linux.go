//go:build linux

package s3test

import "syscall"

// sysProcAttr makes the kernel SIGKILL the gateway when the test binary
// dies, so a killed `go test` leaves no server behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
