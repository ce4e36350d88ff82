//go:build unix

package agent

import (
	"os/exec"
	"strconv"
	"syscall"
)

// BackgroundNice is how much nicer than the agent the environments it
// starts run (`tart run`, the local driver's build), and everything they
// start: the Mac's owner's apps come first. (A Tart VM's vCPUs run in macOS's
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

// backgroundPriority makes cmd start through nice(1), so it and all it
// starts run BackgroundNice lower than the agent from their first
// instruction (raising a started process's niceness would race with the
// children it forks at once). Without nice(1) it starts as it is: a build
// at normal priority is no reason to fail it.
func backgroundPriority(cmd *exec.Cmd) {
	if cmd.Err != nil || cmd.Path == "" {
		return
	}
	nice, err := exec.LookPath("nice")
	if err != nil {
		return
	}
	cmd.Args = append([]string{nice, "-n", strconv.Itoa(BackgroundNice), cmd.Path}, cmd.Args[1:]...)
	cmd.Path = nice
}
