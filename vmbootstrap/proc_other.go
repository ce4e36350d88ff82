//go:build !unix

package vmbootstrap

import (
	"errors"
	"os"
	"os/exec"
)

// Without process groups only the step's own process is signalled.

func setProcessGroup(*exec.Cmd) {}

func terminateGroup(p *os.Process) { p.Kill() } //nolint:errcheck

func killGroup(p *os.Process) { p.Kill() } //nolint:errcheck

func signalOwnProcesses(bool) error { return errors.ErrUnsupported }

func execWithUmask(string, []string, []string, int) error { return errors.ErrUnsupported }

func setUmask(int) {}
