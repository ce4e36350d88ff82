//go:build unix

package power_test

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/agent/power"
	"github.com/freeagent-build/freeagent/agent/power/powertest"
)

func TestCaffeinateHeldWhileBusy(t *testing.T) {
	path, log := powertest.StandIn(t)
	c := &power.Caffeinate{Path: path, PID: os.Getpid()}
	t.Cleanup(func() { c.SetBusy(false) })
	if err := c.SetBusy(false); err != nil || len(log()) != 0 {
		t.Fatalf("idle while idle started something: %v %q", err, log())
	}
	for range 2 { // busy twice: one assertion
		if err := c.SetBusy(true); err != nil {
			t.Fatal(err)
		}
	}
	lines := powertest.WaitLog(t, log, 1)
	start := strings.Fields(lines[0])
	if want := []string{"start", "-i", "-w", strconv.Itoa(os.Getpid())}; len(start) != 5 || start[0] != want[0] || !slices.Equal(start[2:], want[1:]) {
		t.Fatalf("started as %q, want start PID %s", lines[0], strings.Join(want[1:], " "))
	}
	pid := start[1]
	// Its own process group: the terminal's Ctrl-C (a drain) does not end it.
	n, _ := strconv.Atoi(pid)
	if pgid, err := syscall.Getpgid(n); err != nil || pgid == syscall.Getpgrp() {
		t.Fatalf("caffeinate %d is in the agent's process group (%d, %v)", n, pgid, err)
	}
	if err := c.SetBusy(false); err != nil {
		t.Fatal(err)
	}
	// SetBusy(false) returns once caffeinate has exited.
	if got := log(); len(got) != 2 || got[1] != "stop "+pid {
		t.Fatalf("after idle: %q, want start then stop of %s", got, pid)
	}
	if err := c.SetBusy(false); err != nil || len(log()) != 2 {
		t.Fatalf("idle twice: %v %q", err, log())
	}

	// Busy again takes a new assertion; one killed by someone else is
	// taken again at the next busy report.
	c.SetBusy(true)
	lines = powertest.WaitLog(t, log, 3)
	second := strings.Fields(lines[2])[1]
	n, _ = strconv.Atoi(second)
	syscall.Kill(n, syscall.SIGKILL)
	deadline := time.Now().Add(10 * time.Second)
	for len(log()) < 4 && time.Now().Before(deadline) {
		c.SetBusy(true)
		time.Sleep(10 * time.Millisecond)
	}
	if got := log(); len(got) != 4 || !strings.HasPrefix(got[3], "start ") || strings.HasPrefix(got[3], "start "+second+" ") {
		t.Fatalf("a killed caffeinate was not replaced: %q", got)
	}
}

func TestCaffeinateMissing(t *testing.T) {
	c := &power.Caffeinate{Path: filepath.Join(t.TempDir(), "caffeinate"), PID: os.Getpid()}
	if err := c.SetBusy(true); err == nil || !strings.Contains(err.Error(), "keep the Mac awake") {
		t.Fatalf("missing caffeinate: %v", err)
	}
	if err := c.SetBusy(false); err != nil {
		t.Fatalf("idle after a failed start: %v", err)
	}
}
