//go:build !unix

package vmbootstrap

import (
	"os"
	"os/exec"
)

// Without process groups only the step's own process is signalled.

func setProcessGroup(*exec.Cmd) {}

func terminateGroup(p *os.Process) { p.Kill() } //nolint:errcheck

func killGroup(p *os.Process) { p.Kill() } //nolint:errcheck
