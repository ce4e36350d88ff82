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

// signalOwnProcesses sends SIGTERM (SIGKILL when kill) to every process
// of this process's user except itself.
func signalOwnProcesses(kill bool) error {
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	// -1: every process this user may signal except this one.
	if err := syscall.Kill(-1, sig); err != nil && err != syscall.ESRCH {
		return err
	}
	return nil
}

// execWithUmask replaces this process with bin under umask.
func execWithUmask(bin string, argv, env []string, umask int) error {
	syscall.Umask(umask)
	return syscall.Exec(bin, argv, env)
}

// setUmask sets this process's umask.
func setUmask(umask int) { syscall.Umask(umask) }
