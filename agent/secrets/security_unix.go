//go:build unix

package secrets

import (
	"os/exec"
	"syscall"
)

// withoutTerminal starts cmd in a session of its own, which has no
// controlling terminal, so /dev/tty cannot be opened in it.
func withoutTerminal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
}
