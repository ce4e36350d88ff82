//go:build unix

package vmbootstrap

import (
	"os"
	"os/exec"
	"syscall"
)

// setProcessGroup makes the child the leader of a new process group, so the
// step and everything it starts can be signalled together.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// terminateGroup sends SIGTERM to the child's process group.
func terminateGroup(p *os.Process) {
	syscall.Kill(-p.Pid, syscall.SIGTERM) //nolint:errcheck // ESRCH: already gone
}

// killGroup sends SIGKILL to the child's process group.
func killGroup(p *os.Process) {
	syscall.Kill(-p.Pid, syscall.SIGKILL) //nolint:errcheck // ESRCH: already gone
}
