package main

import (
	"os/exec"
	"syscall"
)

// dieWithTest kills cmd if the test binary dies first.
func dieWithTest(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
