package store_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/pgtest"
	"github.com/freeagent-build/freeagent/controller/store"
	"github.com/freeagent-build/freeagent/internal/cachekey"
)

// One PostgreSQL cluster for the test binary, a fresh database per test.
func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// fixture is a migrated store on a fresh database with a worker key.
type fixture struct {
	t   *testing.T
	ctx context.Context
	s   *store.Store
	key store.APIKey // a worker key, unbound
	// tokens are the registered workers' tokens, by worker id.
	tokens map[string]string
}

// newStore opens a store on a fresh database; opts adjust the default
// configuration before it opens.
func newStore(t *testing.T, opts ...func(*store.Config)) *fixture {
	t.Helper()
	ctx := t.Context()
	cfg := store.DefaultConfig()
	cfg.ControllerID = "test-controller"
	for _, o := range opts {
		o(&cfg)
	}
	s, err := store.Open(ctx, pgtest.NewDatabase(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	if _, err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	key, _, err := s.CreateKey(ctx, "workers", "worker")
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, ctx: ctx, s: s, key: key, tokens: map[string]string{}}
}

// register registers a worker (id "" draws one) and authenticates it, as a
// request with its token would.
func (f *fixture) register(id string, caps api.Capabilities) store.WorkerAuth {
	f.t.Helper()
	reg, err := f.s.Register(f.ctx, api.RegisterRequest{ID: id, Name: "worker " + id, Capabilities: caps}, f.key)
	if err != nil {
		f.t.Fatalf("register %q: %v", id, err)
	}
	f.tokens[reg.WorkerID] = reg.Grant.AccessToken
	w, err := f.s.AuthenticateWorker(f.ctx, reg.Grant.AccessToken, f.key)
	if err != nil {
		f.t.Fatalf("authenticate worker %s: %v", reg.WorkerID, err)
	}
	return w
}

// android is a worker that builds only Android, one build at a time.
func android(pool string) api.Capabilities {
	return api.Capabilities{Platforms: []string{api.PlatformAndroid}, MaxConcurrentBuilds: 1, Pool: pool}
}

// submit queues a build; nb's zero fields get an id, the Android platform
// and a no-op file commit.
func (f *fixture) submit(nb store.NewBuild) api.Build {
	f.t.Helper()
	if nb.ID == "" {
		nb.ID = store.NewID()
	}
	if nb.Platform == "" {
		nb.Platform = api.PlatformAndroid
	}
	if nb.SourceFormat == "" {
		nb.SourceFormat = "tar.gz"
	}
	if nb.Commit == nil {
		nb.Commit = func() error { return nil }
	}
	sub, err := f.s.Submit(f.ctx, nb)
	if err != nil {
		f.t.Fatalf("submit: %v", err)
	}
	return sub.Build
}

// withCaches is a build whose spec names dependency caches with these keys.
func withCaches(keys ...string) store.NewBuild {
	spec := api.BuildSpec{}
	for _, k := range keys {
		spec.Caches = append(spec.Caches, api.CacheEntry{Name: "npm", Key: k, Paths: []string{"~/.npm"}})
	}
	b, err := json.Marshal(spec)
	if err != nil {
		panic(err) // a fixed, plain value
	}
	return store.NewBuild{Spec: b}
}

// openDomain is the cache domain of the builds withCaches makes: no
// environment, no secrets.
const openDomain = "environment: without secrets"

// held is key k of a build withCaches makes as a worker holds it: bound to
// the build's cache domain.
func held(k string) string { return cachekey.Qualify(openDomain, k) }

// cacheKey is a valid cache key (a SHA-256) named by s.
func cacheKey(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// poll claims for w and fails the test on an error.
func (f *fixture) poll(w store.WorkerAuth) store.PollResult {
	f.t.Helper()
	res, err := f.s.Poll(f.ctx, w)
	if err != nil {
		f.t.Fatalf("poll by %s: %v", w.WorkerID, err)
	}
	return res
}

// claim polls for w and fails unless it got a job.
func (f *fixture) claim(w store.WorkerAuth) *api.Job {
	f.t.Helper()
	res := f.poll(w)
	if res.Job == nil {
		f.t.Fatalf("worker %s got no job: %+v", w.WorkerID, res)
	}
	return res.Job
}

// ack sends the first heartbeat of a job: assigned → building.
func (f *fixture) ack(w store.WorkerAuth, j *api.Job) {
	f.t.Helper()
	if _, err := f.s.Heartbeat(f.ctx, w, api.HeartbeatRequest{BuildID: j.ID, AttemptID: j.AttemptID, LeaseToken: j.LeaseToken}); err != nil {
		f.t.Fatalf("heartbeat %s: %v", j.ID, err)
	}
}

// build reads a build.
func (f *fixture) build(id string) api.Build {
	f.t.Helper()
	b, err := f.s.GetBuild(f.ctx, id)
	if err != nil {
		f.t.Fatalf("read build %s: %v", id, err)
	}
	return b
}

// exec runs SQL directly: the tests move time by moving timestamps.
func (f *fixture) exec(sql string, args ...any) {
	f.t.Helper()
	if _, err := f.s.Pool().Exec(f.ctx, sql, args...); err != nil {
		f.t.Fatalf("%s: %v", sql, err)
	}
}

// sweep runs one sweep and fails unless it ran.
func (f *fixture) sweep() store.SweepReport {
	f.t.Helper()
	r, err := f.s.Sweep(f.ctx)
	if err != nil || !r.Ran {
		f.t.Fatalf("sweep: %+v, %v", r, err)
	}
	return r
}

// runAfterIn is how far in the future build id becomes claimable again
// (negative: already claimable), by the database's clock.
func (f *fixture) runAfterIn(id string) time.Duration {
	f.t.Helper()
	var secs float64
	if err := f.s.Pool().QueryRow(f.ctx, `SELECT extract(epoch FROM run_after - now())::float8 FROM builds WHERE id = $1`, id).Scan(&secs); err != nil {
		f.t.Fatal(err)
	}
	return time.Duration(secs * float64(time.Second))
}

// event is one row of the audit log, as written.
type event struct {
	Type, Entity, ID string
	Payload          map[string]any
}

// events reads the audit log in order (sealed or not).
func (f *fixture) events() []event {
	f.t.Helper()
	rows, err := f.s.Pool().Query(f.ctx, `SELECT event_type, entity_type, entity_id, payload::text FROM events ORDER BY ord`)
	if err != nil {
		f.t.Fatal(err)
	}
	defer rows.Close()
	var out []event
	for rows.Next() {
		var e event
		var p string
		if err := rows.Scan(&e.Type, &e.Entity, &e.ID, &p); err != nil {
			f.t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(p), &e.Payload); err != nil {
			f.t.Fatal(err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		f.t.Fatal(err)
	}
	return out
}

// wantErr fails unless err is target.
func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: got %v, want %v", what, err, target)
	}
}
