//go:build !linux

package main

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
)

func selfExe() (string, error) { return os.Executable() }

// startGuest starts the guest in its own process group. There is no
// Pdeathsig outside Linux; the reaper process (see startReaper) is what kills
// the guest's group if `tart run` dies. netns is never set here: vmnet
// emulation needs Linux, and so do read-only shares (mountns).
func startGuest(cmd *exec.Cmd, netns, mountns bool) (*guestProc, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
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

// guestAlive reports whether any process is in the guest's group (zombies
// included). Without /proc, processes that left the group are not tracked.
func guestAlive(sid int) bool {
	return syscall.Kill(-sid, 0) == nil
}

// killGuest signals the guest's process group.
func killGuest(sid int, sig syscall.Signal) {
	_ = syscall.Kill(-sid, sig)
}

// roWrap: read-only shares need Linux's mount namespaces.
func roWrap(cmd *exec.Cmd, ro []roMount) (*exec.Cmd, error) {
	return nil, errors.New("faketart: read-only --dir shares are emulated on Linux only")
}

func fakeROGuest([]string) int { return 64 }
