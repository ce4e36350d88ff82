package bench

import (
	"context"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/sirupsen/logrus"

	"github.com/freeagent-build/freeagent/controller/controllertest"
	"github.com/freeagent-build/freeagent/controller/httpapi"
	"github.com/freeagent-build/freeagent/controller/serve"
	"github.com/freeagent-build/freeagent/controller/store"
	"github.com/freeagent-build/freeagent/controller/webhooks"
)

// TestProfileLifecycle is a profiling harness, not a test: with
// FREEAGENT_BENCH_PROFILE=cpu.pprof it runs the controller in this process
// (serve.Start through controllertest, as the binary does) on a durable cluster, drives the
// lifecycle load against it and writes a CPU profile of the whole process
// (controller and load generator; focus on the controller with
// `go tool pprof -focus 'controller/(httpapi|store|notify|blobs|reaper)' ...`).
// FREEAGENT_BENCH_DATABASE_URL (a database named freeagent) and
// FREEAGENT_BENCH_PGDATA use an existing server instead of a private one,
// for instance one with pg_stat_statements loaded.
//
//	FREEAGENT_BENCH_PROFILE=/tmp/cpu.pprof FREEAGENT_BENCH_SHAPE=8x2 FREEAGENT_BENCH_DURATION=20s \
//	  go test -run TestProfileLifecycle -v ./bench/
func TestProfileLifecycle(t *testing.T) {
	out := os.Getenv("FREEAGENT_BENCH_PROFILE")
	if out == "" {
		t.Skip("set FREEAGENT_BENCH_PROFILE=cpu.pprof to profile the controller under the lifecycle load")
	}
	shape := Shape{Workers: 8, Submitters: 2}
	if v := os.Getenv("FREEAGENT_BENCH_SHAPE"); v != "" {
		w, s, _ := strings.Cut(v, "x")
		shape.Workers, _ = strconv.Atoi(w)
		shape.Submitters, _ = strconv.Atoi(s)
	}
	window := 20 * time.Second
	if v := os.Getenv("FREEAGENT_BENCH_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatal(err)
		}
		window = d
	}
	ctx := context.Background()
	e := &env{cfg: DefaultConfig()}
	e.cfg.Log, e.cfg.Trace = testWriter{t}, testing.Verbose()
	defer func() {
		if err := e.close(); err != nil {
			t.Error(err)
		}
	}()
	var err error
	if e.dir, err = os.MkdirTemp("", "freeagent-bench-"); err != nil {
		t.Fatal(err)
	}
	e.onClose(func() error { return os.RemoveAll(e.dir) })
	if err := os.Chmod(e.dir, 0o711); err != nil {
		t.Fatal(err)
	}
	e.pgDir, e.dataDir = filepath.Join(e.dir, "pg"), filepath.Join(e.dir, "controller")
	if dsn := os.Getenv("FREEAGENT_BENCH_DATABASE_URL"); dsn != "" {
		// An existing server, e.g. one with pg_stat_statements loaded; its
		// data directory (holding postmaster.pid) in FREEAGENT_BENCH_PGDATA.
		e.dsn = dsn
		e.pgDir = filepath.Dir(os.Getenv("FREEAGENT_BENCH_PGDATA"))
		if err := os.Symlink(os.Getenv("FREEAGENT_BENCH_PGDATA"), filepath.Join(e.dir, "pgdata")); err == nil {
			e.pgDir = e.dir
		}
		if e.db, err = pgxpool.New(ctx, dsn); err != nil {
			t.Fatal(err)
		}
		e.onClose(func() error { e.db.Close(); return nil })
	} else if err := e.startPostgres(ctx); err != nil {
		t.Fatal(err)
	}
	log := logrus.New()
	log.SetLevel(logrus.WarnLevel)
	log.SetOutput(testWriter{t})
	// The production settings (the zero ones take serve's defaults), not
	// the test defaults, with the bench's flags (no per-key rate limit, no
	// warm placement): this profiles what the bench's controller runs.
	ctl := controllertest.Start(t, controllertest.Logger(log), controllertest.Database(e.dsn), controllertest.Configure(func(c *serve.Config) {
		c.DataDir, c.ReaperInterval, c.KeyCacheTTL, c.MetricsRefresh = e.dataDir, 5*time.Second, 0, 0
		c.Store, c.Limits, c.Webhooks = store.DefaultConfig(), httpapi.Limits{RatePerKey: httpapi.Off, RatePerWorker: httpapi.Off}, webhooks.Config{}
		c.Store.WarmPlacementWait = 1000 * time.Hour
	}))
	e.onClose(ctl.Stop) // before the cluster stops
	e.key, e.url = ctl.AdminKey, ctl.URL
	if err := e.startClient(); err != nil {
		t.Fatal(err)
	}

	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := pprof.StartCPUProfile(f); err != nil {
		t.Fatal(err)
	}
	r, err := runLifecycles(ctx, e, shape, 2*time.Second, window)
	pprof.StopCPUProfile()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%v: %.0f lifecycles/s; Postgres %.2f cores, this process %.2f, other %.2f; commits per lifecycle %.1f",
		shape, r.PerSecond, r.CPU.Postgres, r.CPU.Bench, r.CPU.Other, r.CommitsPerLifecycle)
	for _, k := range []string{"submit", "poll", "heartbeat", "upload"} {
		t.Logf("%-9s %v", k, r.Requests[k])
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
