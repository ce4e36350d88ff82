package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"testing"

	"github.com/freeagent-build/freeagent/api"
)

// TestWorkerCacheReport: PUT /api/workers/cache replaces the worker's keys
// and figures, refuses bad keys and too many, and GET /api/workers shows
// the size and hit counts; a claimed job carries its project and caches.
func TestWorkerCacheReport(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	w := e.register("mac-cache", api.Capabilities{})
	other := e.register("mac-other", api.Capabilities{})
	keys := func(id string) []string {
		t.Helper()
		rows, err := e.store.Pool().Query(ctx, `SELECT cache_key FROM worker_cache_keys WHERE worker_id = $1 ORDER BY cache_key`, id)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for rows.Next() {
			var k string
			rows.Scan(&k)
			out = append(out, k)
		}
		return out
	}
	put := func(ws *workerSession, c api.WorkerCache) error { return e.worker.ReportCache(ctx, ws.token, c) }

	if err := put(w, api.WorkerCache{Keys: []string{cacheKey(fmt.Sprint("key ", 1)), cacheKey(fmt.Sprint("key ", 2))}, Bytes: 48 << 20, Hits: 3, Misses: 1}); err != nil {
		t.Fatal(err)
	}
	if err := put(other, api.WorkerCache{Keys: []string{cacheKey(fmt.Sprint("key ", 9))}}); err != nil {
		t.Fatal(err)
	}
	if err := put(w, api.WorkerCache{Keys: []string{cacheKey(fmt.Sprint("key ", 2)), cacheKey(fmt.Sprint("key ", 3))}, Bytes: 50 << 20, Hits: 4, Misses: 1}); err != nil {
		t.Fatal(err)
	}
	want := []string{cacheKey(fmt.Sprint("key ", 2)), cacheKey(fmt.Sprint("key ", 3))}
	slices.Sort(want)
	if got := keys(w.id); !reflect.DeepEqual(got, want) {
		t.Errorf("keys after the second report %v, want %v (replaced, not added)", got, want)
	}
	if got := keys(other.id); len(got) != 1 || got[0] != cacheKey(fmt.Sprint("key ", 9)) {
		t.Errorf("the other worker's keys changed: %v", got)
	}

	tooMany := make([]string, api.MaxWorkerCacheKeys+1)
	for i := range tooMany {
		tooMany[i] = cacheKey(fmt.Sprint("key ", 100+i))
	}
	for name, c := range map[string]api.WorkerCache{
		"too many keys":  {Keys: tooMany},
		"not hex":        {Keys: []string{"../../etc/passwd"}},
		"upper case":     {Keys: []string{"ABCDEF" + cacheKey(fmt.Sprint("key ", 1))[6:]}},
		"short":          {Keys: []string{cacheKey(fmt.Sprint("key ", 1))[:63]}},
		"negative bytes": {Bytes: -1},
	} {
		wantStatus(t, put(w, c), http.StatusUnprocessableEntity)
		if got := keys(w.id); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: a refused report changed the keys to %v", name, got)
		}
	}
	wantStatus(t, e.worker.ReportCache(ctx, "fwt_not-a-token", api.WorkerCache{}), http.StatusUnauthorized)

	ws, err := e.admin.ListWorkers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range ws.Workers {
		switch x.ID {
		case w.id:
			if x.Cache == nil || x.Cache.Bytes != 50<<20 || x.Cache.Hits != 4 || x.Cache.Misses != 1 || x.Cache.HitRate() != 0.8 {
				t.Errorf("listed cache %+v, want 50 MiB, 4 hits, 1 miss", x.Cache)
			}
		case other.id:
			if x.Cache != nil {
				t.Errorf("a worker with an empty cache lists %+v", x.Cache)
			}
		}
	}

	// The job of a build with caches carries its project and the caches
	// the farm computed (TestWarmPlacement checks their keys), never the
	// ones its spec declared.
	spec := androidSpec("cached-app", "preview")
	spec.Caches = []api.CacheEntry{{Name: "npm", Key: cacheKey(fmt.Sprint("key ", 2)), Paths: []string{"$FREEAGENT_CACHE_DIR/npm"}}}
	if _, err := e.submitSpec(spec, nil); err != nil {
		t.Fatal(err)
	}
	j := w.poll(0)
	if j == nil {
		t.Fatal("no job")
	}
	if j.Project != "cached-app" || len(j.Caches) != 2 || j.Caches[0].Name != "pnpm" || j.Caches[1].Name != "gradle" {
		t.Errorf("job project %q caches %+v, want cached-app and the farm's pnpm and gradle caches", j.Project, j.Caches)
	}
}
