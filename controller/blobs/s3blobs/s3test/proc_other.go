//go:build !linux

package s3test

import "syscall"

// sysProcAttr: there is no Pdeathsig outside Linux; Main stops the
// gateway, and a killed test binary leaves it running.
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }
