package httpapi_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/controller/api"
	"github.com/freeagent-build/freeagent/controller/controllertest"
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
		Source: bytes.NewReader(controllertest.Project(e.t, map[string]string{"package.json": `{"name":"app"}`, "nonce": randomID()}))})
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

// TestWarmPlacement is the HTTP side of cache-aware placement: a submitted
// spec's caches reach the store (once each) and the worker's job, a worker
// holding one takes the younger warm build over an older cold one, and a
// retry carries the cache keys of the build it repeats. The claim's order,
// priorities, bounded wait, look-ahead and races are controller/store's
// tests (claim_test.go).
func TestWarmPlacement(t *testing.T) {
	t.Parallel()
	e := newEnv(t, warmWait(time.Hour))
	ctx := context.Background()
	npmA := cacheKey("a/npm")
	warmW := e.register("warm", api.Capabilities{})
	e.holdCaches(warmW, npmA, cacheKey("a/gradle"))

	cold := e.submitCached("a", 2)
	warm := e.submitCached("a", 2, cacheKey("a/pods"), npmA, npmA)
	var keys []string
	if err := e.store.Pool().QueryRow(ctx, `SELECT cache_keys FROM builds WHERE id = $1`, warm.ID).Scan(&keys); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(keys, []string{cacheKey("a/pods"), npmA}) {
		t.Fatalf("cache_keys %v", keys)
	}
	job := warmW.poll(0)
	if job == nil || job.ID != warm.ID || !e.claimedByWarm(warm.ID) {
		t.Fatalf("the worker holding the cache took %+v, want the warm build %s over the older %s", job, warm.ID, cold.ID)
	}
	if len(job.Caches) != 3 || job.Caches[1].Key != npmA || job.Project != "a" {
		t.Fatalf("the job's caches: %+v", job.Caches)
	}
	if _, err := warmW.complete(job, api.Result{Success: true}); err != nil {
		t.Fatal(err)
	}

	// A retry carries the cache keys of the build it repeats.
	retry, err := e.developer.Retry(ctx, warm.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.store.Pool().QueryRow(ctx, `SELECT cache_keys FROM builds WHERE id = $1`, retry.ID).Scan(&keys); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(keys, []string{cacheKey("a/pods"), npmA}) {
		t.Fatalf("the retry's cache_keys %v", keys)
	}
}
