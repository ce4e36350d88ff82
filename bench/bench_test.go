package bench_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/bench"
)

// TestSmoke runs every phase of the benchmark in miniature (2 s lifecycle
// window, 1k-row claim test, 16 MiB artifact, one short pgbench run): it
// proves the benchmark still runs against the current controller, not how
// fast it is.
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Postgres and the controller; skipped with -short")
	}
	goroutines := runtime.NumGoroutine()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute) // a shared 2-core machine runs it in about a minute
	defer cancel()
	cfg := bench.SmokeConfig()
	// As root, Postgres runs as user postgres and must traverse to its
	// directory inside the run's.
	cfg.TempDir = t.TempDir()
	for _, d := range []string{cfg.TempDir, filepath.Dir(cfg.TempDir)} {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	var log bytes.Buffer
	cfg.Log = &log
	rep, err := bench.Run(ctx, cfg)
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	t.Logf("%.1f s\n%s", rep.Seconds, log.String())

	if rep.Lifecycle == nil || rep.Lifecycle.Completed == 0 {
		t.Errorf("no lifecycle completed: %+v", rep.Lifecycle)
	}
	if rep.Pickup == nil || rep.Pickup.FromSubmit.N != cfg.PickupSamples {
		t.Errorf("pickup samples: %+v", rep.Pickup)
	}
	if rep.EmptyPoll == nil || rep.EmptyPoll.Polls == 0 || rep.EmptyPoll.CPUPer1000 <= 0 {
		t.Errorf("empty polls: %+v", rep.EmptyPoll)
	}
	if rep.Artifact == nil || len(rep.Artifact.SHA256) != 64 || rep.Artifact.BaselineRSS <= 0 {
		t.Errorf("artifact: %+v", rep.Artifact)
	}
	if x := rep.Transfer; x == nil || x.UploadRatio <= 0 || x.DownloadRatio <= 0 || x.CopySeconds <= 0 {
		t.Errorf("transfer: %+v", x)
	} else if x.S3 == nil && os.Getenv("CI") != "" {
		t.Errorf("the S3 transfer did not run on CI: %s", x.S3Skipped)
	}
	if rep.Claim == nil || rep.Claim.Small.Latency.N != cfg.ClaimSamples || rep.Claim.Large.Latency.N != cfg.ClaimSamples || rep.Claim.Ratio <= 0 {
		t.Errorf("claim: %+v", rep.Claim)
	}
	if rep.Pgbench == nil || (rep.Pgbench.Skipped == "" && (rep.Pgbench.BestPerSecond <= 0 || rep.Pgbench.Ratio <= 0)) {
		t.Errorf("pgbench: %+v", rep.Pgbench)
	}
	if rep.Cancel == nil || rep.Cancel.Latency.N != cfg.CancelSamples || rep.Cancel.Latency.P50 <= 0 {
		t.Errorf("cancel: %+v", rep.Cancel)
	}
	if st := rep.Storm; st == nil || len(st.Runs) != 2*cfg.StormRounds || st.On.PerSecond <= 0 || st.Off.PerSecond <= 0 {
		t.Errorf("storm: %+v", st)
	} else if on := st.On; on.Total429() != 0 || on.ServerErrors != 0 {
		t.Errorf("the storm with the production budgets answered workers %d 429s %v and %d 5xx", on.Total429(), on.Refused, on.ServerErrors)
	}
	if fl := rep.Fleet; fl == nil || len(fl.Points) != len(cfg.FleetWorkers) {
		t.Errorf("fleet: %+v", fl)
	} else {
		for _, p := range fl.Points {
			if p.Total429() != 0 || p.ServerErrors != 0 {
				t.Errorf("fleet of %d: the worker protocol was answered %d 429s %v and %d 5xx", p.Workers, p.Total429(), p.Refused, p.ServerErrors)
			}
			if p.Builds == 0 || p.ControllerMSPerWorkerMin <= 0 || p.Calls["heartbeat"].N == 0 || p.Calls["log_append"].N == 0 || p.Pickup.N == 0 {
				t.Errorf("fleet of %d measured nothing: %+v", p.Workers, p)
			}
		}
	}
	wantRows := 11
	if rep.Pgbench != nil && rep.Pgbench.Skipped != "" {
		wantRows--
	}
	if rep.Transfer != nil && rep.Transfer.S3 != nil {
		wantRows++
	}
	if len(rep.Summary) != wantRows {
		t.Errorf("summary has %d rows, want %d: %+v", len(rep.Summary), wantRows, rep.Summary)
	}

	var text bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Summary", "lifecycles/s", "PASS"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text report lacks %q:\n%s", want, text.String())
		}
	}
	if _, err := json.Marshal(rep); err != nil {
		t.Fatal(err)
	}
	// No goroutine was left running.
	for deadline := time.Now().Add(5 * time.Second); runtime.NumGoroutine() > goroutines; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Errorf("%d goroutines left running (%d before):\n%s", runtime.NumGoroutine(), goroutines, buf[:runtime.Stack(buf, true)])
			break
		}
	}
	// Everything was removed.
	if left, err := os.ReadDir(cfg.TempDir); err != nil || len(left) > 0 {
		t.Errorf("left behind in %s: %v %v", cfg.TempDir, left, err)
	}
}
