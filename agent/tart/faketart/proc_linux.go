//go:build linux

package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
)

// startGuest starts the guest in its own process group with
// Pdeathsig: SIGKILL. Pdeathsig fires when the *thread* that forked the child
// exits, so the fork happens on a goroutine locked to its OS thread, and that
// goroutine stays (locked) in cmd.Wait until the guest exits. Killing
// `tart run` (even with SIGKILL) therefore kills the guest.
func startGuest(cmd *exec.Cmd) (*guestProc, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	g := &guestProc{cmd: cmd, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// Never unlocked: when this goroutine returns, the runtime ends the
		// thread, which is fine once the guest is gone.
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		g.pid = cmd.Process.Pid
		started <- nil
		_ = cmd.Wait()
		close(g.done)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return g, nil
}

// selfExe is this very binary, even if its path has since been replaced
// (faketarttest.Build swaps the shared binary atomically).
func selfExe() (string, error) { return "/proc/self/exe", nil }

// groupAlive reports whether a live (non-zombie) process is in group pgid.
func groupAlive(pgid int) bool {
	matches, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, m := range matches {
		data, err := os.ReadFile(m)
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(data, ')')
		if i < 0 {
			continue
		}
		f := bytes.Fields(data[i+1:])
		// state ppid pgrp …
		if len(f) < 3 || string(f[0]) == "Z" || string(f[0]) == "X" {
			continue
		}
		if pg, err := strconv.Atoi(string(f[2])); err == nil && pg == pgid {
			return true
		}
	}
	return false
}
