//go:build linux

package main

import (
	"bytes"
	"fmt"
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
// With netns the guest gets a network namespace of its own (FAKETART_NET=vmnet);
// with mountns a mount namespace (read-only shares, see roWrap), inside a
// user namespace where it is root when this process is not root.
func startGuest(cmd *exec.Cmd, netns, mountns bool) (*guestProc, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
	if netns {
		cmd.SysProcAttr.Cloneflags |= syscall.CLONE_NEWNET
	}
	if mountns {
		cmd.SysProcAttr.Cloneflags |= syscall.CLONE_NEWNS
		if uid, gid := os.Geteuid(), os.Getegid(); uid != 0 {
			cmd.SysProcAttr.Cloneflags |= syscall.CLONE_NEWUSER
			cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: uid, Size: 1}}
			cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: gid, Size: 1}}
		}
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

// roWrap makes cmd start through `tart __fake ro-guest`, which mounts each
// read-only share over its place in the guest's view, in the guest's own
// mount namespace, then executes the guest program.
func roWrap(cmd *exec.Cmd, ro []roMount) (*exec.Cmd, error) {
	self, err := selfExe()
	if err != nil {
		return nil, err
	}
	args := []string{"__fake", "ro-guest", strconv.Itoa(len(ro))}
	for _, m := range ro {
		args = append(args, m.src, m.dst)
	}
	wrapped := exec.Command(self, append(append(args, cmd.Path, "--"), cmd.Args...)...)
	wrapped.Args[0] = os.Args[0]
	wrapped.Env, wrapped.Dir, wrapped.Stdout, wrapped.Stderr = cmd.Env, cmd.Dir, cmd.Stdout, cmd.Stderr
	return wrapped, nil
}

// fakeROGuest is `tart __fake ro-guest <n> (<src> <dst>)… <path> -- <argv…>`,
// the first process of the guest's mount namespace: each src is bind
// mounted read-only at dst, then the guest program runs.
func fakeROGuest(args []string) int {
	if len(args) < 1 {
		return 64
	}
	n, err := strconv.Atoi(args[0])
	if err != nil || n < 1 || len(args) < 1+2*n+3 || args[2+2*n] != "--" {
		return 64
	}
	fail := func(err error) int {
		fmt.Fprintf(os.Stderr, "faketart: read-only share: %v\n", err)
		return 1
	}
	// Nothing mounted here may reach the host's mount table.
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return fail(fmt.Errorf("make the guest's mounts private: %w", err))
	}
	for i := range n {
		src, dst := args[1+2*i], args[2+2*i]
		if err := syscall.Mount(src, dst, "", syscall.MS_BIND|syscall.MS_REC, ""); err != nil {
			return fail(fmt.Errorf("bind %s at %s: %w", src, dst, err))
		}
		// A remount keeps the flags the kernel locks (nosuid, nodev, …).
		var st syscall.Statfs_t
		if err := syscall.Statfs(dst, &st); err != nil {
			return fail(err)
		}
		keep := uintptr(st.Flags) & (syscall.MS_NOSUID | syscall.MS_NODEV | syscall.MS_NOEXEC | syscall.MS_NOATIME | syscall.MS_NODIRATIME | syscall.MS_RELATIME)
		if err := syscall.Mount("", dst, "", syscall.MS_BIND|syscall.MS_REMOUNT|syscall.MS_RDONLY|keep, ""); err != nil {
			return fail(fmt.Errorf("make %s read-only: %w", dst, err))
		}
	}
	path, argv := args[1+2*n], args[3+2*n:]
	err = syscall.Exec(path, argv, os.Environ())
	fmt.Fprintf(os.Stderr, "faketart: failed to start guest program %q: %v\n", path, err)
	return 1
}
