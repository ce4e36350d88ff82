//go:build unix && !linux

package pgcluster

import "syscall"

// sysProcAttr returns the process attributes for initdb and postgres.
//
// There is no Pdeathsig outside Linux, so a SIGKILLed parent leaves the server
// running (the next Start copes: see removeStaleLockFiles, and postgres itself
// refuses to start twice on one data dir). The server deliberately stays in
// our process group so that at least a terminal Ctrl-C (e.g. on `go test`)
// reaches it and shuts it down.
func sysProcAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred}
}

// bootTime is only implemented on Linux; elsewhere staleness is judged by
// whether the pid is alive.
func bootTime() (int64, bool) { return 0, false }

// isZombie is only implemented on Linux; elsewhere a zombie counts as alive
// (as it does for postgres itself).
func isZombie(pid int) bool { return false }
