//go:build linux

package pgcluster

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// sysProcAttr returns the process attributes for initdb and postgres.
//
// Pdeathsig: the kernel SIGKILLs the server when its parent dies, so neither a
// killed test binary nor a SIGKILLed controller leaves a postmaster behind
// (the postmaster's own children exit when they notice it is gone). The signal
// is tied to the parent *thread*; the Go runtime only retires threads that a
// goroutine locked with runtime.LockOSThread and never unlocked, which this
// code does not do.
//
// Setpgid: a terminal Ctrl-C goes to the whole foreground process group; with
// its own group the server is not shut down behind the controller's back while
// the controller drains requests. The controller stops it with Stop, and
// Pdeathsig covers the case where the controller dies instead.
func sysProcAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{
		Credential: cred,
		Pdeathsig:  syscall.SIGKILL,
		Setpgid:    true,
	}
}

// bootTime returns the system boot time in Unix seconds, so that a
// postmaster.pid written before the last reboot is recognised as stale even
// if its pid now belongs to an unrelated process.
func bootTime() (int64, bool) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "btime "); ok {
			t, err := strconv.ParseInt(strings.TrimSpace(rest), 10, 64)
			return t, err == nil
		}
	}
	return 0, false
}

// isZombie reports whether pid has exited but not been reaped yet. Killed
// servers are reparented to init, which may take a while to reap them, and
// until then kill(pid, 0) — postgres' own liveness test — says "alive".
func isZombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// "pid (comm) state ...": comm may contain anything, so find the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && (s[i+2] == 'Z' || s[i+2] == 'X')
}
