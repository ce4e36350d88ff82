package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/controllertest"
	"github.com/freeagent-build/freeagent/controller/pgtest"
	"github.com/freeagent-build/freeagent/internal/testsupport/syncbuf"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// controllerBinary builds this command once per test binary.
func controllerBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "fa-controller-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "freeagent-controller")
		if out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// replica is a `serve` child process.
type replica struct {
	cmd  *exec.Cmd
	URL  string
	logs syncbuf.Buffer
}

func startReplica(t *testing.T, bin string, args ...string) *replica {
	t.Helper()
	r, err := launchReplica(bin, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.stop)
	return r
}

// launchReplica starts a `serve` child process and waits until it
// listens. A replica that fails to (it exits while its database is down)
// is stopped and its log returned in the error, as a supervisor sees it.
func launchReplica(bin string, args ...string) (*replica, error) {
	r := &replica{cmd: exec.Command(bin, append([]string{"serve", "--listen", "127.0.0.1:0"}, args...)...)}
	stderr, err := r.cmd.StderrPipe()
	if err != nil {
		return nil, fmt.Errorf("start a replica: %w", err)
	}
	if err := r.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start a replica: %w", err)
	}
	if r.URL, err = controllertest.Listening(stderr, &r.logs, 60*time.Second); err != nil {
		r.stop()
		return nil, fmt.Errorf("replica did not start: %w\n%s", err, r.logs.String())
	}
	return r, nil
}

// stop kills the replica (SIGKILL: no clean shutdown) and reaps it.
func (r *replica) stop() {
	r.cmd.Process.Kill() //nolint:errcheck // it may have exited already
	r.cmd.Wait()         //nolint:errcheck // killed: the status says so
}

// TestTwoReplicasShareOneDatabase runs two controller processes on one
// database: a build submitted to A reaches a worker long-polling B at once;
// killing A makes B expire it and run the reaper; nothing is lost or run twice.
func TestTwoReplicasShareOneDatabase(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two controller processes")
	}
	bin := controllerBinary(t)
	dsn := pgtest.NewDatabase(t)
	t.Setenv("DATABASE_URL", dsn)
	data := t.TempDir() // shared files, as replicas on one host or a shared volume have
	common := []string{"--data-dir", data, "--controller-ttl", "2s", "--reaper-interval", "200ms", "--lease-ttl", "2s"}
	a := startReplica(t, bin, append([]string{"--name", "A"}, common...)...)
	b := startReplica(t, bin, append([]string{"--name", "B"}, common...)...)
	adminKey, _, code := runCmd(t, "keys", "create", "--name", "admin", "--role", "admin")
	if code != 0 {
		t.Fatal("keys create failed")
	}
	ctx := context.Background()
	onA := &api.Client{BaseURL: a.URL, APIKey: strings.TrimSpace(adminKey)}
	onB := &api.Client{BaseURL: b.URL, APIKey: onA.APIKey}

	list, err := onB.Controllers(ctx)
	if err != nil || len(list.Controllers) != 2 {
		t.Fatalf("controllers seen from B: %+v %v", list, err)
	}
	names := []string{list.Controllers[0].Name, list.Controllers[1].Name}
	slices.Sort(names)
	if !slices.Equal(names, []string{"A", "B"}) || list.Controllers[0].URL == "" {
		t.Fatalf("registry: %+v", list.Controllers)
	}

	reg, err := onB.Register(ctx, api.RegisterRequest{Name: "mac", Capabilities: api.Capabilities{MaxConcurrentBuilds: 1}})
	if err != nil {
		t.Fatal(err)
	}
	token := reg.AccessToken
	src := []byte("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03\x03\x00\x00\x00\x00\x00\x00\x00\x00\x00") // an empty tar.gz
	// Pickup across replicas: the poll on B is woken by A's NOTIFY. The
	// wake-up is timed from the moment A answered the submit (the commit is
	// done by then); the whole submit, with its fsyncs, is logged too.
	var lat, total []time.Duration
	for i := 0; i < 5; i++ {
		got := make(chan api.PollResponse, 1)
		var gotAt time.Time
		go func() {
			resp, err := onB.Poll(ctx, token, 20*time.Second)
			gotAt = time.Now()
			if err != nil {
				t.Error(err)
			}
			got <- resp
		}()
		time.Sleep(200 * time.Millisecond) // the poll is waiting on B
		start := time.Now()
		sub, err := onA.Submit(ctx, api.SubmitRequest{Platform: "ios", Source: bytes.NewReader(src)})
		if err != nil {
			t.Fatal(err)
		}
		submitted := time.Now()
		resp := <-got
		lat, total = append(lat, max(0, gotAt.Sub(submitted))), append(total, gotAt.Sub(start))
		if resp.Job == nil || resp.Job.ID != sub.ID {
			t.Fatalf("poll on B: %+v", resp)
		}
		token = resp.AccessToken
		if _, err := onB.Upload(ctx, token, api.Result{BuildID: resp.Job.ID, AttemptID: resp.Job.AttemptID, LeaseToken: resp.Job.LeaseToken, Success: true}); err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(lat)
	t.Logf("submit answered by A → job on B: %v (from the start of the submit: %v)", lat, total)
	if lat[len(lat)/2] > 100*time.Millisecond {
		t.Fatalf("median pickup across replicas %v, want under 100 ms (%v)", lat[len(lat)/2], lat)
	}

	// A second worker, on A, takes a build, acknowledges it and goes silent.
	reg2, err := onA.Register(ctx, api.RegisterRequest{Name: "silent", Capabilities: api.Capabilities{MaxConcurrentBuilds: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := onA.Submit(ctx, api.SubmitRequest{Platform: "android", Source: bytes.NewReader(src)}); err != nil {
		t.Fatal(err)
	}
	held, err := onA.Poll(ctx, reg2.AccessToken, 0)
	if err != nil || held.Job == nil {
		t.Fatalf("silent worker's poll: %+v %v", held, err)
	}
	first := held.Job
	if _, err := onA.Heartbeat(ctx, held.AccessToken, api.HeartbeatRequest{BuildID: first.ID, AttemptID: first.AttemptID, LeaseToken: first.LeaseToken}); err != nil {
		t.Fatal(err)
	}

	// A dies without deregistering; B expires it and its reaper requeues the
	// build whose lease lapsed.
	a.stop()
	deadline := time.Now().Add(15 * time.Second)
	for {
		list, err := onB.Controllers(ctx)
		if err == nil && len(list.Controllers) == 1 && list.Controllers[0].Name == "B" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("B did not expire A: %+v %v", list, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	var build api.Build
	for build, err = onB.GetBuild(ctx, first.ID); err == nil && build.Status != api.StatusPending; build, err = onB.GetBuild(ctx, first.ID) {
		if time.Now().After(deadline) {
			t.Fatalf("the lapsed build was not requeued by B: %+v", build)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil || build.Attempts != 1 {
		t.Fatalf("requeued build: %+v %v", build, err)
	}

	// The audit log saw all of it, and agrees with the tables.
	out, stderr, code := runCmd(t, "events", "verify")
	if code != 0 || !strings.Contains(out, "event chain valid") {
		t.Fatalf("events verify: %d %s %s", code, out, stderr)
	}
	out, stderr, code = runCmd(t, "events", "replay", "--check")
	if code != 0 || !strings.Contains(out, "matches the tables") {
		t.Fatalf("events replay --check: %d %s %s", code, out, stderr)
	}
	evs, err := onB.Events(ctx, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	completed := 0
	for _, ev := range evs.Events {
		switch {
		case ev.EntityType == "controller":
			kinds = append(kinds, ev.EventType)
		case ev.EventType == "build.completed":
			completed++
		case ev.EventType == "build.requeued" && ev.EntityID != first.ID:
			t.Fatalf("a finished build was requeued: %+v", ev)
		}
	}
	if !slices.Contains(kinds, "controller.expired") || slices.Index(kinds, "controller.registered") < 0 || completed != 5 {
		t.Fatalf("controller events %v, completed %d", kinds, completed)
	}
}
