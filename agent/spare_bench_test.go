package agent_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/freeagent-build/freeagent/api"
)

// BenchmarkWarmSpare measures claim → first build command on one worker
// whose VMs take a Mac's 40 s to come up (the fake Tart: a 25 s boot, then
// a 15 s auto-login), with two VM slots and builds arriving one at a time,
// each as soon as the previous one ended:
//   - cold-claim-to-command-s: warm spares off, so every build boots its VM;
//   - spare-claim-to-command-p50-s / -max-s: warm spares on (target: p50 ≤ 3 s);
//   - spare-hits: how many of the builds found a spare (target: all).
//
// Each build's first command writes the time; the claim is the attempt's
// start in the controller's database (both on this host's clock). A build
// runs 45 s, shorter than any real one, so that the spare booted when it
// was claimed is up when the next one comes.
//
// Run: go test ./agent -run XXX -bench WarmSpare -benchtime 1x -timeout 30m
func BenchmarkWarmSpare(b *testing.B) {
	const builds = 5
	ctx := context.Background()
	measure := func(b *testing.B, spares bool, n int) ([]time.Duration, int) {
		f := newFarm(b, nil)
		f.bootTimeout = "3m"
		conn, err := pgx.Connect(ctx, f.dsn)
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close(ctx)
		env := []string{"FAKETART_BOOT_DELAY=25s", "FAKETART_LOGIN_DELAY=15s"}
		if spares {
			env = append(env, "FREEAGENT_WARM_SPARE=1")
		}
		a := f.startAgent(env...)
		if spares {
			a.waitLog(b, "warm spare ready", 1, 3*time.Minute)
		}
		marks := b.TempDir()
		var took []time.Duration
		for i := range n {
			mark := filepath.Join(marks, strconv.Itoa(i))
			id := f.submit(fmt.Sprintf("date +%%s.%%N > %s\nsleep 45\n%s", mark, quickApk))
			bl := f.waitFor(id, 5*time.Minute, "completed", func(bl api.Build) bool { return bl.Status.Terminal() })
			if bl.Status != api.StatusCompleted {
				b.Fatalf("build %d: %+v\n%s", i, bl, f.logs(id))
			}
			var claimed time.Time
			if err := conn.QueryRow(ctx, `SELECT started_at FROM build_attempts WHERE build_id = $1`, id).Scan(&claimed); err != nil {
				b.Fatal(err)
			}
			data, err := os.ReadFile(mark)
			if err != nil {
				b.Fatal(err)
			}
			secs, err := strconv.ParseFloat(strings.TrimSpace(string(data)), 64)
			if err != nil {
				b.Fatal(err)
			}
			took = append(took, time.Unix(0, int64(secs*1e9)).Sub(claimed))
		}
		hits := strings.Count(a.output(), "environment ready: a warm spare")
		a.stop(b)
		f.noBuildVMs()
		return took, hits
	}
	cold, _ := measure(b, false, 1)
	warm, hits := measure(b, true, builds)
	slices.Sort(warm)
	b.ReportMetric(cold[0].Seconds(), "cold-claim-to-command-s")
	b.ReportMetric(warm[len(warm)/2].Seconds(), "spare-claim-to-command-p50-s")
	b.ReportMetric(warm[len(warm)-1].Seconds(), "spare-claim-to-command-max-s")
	b.ReportMetric(float64(hits), "spare-hits")
	b.ReportMetric(builds, "builds")
}
