package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/freeagent-build/freeagent/internal/datadirlock"
)

// workerLockFile is a worker's claim on its data directory, held for the
// process's life: the login item, a Finder launch and `freeagent run` would
// otherwise each start a worker on one directory, and they would take each
// other's VMs, caches and log.
const workerLockFile = "worker.lock"

// errWorkerRunning: another worker holds the data directory.
var errWorkerRunning = errors.New("Free Agent is already running")

// lockWorker claims dataDir for this worker; what ("the menu-bar app",
// "freeagent run") tells a second start what it found.
func lockWorker(dataDir, what string) (*datadirlock.Lock, error) {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create the data directory: %w", err)
	}
	l, err := datadirlock.Acquire(dataDir, workerLockFile)
	var held *datadirlock.HeldError
	if errors.As(err, &held) {
		who := "another worker"
		if held.Note != "" {
			who = held.Note
		}
		if held.PID > 0 {
			who += fmt.Sprintf(", pid %d", held.PID)
		}
		return nil, fmt.Errorf("%w on %s (%s): quit it first (its menu's Quit, or `freeagent service uninstall` when it starts at login), or give this one another --data-dir",
			errWorkerRunning, dataDir, who)
	}
	if err != nil {
		return nil, err
	}
	if err := l.Note(what); err != nil {
		l.Release()
		return nil, err
	}
	return l, nil
}
