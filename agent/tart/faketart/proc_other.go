//go:build !linux

package main

import (
	"os"
	"os/exec"
	"syscall"
)

func selfExe() (string, error) { return os.Executable() }

// startGuest starts the guest in its own process group. There is no
// Pdeathsig outside Linux; the reaper process (see startReaper) is what kills
// the guest's group if `tart run` dies.
func startGuest(cmd *exec.Cmd) (*guestProc, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	g := &guestProc{cmd: cmd, done: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	g.pid = cmd.Process.Pid
	go func() {
		_ = cmd.Wait()
		close(g.done)
	}()
	return g, nil
}

// groupAlive reports whether any process is in group pgid (zombies included).
func groupAlive(pgid int) bool {
	return syscall.Kill(-pgid, 0) == nil
}
