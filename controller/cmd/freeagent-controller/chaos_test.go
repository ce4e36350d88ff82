package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/sirupsen/logrus"

	"github.com/freeagent-build/freeagent/controller/api"
	"github.com/freeagent-build/freeagent/controller/blobs"
	"github.com/freeagent-build/freeagent/controller/gc"
	"github.com/freeagent-build/freeagent/controller/pgcluster"
	"github.com/freeagent-build/freeagent/controller/store"
)

// chaosFarm is two controller processes on one Postgres cluster and one
// file store, which the test kills and restarts under running builds.
type chaosFarm struct {
	t      *testing.T
	bin    string
	args   []string
	pgDir  string
	pgPort int

	mu       sync.Mutex
	replicas []*replica // nil while one is down
	pg       *pgcluster.Cluster
	apiKey   string
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func (f *chaosFarm) startPostgres() {
	f.t.Helper()
	pg, err := pgcluster.Start(context.Background(), pgcluster.Options{Dir: f.pgDir, Port: f.pgPort})
	if err != nil {
		f.t.Fatal(err)
	}
	f.mu.Lock()
	f.pg = pg
	f.mu.Unlock()
}

// restartPostgres stops the server (a fast shutdown: open transactions are
// aborted and every connection dropped) and starts it again.
func (f *chaosFarm) restartPostgres() {
	f.mu.Lock()
	pg := f.pg
	f.mu.Unlock()
	pg.Stop() //nolint:errcheck // it is started again below
	time.Sleep(300 * time.Millisecond)
	f.startPostgres()
}

// killReplica kills replica i (SIGKILL, no clean shutdown) and starts
// another in its place.
func (f *chaosFarm) killReplica(i int) {
	f.mu.Lock()
	r := f.replicas[i]
	f.replicas[i] = nil
	f.mu.Unlock()
	r.cmd.Process.Kill()
	r.cmd.Wait()
	time.Sleep(200 * time.Millisecond)
	nr := startReplica(f.t, f.bin, append([]string{"--name", fmt.Sprint("R", i)}, f.args...)...)
	f.mu.Lock()
	f.replicas[i] = nr
	f.mu.Unlock()
}

// client returns an API client of a live replica, chosen at random.
func (f *chaosFarm) client() *api.Client {
	f.mu.Lock()
	defer f.mu.Unlock()
	var live []*replica
	for _, r := range f.replicas {
		if r != nil {
			live = append(live, r)
		}
	}
	if len(live) == 0 {
		return &api.Client{BaseURL: "http://127.0.0.1:1", APIKey: f.apiKey}
	}
	return &api.Client{BaseURL: live[rand.IntN(len(live))].URL, APIKey: f.apiKey}
}

// transient says whether a failed call may succeed on another try: the
// replica or the database was down, not a refusal.
func transient(err error) bool {
	code := api.StatusOf(err)
	return code == 0 || code >= 500
}

// do calls fn on live replicas until it succeeds, fails for good, or the
// budget runs out.
func (f *chaosFarm) do(budget time.Duration, fn func(*api.Client) error) error {
	deadline := time.Now().Add(budget)
	for {
		err := fn(f.client())
		if err == nil || !transient(err) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func artifactBody(attemptID, name string) string {
	return "made by attempt " + attemptID + " as " + name
}

func sha256hex(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// chaosAgent is a worker that runs builds: every attempt uploads an
// artifact named after itself and one named app.apk, then completes. Told
// to, it abandons its next attempt after the uploads, by re-registering (a
// restarted agent) or by going silent until the lease expires.
type chaosAgent struct {
	f       *chaosFarm
	name    string
	id      string
	token   string
	abandon atomic.Int32 // 0: behave; 1: re-register; 2: go silent

	mu       *sync.Mutex
	uploaded map[string][]string // attempt → artifact names it uploaded
}

func (a *chaosAgent) keep(g api.TokenGrant) {
	if g.AccessToken != "" {
		a.token = g.AccessToken
	}
}

func (a *chaosAgent) register() error {
	return a.f.do(20*time.Second, func(c *api.Client) error {
		reg, err := c.Register(context.Background(), api.RegisterRequest{ID: a.id, Name: a.name, Capabilities: api.Capabilities{MaxConcurrentBuilds: 1}})
		if err == nil {
			a.id, a.token = reg.ID, reg.AccessToken
		}
		return err
	})
}

func (a *chaosAgent) run(ctx context.Context) {
	for ctx.Err() == nil {
		var job *api.Job
		err := a.f.do(5*time.Second, func(c *api.Client) error {
			resp, err := c.Poll(ctx, a.token, time.Second)
			if err == nil {
				a.keep(resp.TokenGrant)
				job = resp.Job
			}
			return err
		})
		if api.StatusOf(err) == 401 { // the token was lost with an answer: start again
			a.register() //nolint:errcheck // retried on the next round
			continue
		}
		if err != nil || job == nil {
			continue
		}
		a.runJob(ctx, job)
	}
}

func (a *chaosAgent) runJob(ctx context.Context, j *api.Job) {
	hb := func() error {
		return a.f.do(5*time.Second, func(c *api.Client) error {
			resp, err := c.Heartbeat(ctx, a.token, api.HeartbeatRequest{BuildID: j.ID, AttemptID: j.AttemptID, LeaseToken: j.LeaseToken})
			if err == nil {
				a.keep(resp.TokenGrant)
			}
			return err
		})
	}
	if hb() != nil {
		return // the lease is gone: drop the job, as an agent does
	}
	var vmToken string
	if err := a.f.do(5*time.Second, func(c *api.Client) error {
		auth, err := c.VMAuth(ctx, j.ID, j.OTP)
		vmToken = auth.VMToken
		return err
	}); err != nil {
		return // a lost answer used the OTP: the attempt goes silent and expires
	}
	for _, name := range []string{j.AttemptID + ".apk", "app.apk"} {
		body := artifactBody(j.AttemptID, name)
		err := a.f.do(5*time.Second, func(c *api.Client) error {
			_, err := c.UploadArtifact(ctx, j.ID, vmToken, name, strings.NewReader(body), sha256hex(body))
			return err
		})
		if err != nil {
			return
		}
		a.mu.Lock()
		a.uploaded[j.AttemptID] = append(a.uploaded[j.AttemptID], name)
		a.mu.Unlock()
		if hb() != nil {
			return
		}
	}
	switch a.abandon.Swap(0) {
	case 1:
		a.register() //nolint:errcheck // a restarted agent: its attempt goes back to the queue
		return
	case 2:
		time.Sleep(4 * time.Second) // silent past the lease: the reaper takes the build back
		return
	}
	a.f.do(5*time.Second, func(c *api.Client) error { //nolint:errcheck // a lost completion expires and runs again
		_, err := c.Upload(ctx, a.token, api.Result{BuildID: j.ID, AttemptID: j.AttemptID, LeaseToken: j.LeaseToken, Success: true})
		return err
	})
}

// TestChaosBuildsListOnlyTheirCompletingAttemptsArtifacts kills and
// restarts controller replicas, Postgres and agents while builds run, every
// attempt uploading an artifact named after itself and one all attempts
// share (app.apk). Every completed build then lists exactly the artifacts of
// the attempt that completed it, app.apk holding that attempt's bytes; and
// once the garbage collector ran, the disk holds no other attempt's files.
func TestChaosBuildsListOnlyTheirCompletingAttemptsArtifacts(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts controller processes and Postgres")
	}
	bin := controllerBinary(t)
	data := t.TempDir()
	// As root Postgres runs as the postgres user, who must reach its
	// directory: t.TempDir()'s parent is private.
	pgParent, err := os.MkdirTemp("", "fa-chaos-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(pgParent) })
	if err := os.Chmod(pgParent, 0o711); err != nil {
		t.Fatal(err)
	}
	f := &chaosFarm{t: t, bin: bin, pgDir: filepath.Join(pgParent, "pg"), pgPort: freePort(t)}
	f.startPostgres()
	t.Cleanup(func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.pg.Stop()
	})
	dsn := f.pg.DSN(pgcluster.DefaultDatabase)
	t.Setenv("DATABASE_URL", dsn)
	f.args = []string{"--data-dir", data, "--controller-ttl", "3s", "--reaper-interval", "200ms", "--lease-ttl", "3s",
		"--max-attempts", "50", "--gc-interval", "1h", "--min-free-disk", "0"}
	f.replicas = []*replica{startReplica(t, bin, append([]string{"--name", "R0"}, f.args...)...), startReplica(t, bin, append([]string{"--name", "R1"}, f.args...)...)}
	out, _, code := runCmd(t, "keys", "create", "--name", "chaos", "--role", "admin")
	if code != 0 {
		t.Fatal("keys create failed")
	}
	f.apiKey = strings.TrimSpace(out)

	var mu sync.Mutex
	uploaded := map[string][]string{}
	var agents []*chaosAgent
	for i := range 3 {
		a := &chaosAgent{f: f, name: fmt.Sprint("agent-", i), mu: &mu, uploaded: uploaded}
		if err := a.register(); err != nil {
			t.Fatal(err)
		}
		agents = append(agents, a)
	}
	ctx, stopAgents := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, a := range agents {
		wg.Add(1)
		go func() { defer wg.Done(); a.run(ctx) }()
	}
	defer func() { stopAgents(); wg.Wait() }()

	src := []byte("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03\x03\x00\x00\x00\x00\x00\x00\x00\x00\x00") // an empty tar.gz
	var ids []string
	submit := func(n int) {
		for i := range n {
			key := fmt.Sprintf("chaos-%d-%d", len(ids), i)
			err := f.do(20*time.Second, func(c *api.Client) error {
				sub, err := c.Submit(context.Background(), api.SubmitRequest{Platform: "android", IdempotencyKey: key, Source: strings.NewReader(string(src))})
				if err == nil {
					ids = append(ids, sub.ID)
				}
				return err
			})
			if err != nil {
				t.Fatalf("submit: %v", err)
			}
		}
	}
	submit(8)

	// Faults, in turn, while the builds run.
	faults := []func(){
		func() { agents[0].abandon.Store(1) },
		func() { f.killReplica(0) },
		func() { agents[1].abandon.Store(2) },
		f.restartPostgres,
		func() { agents[2].abandon.Store(1) },
		func() { f.killReplica(1) },
		func() { submit(4) },
		f.restartPostgres,
		func() { agents[0].abandon.Store(2) },
	}
	for _, fault := range faults {
		fault()
		time.Sleep(1200 * time.Millisecond)
	}

	var settle *pgx.Conn
	// Settle: no more faults; backoffs are skipped so the retried builds
	// run now, and every build ends.
	settle, err = pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer settle.Close(context.Background())
	deadline := time.Now().Add(30 * time.Second)
	for {
		var open int
		settle.QueryRow(context.Background(), `SELECT count(*) FROM builds WHERE status NOT IN ('completed', 'failed', 'cancelled')`).Scan(&open)
		if open == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d builds did not end", open)
		}
		settle.Exec(context.Background(), `UPDATE builds SET run_after = now() WHERE status = 'pending' AND run_after > now()`) //nolint:errcheck
		time.Sleep(300 * time.Millisecond)
	}
	stopAgents()
	wg.Wait()

	// Every completed build lists exactly its completing attempt's artifacts.
	completing := map[string]string{} // build → attempt
	abandonedWithArtifacts := 0
	for _, id := range ids {
		var b api.Build
		if err := f.do(10*time.Second, func(c *api.Client) (err error) { b, err = c.GetBuild(context.Background(), id); return }); err != nil {
			t.Fatal(err)
		}
		if b.Status != api.StatusCompleted {
			t.Logf("build %s ended %s after %d attempts", id, b.Status, b.Attempts)
			continue
		}
		var winner string
		for _, at := range b.AttemptHistory {
			if at.Status == "completed" {
				if winner != "" {
					t.Fatalf("build %s has two completed attempts: %+v", id, b.AttemptHistory)
				}
				winner = at.ID
			} else if len(uploaded[at.ID]) > 0 {
				abandonedWithArtifacts++
			}
		}
		completing[id] = winner
		want := []string{winner + ".apk", "app.apk"}
		slices.Sort(want)
		var got []string
		for _, art := range b.Artifacts {
			got = append(got, art.Name)
			if art.SHA256 != sha256hex(artifactBody(winner, art.Name)) {
				t.Errorf("build %s: %s is not its completing attempt's (%s) bytes", id, art.Name, winner)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("build %s lists %v, want exactly its completing attempt's %v (attempts %+v)", id, got, want, b.AttemptHistory)
		}
	}
	if len(completing) < len(ids)/2 {
		t.Fatalf("only %d of %d builds completed", len(completing), len(ids))
	}
	if abandonedWithArtifacts == 0 {
		t.Fatal("no completed build had an abandoned attempt that uploaded artifacts: the faults did not reach the case under test")
	}
	t.Logf("%d builds, %d completed, %d abandoned attempts with artifacts on completed builds", len(ids), len(completing), abandonedWithArtifacts)

	// The listing above is the controller's doing, not the collector's
	// (its first pass is an hour away): the abandoned attempts' rows are
	// still there.
	var strays int
	settle.QueryRow(context.Background(), `SELECT count(*) FROM artifacts a JOIN builds b ON b.id = a.build_id
		WHERE a.attempt_id IS DISTINCT FROM b.attempt_id`).Scan(&strays)
	if strays == 0 {
		t.Fatal("no abandoned attempt's artifact rows: the listing was not put to the test")
	}

	// With the replicas stopped, one collection without grace leaves only
	// the completing attempts' artifacts and the sources on disk.
	f.mu.Lock()
	for _, r := range f.replicas {
		r.cmd.Process.Kill()
		r.cmd.Wait()
	}
	f.mu.Unlock()
	st, err := store.Open(context.Background(), dsn, store.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	key, err := blobs.LoadOrCreateKey(filepath.Join(data, "certs.key"))
	if err != nil {
		t.Fatal(err)
	}
	files, err := blobs.Open(filepath.Join(data, "files"), key)
	if err != nil {
		t.Fatal(err)
	}
	log := logrus.New()
	log.SetOutput(testLogWriter{t})
	rep, err := gc.New(st, files, gc.Config{OrphanGrace: time.Nanosecond, StagingMaxAge: time.Nanosecond, LeftoverAge: time.Nanosecond}, log).Collect(context.Background())
	if err != nil || !rep.Ran || rep.Errors != 0 || rep.StrayArtifacts != strays {
		t.Fatalf("collection: %+v %v; want %d stray artifacts removed", rep, err, strays)
	}
	t.Logf("final collection: %+v", rep)
	root := filepath.Join(data, "files", "builds")
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		parts := strings.Split(filepath.ToSlash(rel), "/")
		switch {
		case len(parts) == 2 && parts[1] == blobs.SourceFile:
		case len(parts) == 4 && parts[1] == blobs.AttemptsDir && completing[parts[0]] == parts[2]:
		default:
			t.Errorf("left on disk: %s", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if leftover, _ := os.ReadDir(filepath.Join(data, "files", "uploads")); len(leftover) != 0 {
		t.Errorf("staging uploads left: %v", leftover)
	}
}

type testLogWriter struct{ t *testing.T }

func (w testLogWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
