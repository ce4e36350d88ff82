package store_test

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/store"
	"github.com/freeagent-build/freeagent/internal/cachekey"
)

// N workers polling at once for M builds: every build is claimed exactly
// once, by one attempt, and nothing stays behind; with caches the warm
// pick (its own SKIP LOCKED) races too.
func TestClaimIsExactlyOnceUnderConcurrency(t *testing.T) {
	t.Parallel()
	for _, warm := range []bool{false, true} {
		t.Run(map[bool]string{false: "first come", true: "warm"}[warm], func(t *testing.T) {
			t.Parallel()
			claimRace(t, warm)
		})
	}
}

// claimRace races 8 workers over 60 builds; with caches, build n needs one
// of four caches and worker i holds one of them.
func claimRace(t *testing.T, caches bool) {
	f := newStore(t, func(c *store.Config) { c.WarmPlacementWait = time.Hour })
	const workers, builds = 8, 60
	keys := []string{cacheKey("k0"), cacheKey("k1"), cacheKey("k2"), cacheKey("k3")}
	want := map[string]bool{}
	for i := range builds {
		nb := store.NewBuild{}
		if caches {
			nb = withCaches(keys[i%len(keys)])
		}
		want[f.submit(nb).ID] = true
	}
	var ws []store.WorkerAuth
	for i := range workers {
		w := f.register("", api.Capabilities{MaxConcurrentBuilds: 64})
		if caches {
			if err := f.s.SetWorkerCache(f.ctx, w, api.WorkerCache{Keys: []string{held(keys[i%len(keys)])}}); err != nil {
				t.Fatal(err)
			}
		}
		ws = append(ws, w)
	}
	var mu sync.Mutex
	claims := map[string][]string{} // build → the workers that claimed it
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for _, w := range ws {
		wg.Go(func() {
			for {
				res, err := f.s.Poll(f.ctx, w)
				if err != nil {
					errs <- err
					return
				}
				if res.Job == nil {
					return
				}
				mu.Lock()
				claims[res.Job.ID] = append(claims[res.Job.ID], w.WorkerID)
				mu.Unlock()
				// Acknowledge, or the next poll redelivers this job.
				if _, err := f.s.Heartbeat(f.ctx, w, api.HeartbeatRequest{BuildID: res.Job.ID, AttemptID: res.Job.AttemptID,
					LeaseToken: res.Job.LeaseToken}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(claims) != builds {
		t.Fatalf("%d of %d builds claimed", len(claims), builds)
	}
	for id, by := range claims {
		if !want[id] || len(by) != 1 {
			t.Fatalf("build %s claimed by %v", id, by)
		}
	}
	var notBuilding, attempts, warm int
	if err := f.s.Pool().QueryRow(f.ctx, `SELECT (SELECT count(*) FROM builds WHERE status <> 'building'),
		(SELECT count(*) FROM build_attempts),
		(SELECT count(*) FROM events WHERE event_type = 'build.assigned' AND (payload->>'warm')::boolean)`).Scan(&notBuilding, &attempts, &warm); err != nil {
		t.Fatal(err)
	}
	if notBuilding != 0 || attempts != builds {
		t.Fatalf("%d builds not building, %d attempts for %d builds", notBuilding, attempts, builds)
	}
	if caches && warm == 0 {
		t.Fatal("no build was placed warm")
	}
	if !caches && warm != 0 {
		t.Fatalf("%d builds placed warm with no caches anywhere", warm)
	}
}

// A key's capacity caps the builds its workers hold, however many of them
// claim at once.
func TestClaimKeyCapacityHoldsUnderConcurrency(t *testing.T) {
	t.Parallel()
	f := newStore(t)
	key, _, err := f.s.CreateBoundKey(f.ctx, store.NewKey{Name: "capped", Role: "worker", MaxCapacity: 3})
	if err != nil {
		t.Fatal(err)
	}
	f.key = key
	for range 10 {
		f.submit(store.NewBuild{})
	}
	var wg sync.WaitGroup
	for range 6 {
		w := f.register("", api.Capabilities{MaxConcurrentBuilds: 4})
		wg.Go(func() {
			for range 4 {
				if _, err := f.s.Poll(f.ctx, w); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	var held int
	if err := f.s.Pool().QueryRow(f.ctx, `SELECT count(*) FROM builds WHERE status = 'assigned'`).Scan(&held); err != nil {
		t.Fatal(err)
	}
	if held != 3 {
		t.Fatalf("the key's workers hold %d builds, want its capacity of 3", held)
	}
	w := f.register("", api.Capabilities{})
	if res := f.poll(w); res.Job != nil || !res.AtCapacity {
		t.Fatalf("a poll beyond the key's capacity: %+v", res)
	}
}

// Builds go out by priority (0 first), then first come, first served; a
// build in its backoff waits.
func TestClaimOrderIsPriorityThenFIFO(t *testing.T) {
	t.Parallel()
	f := newStore(t)
	ids := map[string]string{}
	for i, b := range []struct {
		name     string
		priority int
	}{{"a", 2}, {"b", 0}, {"c", 2}, {"d", 0}, {"e", 1}, {"later", 0}} {
		ids[b.name] = f.submit(store.NewBuild{Priority: b.priority}).ID
		// Distinct submit times, oldest first, whatever the clock's resolution.
		f.exec(`UPDATE builds SET submitted_at = now() - make_interval(secs => 100 - $2) WHERE id = $1`, ids[b.name], i)
	}
	f.exec(`UPDATE builds SET run_after = now() + interval '1 hour' WHERE id = $1`, ids["later"])
	w := f.register("", api.Capabilities{MaxConcurrentBuilds: 10})
	var got []string
	for {
		res := f.poll(w)
		if res.Job == nil {
			break
		}
		for name, id := range ids {
			if id == res.Job.ID {
				got = append(got, name)
			}
		}
		f.ack(w, res.Job)
	}
	if want := []string{"b", "d", "e", "a", "c"}; !equal(got, want) {
		t.Fatalf("claim order %v, want %v", got, want)
	}
	if b := f.build(ids["later"]); b.Status != api.StatusPending || b.RunAfter == nil {
		t.Fatalf("a build in its backoff: %+v", b)
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A worker gets only builds of its platforms; one that names none builds both.
func TestClaimMatchesPlatforms(t *testing.T) {
	t.Parallel()
	f := newStore(t)
	ios := f.submit(store.NewBuild{Platform: api.PlatformIOS})
	f.exec(`UPDATE builds SET submitted_at = now() - interval '1 minute' WHERE id = $1`, ios.ID)
	droid := f.submit(store.NewBuild{Platform: api.PlatformAndroid})

	aw := f.register("a", android(""))
	if j := f.claim(aw); j.ID != droid.ID {
		t.Fatalf("the Android worker got %s (%s), want the Android build", j.ID, j.Platform)
	}
	if res := f.poll(f.register("a2", android(""))); res.Job != nil {
		t.Fatalf("an Android worker got the iOS build: %+v", res.Job)
	}
	if j := f.claim(f.register("any", api.Capabilities{})); j.ID != ios.ID {
		t.Fatalf("a worker naming no platform got %s, want the iOS build", j.ID)
	}
}

// A project that lists pools runs only on their workers; one that lists
// none, anywhere.
func TestClaimHonoursProjectPools(t *testing.T) {
	t.Parallel()
	f := newStore(t)
	if err := f.s.SetProjectPools(f.ctx, "app", []string{"fast"}); err != nil {
		t.Fatal(err)
	}
	pinned := f.submit(store.NewBuild{Project: "app"})
	plain := f.w(t, "default")
	if res := f.poll(plain); res.Job != nil {
		t.Fatalf("a default-pool worker got a build of a project pinned to pool fast: %+v", res.Job)
	}
	if j := f.claim(f.w(t, "fast")); j.ID != pinned.ID || j.Project != "app" {
		t.Fatalf("the fast-pool worker got %+v", j)
	}
	free := f.submit(store.NewBuild{Project: "other"})
	if j := f.claim(plain); j.ID != free.ID {
		t.Fatalf("a build of a project without pools went to %s, not the default-pool worker", j.ID)
	}
	// Clearing the list frees the project.
	if err := f.s.SetProjectPools(f.ctx, "app", nil); err != nil {
		t.Fatal(err)
	}
	again := f.submit(store.NewBuild{Project: "app"})
	if j := f.claim(f.w(t, "default")); j.ID != again.ID {
		t.Fatalf("after clearing the project's pools: %s", j.ID)
	}
}

// w registers a one-build Android worker in pool.
func (f *fixture) w(t *testing.T, pool string) store.WorkerAuth {
	t.Helper()
	return f.register("", android(pool))
}

// A build with signing credentials goes only to a trusted pool, and to a
// local-driver worker there only when the pool allows it.
func TestClaimSendsCredentialsOnlyToTrustedPools(t *testing.T) {
	t.Parallel()
	f := newStore(t)
	signed := f.submit(store.NewBuild{HasCerts: true})
	untrusted := f.w(t, "lab")
	if res := f.poll(untrusted); res.Job != nil {
		t.Fatalf("an untrusted pool's worker got a credentialed build: %+v", res.Job)
	}
	if err := f.s.SetPool(f.ctx, api.Pool{Name: "vault", Trusted: true}); err != nil {
		t.Fatal(err)
	}
	local := f.register("", api.Capabilities{Platforms: []string{api.PlatformAndroid}, Pool: "vault", VMDriver: api.VMDriverLocal})
	if res := f.poll(local); res.Job != nil {
		t.Fatalf("a local-driver worker in a trusted pool that does not allow local got a credentialed build: %+v", res.Job)
	}
	if err := f.s.SetPool(f.ctx, api.Pool{Name: "vault", Trusted: true, AllowLocal: true}); err != nil {
		t.Fatal(err)
	}
	j := f.claim(local)
	if j.ID != signed.ID || j.CertsURL == nil {
		t.Fatalf("the trusted pool's local worker got %+v", j)
	}
	// A build without credentials runs anywhere.
	plain := f.submit(store.NewBuild{})
	if j := f.claim(untrusted); j.ID != plain.ID || j.CertsURL != nil {
		t.Fatalf("the untrusted worker got %+v", j)
	}
}

// An admin's pause stops new builds, not running ones; a resume restores
// them.
func TestClaimSkipsAdminPausedWorkers(t *testing.T) {
	t.Parallel()
	f := newStore(t)
	w := f.register("", api.Capabilities{MaxConcurrentBuilds: 2})
	first := f.submit(store.NewBuild{})
	j := f.claim(w)
	f.ack(w, j)
	second := f.submit(store.NewBuild{})
	if _, err := f.s.SetWorkerPaused(f.ctx, w.WorkerID, true); err != nil {
		t.Fatal(err)
	}
	if res := f.poll(w); res.Job != nil || !res.Paused {
		t.Fatalf("a paused worker's poll: %+v", res)
	}
	if b := f.build(second.ID); b.Status != api.StatusPending {
		t.Fatalf("the build a paused worker polled for: %s", b.Status)
	}
	// Its running build goes on.
	if _, err := f.s.Heartbeat(f.ctx, w, api.HeartbeatRequest{BuildID: j.ID, AttemptID: j.AttemptID, LeaseToken: j.LeaseToken}); err != nil {
		t.Fatalf("a paused worker's heartbeat for %s: %v", first.ID, err)
	}
	// Another worker is not held back.
	if j := f.claim(f.register("", api.Capabilities{})); j.ID != second.ID {
		t.Fatalf("an unpaused worker got %s", j.ID)
	}
	third := f.submit(store.NewBuild{})
	if _, err := f.s.SetWorkerPaused(f.ctx, w.WorkerID, false); err != nil {
		t.Fatal(err)
	}
	if j := f.claim(w); j.ID != third.ID {
		t.Fatalf("the resumed worker got %s", j.ID)
	}
}

// A full worker gets nothing and is told so; a job whose answer was lost
// comes again with a fresh lease, and the old lease no longer works.
func TestClaimCapacityAndRedelivery(t *testing.T) {
	t.Parallel()
	f := newStore(t)
	w := f.register("", android(""))
	f.submit(store.NewBuild{})
	f.submit(store.NewBuild{})
	first := f.claim(w)
	again := f.claim(w) // not acknowledged: the same job again
	if again.ID != first.ID || again.AttemptID != first.AttemptID || again.LeaseToken == first.LeaseToken {
		t.Fatalf("redelivery: first %+v, again %+v", first, again)
	}
	_, err := f.s.Heartbeat(f.ctx, w, api.HeartbeatRequest{BuildID: first.ID, AttemptID: first.AttemptID, LeaseToken: first.LeaseToken})
	wantErr(t, "a heartbeat with the lease of the lost answer", err, store.ErrLeaseLost)
	f.ack(w, again)
	if res := f.poll(w); res.Job != nil || !res.AtCapacity {
		t.Fatalf("a full worker's poll: %+v", res)
	}
}

// Warm placement: among the builds of the queue head's priority, a worker
// takes the oldest one whose dependency cache it holds; a higher priority
// still goes first, and once the head has waited WarmPlacementWait the
// claim is first come, first served again.
func TestClaimPrefersWarmCachesWithinABoundedWait(t *testing.T) {
	t.Parallel()
	f := newStore(t, func(c *store.Config) { c.WarmPlacementWait = time.Minute })
	k := cacheKey("app lockfile")
	warmWorker := f.register("warm", api.Capabilities{MaxConcurrentBuilds: 10})
	if err := f.s.SetWorkerCache(f.ctx, warmWorker, api.WorkerCache{Keys: []string{held(k)}}); err != nil {
		t.Fatal(err)
	}
	age := func(id string, secs int) {
		f.exec(`UPDATE builds SET submitted_at = now() - make_interval(secs => $2), run_after = now() - make_interval(secs => $2) WHERE id = $1`, id, secs)
	}
	cold := f.submit(store.NewBuild{})
	age(cold.ID, 30)
	warm := f.submit(withCaches(cacheKey("other"), k))
	age(warm.ID, 20)
	j := f.claim(warmWorker)
	if j.ID != warm.ID {
		t.Fatalf("the worker holding the cache got %s, want the warm build %s over the older cold one", j.ID, warm.ID)
	}
	if len(j.Caches) != 2 || j.Caches[1].Key != held(k) {
		t.Fatalf("the job's caches: %+v", j.Caches)
	}
	f.ack(warmWorker, j)

	// A worker without the cache is first come, first served.
	warm2 := f.submit(withCaches(k))
	age(warm2.ID, 10)
	if j := f.claim(f.register("cold", api.Capabilities{})); j.ID != cold.ID {
		t.Fatalf("a worker without caches got %s, want the oldest build %s", j.ID, cold.ID)
	}

	// A better priority beats a warm build.
	urgent := f.submit(store.NewBuild{Priority: 0})
	f.exec(`UPDATE builds SET priority = 1 WHERE id = $1`, warm2.ID)
	j = f.claim(warmWorker)
	if j.ID != urgent.ID {
		t.Fatalf("got %s, want the priority-0 cold build %s before the priority-1 warm one", j.ID, urgent.ID)
	}
	f.ack(warmWorker, j)

	// The head has waited longer than WarmPlacementWait: first come, first served.
	late := f.submit(store.NewBuild{Priority: 1})
	age(late.ID, 90)
	j = f.claim(warmWorker)
	if j.ID != late.ID {
		t.Fatalf("got %s, want the head %s that waited past WarmPlacementWait", j.ID, late.ID)
	}
	f.ack(warmWorker, j)
	if j := f.claim(warmWorker); j.ID != warm2.ID {
		t.Fatalf("got %s, want the warm build %s last", j.ID, warm2.ID)
	}
}

// Warm placement looks at most 100 builds behind the queue head: a warm
// build further back waits its turn, so the claim never scans the queue.
func TestClaimWarmLookaheadIsBounded(t *testing.T) {
	t.Parallel()
	f := newStore(t, func(c *store.Config) { c.WarmPlacementWait = time.Hour })
	k := cacheKey("far")
	w := f.register("", api.Capabilities{MaxConcurrentBuilds: 64})
	if err := f.s.SetWorkerCache(f.ctx, w, api.WorkerCache{Keys: []string{held(k)}}); err != nil {
		t.Fatal(err)
	}
	head := f.submit(store.NewBuild{})
	far := f.submit(withCaches(k))
	// 100 cold builds between the head and the warm one.
	f.exec(`INSERT INTO builds (id, status, platform, token_hash, source_size, source_sha256, source_format, timeout_seconds, submitted_at, priority)
		SELECT 'zz' || lpad(to_hex(g), 24, '0'), 'pending', 'android', sha256(('lookahead-' || g)::bytea), 1, repeat('0', 64), 'tar.gz', 1800,
			(SELECT submitted_at FROM builds WHERE id = $1) + g * interval '1 microsecond', 0
		FROM generate_series(1, 100) g`, head.ID)
	f.exec(`UPDATE builds SET submitted_at = submitted_at + interval '1 second' WHERE id = $1`, far.ID)
	for _, c := range []struct{ want, why string }{
		{head.ID, "the head: the warm build is 101 behind it"},
		{"zz" + strings.Repeat("0", 23) + "1", "the next: the warm build is still 100 behind it"},
		{far.ID, "the warm build, 99 behind the head"},
	} {
		j := f.claim(w)
		if j.ID != c.want {
			t.Fatalf("claimed %s, want %s (%s)", j.ID, c.want, c.why)
		}
		f.ack(w, j)
	}
}

// A spec's cache keys are stored with the build once each, and only
// SHA-256 keys are accepted.
func TestSubmitRecordsCacheKeys(t *testing.T) {
	t.Parallel()
	f := newStore(t)
	k1, k2 := cacheKey("pods"), cacheKey("npm")
	b := f.submit(withCaches(k1, k2, k1))
	var keys []string
	if err := f.s.Pool().QueryRow(f.ctx, `SELECT cache_keys FROM builds WHERE id = $1`, b.ID).Scan(&keys); err != nil {
		t.Fatal(err)
	}
	if !equal(keys, []string{k1, k2}) {
		t.Fatalf("cache_keys %v", keys)
	}
	nb := withCaches("not-a-sha")
	nb.ID, nb.Platform, nb.SourceFormat, nb.Commit = store.NewID(), api.PlatformAndroid, "zip", func() error { return nil }
	_, err := f.s.Submit(f.ctx, nb)
	wantErr(t, "a cache key that is not a SHA-256", err, store.ErrInvalid)
}

// A build's caches are kept to its cache domain: its environment, and
// whether it holds secrets (signing credentials, a sensitive or secret
// variable). The job's keys, the VM's spec and warm placement all bind
// the farm's keys to the domain the claim decided, so a build with
// secrets never gets the archive a build without them saved, and is not
// placed for it; an admin can make a project one domain.
func TestClaimKeepsCacheDomainsApart(t *testing.T) {
	t.Parallel()
	f := newStore(t, func(c *store.Config) { c.WarmPlacementWait = time.Hour })
	k := cacheKey("the gradle files")
	submit := func(env string, signed bool, age int) api.Build {
		t.Helper()
		spec, err := json.Marshal(api.BuildSpec{ProjectName: "app", Environment: env,
			Caches: []api.CacheEntry{{Name: "gradle", Key: k, Paths: []string{"$FREEAGENT_CACHE_DIR/gradle/caches"}}}})
		if err != nil {
			t.Fatal(err)
		}
		b := f.submit(store.NewBuild{Project: "app", Spec: spec, HasCredentials: signed})
		f.exec(`UPDATE builds SET submitted_at = now() - make_interval(secs => $2), run_after = now() - make_interval(secs => $2) WHERE id = $1`, b.ID, age)
		return b
	}
	w := f.register("w", api.Capabilities{MaxConcurrentBuilds: 10})
	claim := func(want api.Build, domain string) *api.Job {
		t.Helper()
		j := f.claim(w)
		if j.ID != want.ID {
			t.Fatalf("claimed %s, want %s", j.ID, want.ID)
		}
		if j.CacheDomain != domain || len(j.Caches) != 1 || j.Caches[0].Key != cachekey.Qualify(domain, k) {
			t.Fatalf("job of domain %q with caches %+v, want domain %q and its key", j.CacheDomain, j.Caches, domain)
		}
		env, err := f.s.AttemptEnvironment(f.ctx, j.ID, j.AttemptID)
		if err != nil || env.Spec.Caches[0].Key != j.Caches[0].Key {
			t.Fatalf("the VM's spec has caches %+v (%v), want the job's key %s", env.Spec.Caches, err, j.Caches[0].Key)
		}
		f.ack(w, j)
		return j
	}

	open := claim(submit("production", false, 100), "environment:production without secrets")
	claim(submit("preview", false, 90), "environment:preview without secrets")
	signed := claim(submit("production", true, 80), "environment:production with secrets")
	if signed.Caches[0].Key == open.Caches[0].Key {
		t.Fatal("a signed build has the key an unsigned one saved under")
	}

	// Warm placement: the worker holds the unsigned build's archive. A
	// signed build of the same files is no warmer than any other; an
	// unsigned one is.
	if err := f.s.SetWorkerCache(f.ctx, w, api.WorkerCache{Keys: []string{open.Caches[0].Key}}); err != nil {
		t.Fatal(err)
	}
	cold := submit("production", false, 70)
	f.exec(`UPDATE builds SET spec = spec - 'caches', cache_keys = '{}' WHERE id = $1`, cold.ID)
	signed2 := submit("production", true, 60)
	open2 := submit("production", false, 50)
	if j := f.claim(w); j.ID != open2.ID {
		t.Fatalf("claimed %s, want the unsigned build %s the worker's cache is for (cold %s, signed %s)", j.ID, open2.ID, cold.ID, signed2.ID)
	} else {
		f.ack(w, j)
	}
	f.ack(w, f.claim(w))
	claim(signed2, "environment:production with secrets")

	// A secret variable puts the environment's builds in the domain with
	// secrets, signed or not.
	f.exec(`INSERT INTO project_variables (project, environment, name, visibility, type, value_sealed) VALUES ('app', 'production', 'API_TOKEN', 'secret', 'string', 'x')`)
	if j := claim(submit("production", false, 40), "environment:production with secrets"); j.Caches[0].Key != signed.Caches[0].Key {
		t.Fatal("builds with secrets of one environment do not share their caches")
	}

	// An admin makes the project one domain.
	if err := f.s.SetProjectOneCacheDomain(f.ctx, "app", true); err != nil {
		t.Fatal(err)
	}
	a := claim(submit("production", true, 30), "project")
	b := claim(submit("preview", false, 20), "project")
	if a.Caches[0].Key != b.Caches[0].Key {
		t.Fatal("one domain: the project's builds have different keys")
	}
	if one, err := f.s.ProjectOneCacheDomain(f.ctx, "app"); err != nil || !one {
		t.Fatalf("ProjectOneCacheDomain: %v %v", one, err)
	}
}
