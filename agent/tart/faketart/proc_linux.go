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

// startGuest starts the guest in its own session (and so its own process
// group) with
// Pdeathsig: SIGKILL. Pdeathsig fires when the *thread* that forked the child
// exits, so the fork happens on a goroutine locked to its OS thread, and that
// goroutine stays (locked) in cmd.Wait until the guest exits. Killing
// `tart run` (even with SIGKILL) therefore kills the guest.
// With netns the guest gets a network namespace of its own (FAKETART_NET=vmnet).
func startGuest(cmd *exec.Cmd, netns bool) (*guestProc, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
	if netns {
		cmd.SysProcAttr.Cloneflags = syscall.CLONE_NEWNET
	}
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

// sessionPIDs lists the live (non-zombie) processes of session sid: the
// guest and everything it started, even in process groups of their own
// (the bootstrap runs each build step in one). A VM's power-off ends them all.
func sessionPIDs(sid int) []int {
	var pids []int
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
		// state ppid pgrp session …
		if len(f) < 4 || string(f[0]) == "Z" || string(f[0]) == "X" {
			continue
		}
		if s, err := strconv.Atoi(string(f[3])); err == nil && s == sid {
			if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(m))); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// guestAlive reports whether anything of the guest still runs.
func guestAlive(sid int) bool { return len(sessionPIDs(sid)) > 0 }

// killGuest sends sig to every process of the guest's session.
func killGuest(sid int, sig syscall.Signal) {
	_ = syscall.Kill(-sid, sig)
	for _, pid := range sessionPIDs(sid) {
		_ = syscall.Kill(pid, sig)
	}
}
