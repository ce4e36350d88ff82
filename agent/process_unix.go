//go:build unix

package agent

import (
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"
)

// BackgroundNice is the niceness of the environments the agent starts
// (`tart run`, the local driver's build), and so of everything they start:
// the Mac's owner's apps come first. (A Tart VM's vCPUs run in macOS's
// Virtualization service, bounded by the VM's CPU and memory settings.)
const BackgroundNice = 10

func setProcessGroup(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
}

func signalGroup(cmd *exec.Cmd, sig syscall.Signal) {
	if cmd.Process != nil {
		syscall.Kill(-cmd.Process.Pid, sig) //nolint:errcheck // already gone is fine
	}
}

// backgroundPriority lowers a started process to BackgroundNice. Its
// children inherit it; it runs before the environment has started any
// worth mentioning. Failing leaves the normal priority, which is no reason
// to fail a build.
func backgroundPriority(cmd *exec.Cmd) {
	if cmd.Process != nil {
		unix.Setpriority(unix.PRIO_PROCESS, cmd.Process.Pid, BackgroundNice) //nolint:errcheck // see above
	}
}
