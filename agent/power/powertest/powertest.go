//go:build unix

// Package powertest is a stand-in caffeinate(8) for tests off macOS, for
// power.Caffeinate to start and stop exactly as it does the real one.
package powertest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// StandIn writes a stand-in caffeinate that logs "start PID ARGS…" when it
// starts and "stop PID" when it gets SIGTERM; like the real one with -w,
// it also ends when the watched process does. It returns its path and a
// reader of its log.
func StandIn(t *testing.T) (path string, log func() []string) {
	t.Helper()
	dir := t.TempDir()
	logPath := filepath.Join(dir, "caffeinate.log")
	path = filepath.Join(dir, "caffeinate")
	script := fmt.Sprintf(`#!/bin/sh
trap 'echo "stop $$" >>%[1]q; exit 0' TERM
echo "start $$ $*" >>%[1]q
while kill -0 "$3" 2>/dev/null; do sleep 1 & wait $!; done
echo "watched process $3 ended" >>%[1]q
`, logPath)
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path, func() []string {
		b, _ := os.ReadFile(logPath)
		if len(b) == 0 {
			return nil
		}
		return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	}
}

// WaitLog waits until the log has n lines, and returns them.
func WaitLog(t *testing.T, log func() []string, n int) []string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(log()) < n {
		if time.Now().After(deadline) {
			t.Fatalf("stand-in caffeinate log has %q, want %d lines", log(), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return log()
}
