package agent_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/internal/standins/faketart/faketarttest"
)

// BenchmarkAgentOverhead measures what the worker itself costs, against the
// fake Tart (so VM boot time is ~0 and what remains is the agent):
//   - idle RSS and CPU while long-polling an empty queue (25 s polls);
//   - job received → `tart run` started (claim time to the fake's boot record);
//   - build finished → result reported (the artifact's upload to the
//     attempt's end, which includes noticing build-complete).
//
// Run: go test ./agent -run XXX -bench AgentOverhead -benchtime 1x
func BenchmarkAgentOverhead(b *testing.B) {
	f := newFarm(b, nil)
	tartLog := filepath.Join(b.TempDir(), "tart.log")
	a := f.startAgent("FREEAGENT_POLL_WAIT=25s", "FAKETART_BOOT_DELAY=0s", "FAKETART_LOG="+tartLog)
	time.Sleep(3 * time.Second) // registered and parked in a long poll
	rss := procStatusKB(b, a.cmd.Process.Pid, "VmRSS")
	cpu0 := procCPUTicks(b, a.cmd.Process.Pid)
	time.Sleep(10 * time.Second)
	cpuIdle := procCPUTicks(b, a.cmd.Process.Pid) - cpu0

	const builds = 5
	var toRun, toReport time.Duration
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, f.dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	for i := 0; i < builds; i++ {
		id := f.submit("mkdir -p \"$FREEAGENT_ARTIFACTS_DIR\"\necho ok > \"$FREEAGENT_ARTIFACTS_DIR/app.apk\"\n")
		bl := f.waitFor(id, 60*time.Second, "completed", func(bl api.Build) bool { return bl.Status.Terminal() })
		if bl.Status != api.StatusCompleted {
			b.Fatalf("build: %+v", bl)
		}
		var claimed, ended, uploaded time.Time
		if err := conn.QueryRow(ctx, `SELECT a.started_at, a.ended_at, (SELECT max(created_at) FROM artifacts WHERE build_id = a.build_id)
			FROM build_attempts a WHERE a.build_id = $1`, id).Scan(&claimed, &ended, &uploaded); err != nil {
			b.Fatal(err)
		}
		var booted time.Time
		for _, e := range faketarttest.ReadLog(b, tartLog) {
			if e.Event == "boot" && strings.Contains(strings.Join(e.Argv, " "), id) {
				booted, _ = time.Parse(time.RFC3339Nano, e.Time)
			}
		}
		if booted.IsZero() {
			b.Fatalf("no boot record for %s", id)
		}
		toRun += booted.Sub(claimed)
		toReport += ended.Sub(uploaded)
	}
	b.ReportMetric(float64(rss)/1024, "idle-RSS-MB")
	b.ReportMetric(float64(cpuIdle)*10, "idle-CPU-ms/10s")
	b.ReportMetric(float64((toRun / builds).Milliseconds()), "job-to-tart-run-ms")
	b.ReportMetric(float64((toReport / builds).Milliseconds()), "complete-to-reported-ms")
}

func procStatusKB(t testing.TB, pid int, field string) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// procCPUTicks is utime+stime in clock ticks (1/100 s on Linux).
func procCPUTicks(t testing.TB, pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	ut, _ := strconv.Atoi(fields[11])
	st, _ := strconv.Atoi(fields[12])
	return ut + st
}
