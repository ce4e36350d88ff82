package store_test

import (
	"sync"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/controller/api"
	"github.com/freeagent-build/freeagent/controller/store"
)

// N workers polling at once for M builds: every build is claimed exactly
// once, by one attempt, and nothing stays behind.
func TestClaimIsExactlyOnceUnderConcurrency(t *testing.T) {
	t.Parallel()
	f := newStore(t)
	const workers, builds = 8, 60
	want := map[string]bool{}
	for range builds {
		want[f.submit(store.NewBuild{}).ID] = true
	}
	var ws []store.WorkerAuth
	for range workers {
		ws = append(ws, f.register("", api.Capabilities{MaxConcurrentBuilds: 64}))
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
	var pending, attempts int
	if err := f.s.Pool().QueryRow(f.ctx, `SELECT (SELECT count(*) FROM builds WHERE status <> 'building'),
		(SELECT count(*) FROM build_attempts)`).Scan(&pending, &attempts); err != nil {
		t.Fatal(err)
	}
	if pending != 0 || attempts != builds {
		t.Fatalf("%d builds not building, %d attempts for %d builds", pending, attempts, builds)
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
	if err := f.s.SetWorkerCache(f.ctx, warmWorker, api.WorkerCache{Keys: []string{k}}); err != nil {
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
	if len(j.Caches) != 2 || j.Caches[1].Key != k {
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
