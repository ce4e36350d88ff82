package httpapi_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/controller/api"
	"github.com/freeagent-build/freeagent/controller/httpapi"
	"github.com/freeagent-build/freeagent/controller/store"
)

// cacheKey is a cache key (a SHA-256 in hex) made from name.
func cacheKey(name string) string {
	s := sha256.Sum256([]byte(name))
	return hex.EncodeToString(s[:])
}

// holdCaches records that worker w holds the caches keys, as its
// PUT /api/workers/cache report does.
func (e *env) holdCaches(w *workerSession, keys ...string) {
	e.t.Helper()
	_, err := e.store.Pool().Exec(context.Background(), `INSERT INTO worker_cache_keys (worker_id, cache_key)
		SELECT $1, unnest($2::text[]) ON CONFLICT DO NOTHING`, w.id, keys)
	if err != nil {
		e.t.Fatal(err)
	}
}

// submitCached submits an Android build of project p whose spec names
// caches with keys (none: a build with nothing to restore).
func (e *env) submitCached(p string, priority int, keys ...string) api.SubmitResponse {
	e.t.Helper()
	spec := androidSpec(p, "preview")
	for i, k := range keys {
		spec.Caches = append(spec.Caches, api.CacheEntry{Name: []string{"npm", "gradle", "custom"}[i%3], Key: k, Paths: []string{"node_modules"}})
	}
	resp, err := e.developer.Submit(context.Background(), api.SubmitRequest{Platform: spec.Platform, Spec: spec, Priority: &priority,
		Source: bytes.NewReader(project(e.t, map[string]string{"package.json": `{"name":"app"}`, "nonce": randomID()}))})
	if err != nil {
		e.t.Fatalf("submit: %v", err)
	}
	return resp
}

// claimedByWarm says whether build id's claim was a warm placement, as its
// build.assigned audit event records.
func (e *env) claimedByWarm(id string) bool {
	e.t.Helper()
	var warm bool
	err := e.store.Pool().QueryRow(context.Background(), `SELECT (payload->>'warm')::boolean FROM events
		WHERE entity_id = $1 AND event_type = 'build.assigned' ORDER BY ord DESC LIMIT 1`, id).Scan(&warm)
	if err != nil {
		e.t.Fatalf("the assignment of build %s: %v", id, err)
	}
	return warm
}

func warmWait(d time.Duration) envOption {
	return func(c *store.Config, _ *httpapi.Limits) { c.WarmPlacementWait = d }
}

// TestWarmPlacement: among builds of one priority a worker takes the one
// whose cache it holds before older cold ones; priorities still come
// first; a cold build claimable for longer than --warm-placement-wait is
// taken first; a worker holding nothing takes builds in order.
func TestWarmPlacement(t *testing.T) {
	t.Parallel()
	e := newEnv(t, warmWait(time.Hour))
	ctx := context.Background()
	npmA, npmB := cacheKey("a/npm"), cacheKey("b/npm")
	warmW := e.register("warm", api.Capabilities{})
	e.holdCaches(warmW, npmA, cacheKey("a/gradle"))
	coldW := e.register("cold", api.Capabilities{})

	take := func(w *workerSession, want string, wantWarm bool) {
		t.Helper()
		job := w.poll(0)
		if job == nil || job.ID != want {
			t.Fatalf("worker %s took %+v, want build %s", w.id, job, want)
		}
		if got := e.claimedByWarm(want); got != wantWarm {
			t.Fatalf("build %s: warm placement %v, want %v", want, got, wantWarm)
		}
		if _, err := w.complete(job, api.Result{Success: true}); err != nil {
			t.Fatal(err)
		}
	}

	// The spec's cache keys are stored with the build, once each.
	cold1 := e.submitCached("a", 2)
	otherProject := e.submitCached("b", 2, npmB)
	warm1 := e.submitCached("a", 2, cacheKey("a/pods"), npmA, npmA)
	var keys []string
	if err := e.store.Pool().QueryRow(ctx, `SELECT cache_keys FROM builds WHERE id = $1`, warm1.ID).Scan(&keys); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(keys, []string{cacheKey("a/pods"), npmA}) {
		t.Fatalf("cache_keys %v", keys)
	}
	take(warmW, warm1.ID, true)         // younger, but warm
	take(coldW, cold1.ID, false)        // a worker without caches: first come, first served
	take(warmW, otherProject.ID, false) // nothing warm left: the oldest

	// Priorities dominate: a cold priority-1 build before a warm priority-2 one.
	warm2 := e.submitCached("a", 2, npmA)
	urgent := e.submitCached("a", 1)
	take(warmW, urgent.ID, false)
	take(warmW, warm2.ID, true)

	// Bounded wait: once the head has been claimable longer than the
	// bound, the claim is first come, first served again.
	old := e.submitCached("a", 2)
	warm3 := e.submitCached("a", 2, npmA)
	if _, err := e.store.Pool().Exec(ctx, `UPDATE builds SET run_after = now() - interval '2 hours', submitted_at = submitted_at - interval '2 hours' WHERE id = $1`, old.ID); err != nil {
		t.Fatal(err)
	}
	take(warmW, old.ID, false)
	take(warmW, warm3.ID, true)

	// A retry carries the cache keys of the build it repeats.
	retry, err := e.developer.Retry(ctx, warm3.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.store.Pool().QueryRow(ctx, `SELECT cache_keys FROM builds WHERE id = $1`, retry.ID).Scan(&keys); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(keys, []string{npmA}) {
		t.Fatalf("the retry's cache_keys %v", keys)
	}
}

// TestWarmPlacementOnlyWithinLookahead: a warm build further behind the
// head than the claim looks (100 builds) waits its turn: the claim never
// scans the whole queue.
func TestWarmPlacementOnlyWithinLookahead(t *testing.T) {
	t.Parallel()
	e := newEnv(t, warmWait(time.Hour))
	ctx := context.Background()
	w := e.register("w", api.Capabilities{})
	k := cacheKey("far")
	e.holdCaches(w, k)
	first := e.submitCached("a", 2)
	far := e.submitCached("a", 2, k)
	// 100 cold builds between the head and the warm one.
	if _, err := e.store.Pool().Exec(ctx, `INSERT INTO builds (id, status, platform, token_hash, source_size, source_sha256, source_format,
			timeout_seconds, submitted_at, project)
		SELECT 'zz' || lpad(to_hex(g), 24, '0'), 'pending', 'android', sha256(('lookahead-' || g)::bytea), 1, repeat('0', 64), 'tar.gz', 1800,
			(SELECT submitted_at FROM builds WHERE id = $1) + g * interval '1 microsecond', 'a'
		FROM generate_series(1, 100) g`, first.ID); err != nil {
		t.Fatal(err)
	}
	take := func(want, why string) {
		t.Helper()
		job := w.poll(0)
		if job == nil || job.ID != want {
			t.Fatalf("took %+v, want %s (%s)", job, want, why)
		}
		if _, err := w.complete(job, api.Result{Success: true}); err != nil {
			t.Fatal(err)
		}
	}
	take(first.ID, "the head: the warm build is 101 behind it")
	take("zz"+strings.Repeat("0", 23)+"1", "the head: the warm build is still 100 behind it")
	take(far.ID, "the warm build, 99 behind the head")
}

// TestRacingWarmWorkersAssignEachBuildOnce: 40 workers, each holding one of
// four caches, race over 400 builds needing those caches; every build is
// assigned once and completes, and placement was warm.
func TestRacingWarmWorkersAssignEachBuildOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, noRateLimits, warmWait(time.Hour))
	keys := []string{cacheKey("k0"), cacheKey("k1"), cacheKey("k2"), cacheKey("k3")}
	ids := raceWorkers(t, e, 400, 40, keys)
	warm := 0
	for id := range ids {
		if e.claimedByWarm(id) {
			warm++
		}
	}
	if warm == 0 {
		t.Fatal("no build was placed warm")
	}
	t.Logf("%d of %d builds placed warm", warm, len(ids))
}
