package httpapi_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/controllertest"
	"github.com/freeagent-build/freeagent/controller/httpapi"
	"github.com/freeagent-build/freeagent/controller/store"
	"github.com/freeagent-build/freeagent/internal/cachekey"
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

// submitCached submits an Android build of project p whose source holds
// the lockfile lock ("" for a build with caches disabled) and whose spec
// declares a cache under a key of no file of it. It returns the build and
// the caches the farm computes for it.
func (e *env) submitCached(p string, priority int, lock string) (api.SubmitResponse, []api.CacheEntry) {
	e.t.Helper()
	spec := androidSpec(p, "preview")
	spec.Caches = []api.CacheEntry{{Name: "gradle", Key: cacheKey("planted"), Paths: []string{"$FREEAGENT_CACHE_DIR/gradle/caches"}}}
	files := map[string]string{"package.json": `{"name":"app"}`, "nonce": randomID()}
	if lock == "" {
		spec.Profile.Cache = &api.BuildCache{Disabled: ptr(true)}
	} else {
		files["pnpm-lock.yaml"] = lock
		files["apps/mobile/android/build.gradle"] = "// app"
	}
	source := controllertest.Project(e.t, files)
	resp, err := e.developer.Submit(context.Background(), api.SubmitRequest{Platform: spec.Platform, Spec: spec, Priority: &priority,
		Source: bytes.NewReader(source)})
	if err != nil {
		e.t.Fatalf("submit: %v", err)
	}
	return resp, controllertest.CacheEntries(e.t, *spec, source)
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
	warmW := e.register("warm", api.Capabilities{})

	cold, none := e.submitCached("a", 2, "")
	warm, farm := e.submitCached("a", 2, "lockfile a")
	if len(none) != 0 || len(farm) != 2 || farm[0].Name != "pnpm" || farm[1].Name != "gradle" {
		t.Fatalf("the farm's caches: %+v and %+v", none, farm)
	}
	// The worker holds the pnpm store of a's builds of preview without
	// secrets: the farm's key, bound to that domain.
	const domain = "environment:preview without secrets"
	e.holdCaches(warmW, cachekey.Qualify(domain, farm[0].Key))
	var keys []string
	if err := e.store.Pool().QueryRow(ctx, `SELECT cache_keys FROM builds WHERE id = $1`, warm.ID).Scan(&keys); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(keys, []string{farm[0].Key, farm[1].Key}) {
		t.Fatalf("cache_keys %v, want the farm's %s, %s (never the declared %s)", keys, farm[0].Key, farm[1].Key, cacheKey("planted"))
	}
	job := warmW.poll(0)
	if job == nil || job.ID != warm.ID || !e.claimedByWarm(warm.ID) {
		t.Fatalf("the worker holding the cache took %+v, want the warm build %s over the older %s", job, warm.ID, cold.ID)
	}
	if len(job.Caches) != 2 || job.Caches[1].Key != cachekey.Qualify(domain, farm[1].Key) || job.CacheDomain != domain || job.Project != "a" {
		t.Fatalf("the job's caches: %+v in %q", job.Caches, job.CacheDomain)
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
	if !slices.Equal(keys, []string{farm[0].Key, farm[1].Key}) {
		t.Fatalf("the retry's cache_keys %v", keys)
	}
}

// A cache path that climbs with ".." or reaches outside the build's tree
// and the tools' homes is refused at the submit, with the path and the
// rule, whether the spec declares it or the profile's cache.paths does.
func TestSubmitRefusesCachePathsOutsideTheBuild(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for name, edit := range map[string]func(*api.BuildSpec){
		"declared ..": func(s *api.BuildSpec) {
			s.Caches = []api.CacheEntry{{Name: "gradle", Key: cacheKey("g"), Paths: []string{"$FREEAGENT_CACHE_DIR/../../.ssh"}}}
		},
		"declared absolute": func(s *api.BuildSpec) {
			s.Caches = []api.CacheEntry{{Name: "custom", Key: cacheKey("c"), Paths: []string{"/Users/admin/Library/LaunchAgents"}}}
		},
		"profile ..":   func(s *api.BuildSpec) { s.Profile.Cache = &api.BuildCache{Paths: []string{"vendor/../../x"}} },
		"profile home": func(s *api.BuildSpec) { s.Profile.Cache = &api.BuildCache{Paths: []string{"~/.zshrc"}} },
	} {
		spec := androidSpec("paths", "preview")
		edit(spec)
		_, err := e.submitSpec(spec, nil)
		if api.StatusOf(err) != http.StatusUnprocessableEntity || !strings.Contains(err.Error(), "cache path") || !strings.Contains(err.Error(), `never has a ".." element`) {
			t.Errorf("%s: %v, want a 422 naming the path and the rule", name, err)
		}
	}
}
