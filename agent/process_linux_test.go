package agent_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/agent"
)

// nice reads a process's niceness from /proc (field 19 of stat).
func nice(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:]) // after "pid (comm) "
	n, err := strconv.Atoi(fields[16])
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// The environments the agent starts, and what they start, run at
// background priority: the owner's apps stay responsive.
func TestEnvironmentsRunAtBackgroundPriority(t *testing.T) {
	dir := t.TempDir()
	childPID := filepath.Join(dir, "child")
	p, err := agent.StartProcess(exec.Command("sh", "-c", `sleep 30 & echo $! > "$0.tmp" && mv "$0.tmp" "$0"; wait`, childPID))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Destroy(context.Background())
	deadline := time.Now().Add(10 * time.Second)
	var b []byte
	for b, err = os.ReadFile(childPID); err != nil; b, err = os.ReadFile(childPID) {
		if time.Now().After(deadline) {
			t.Fatalf("the environment's child never started: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	child, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	want := min(19, nice(t, os.Getpid())+agent.BackgroundNice)
	if got := nice(t, child); got != want {
		t.Fatalf("the environment's child runs at nice %d, want %d", got, want)
	}
}
