package dashboard_test

import (
	"context"
	"strings"
	"testing"

	"github.com/freeagent-build/freeagent/api"
)

// TestWorkerPageShowsCaches: the worker page shows each worker's
// dependency caches as it last reported them, size and hit rate.
func TestWorkerPageShowsCaches(t *testing.T) {
	t.Parallel()
	f := newFarm(t)
	warm := f.register("warm-mac", api.Capabilities{})
	f.register("cold-mac", api.Capabilities{})
	key := strings.Repeat("ab", 32)
	if err := f.worker.ReportCache(context.Background(), warm.token, api.WorkerCache{Keys: []string{key}, Bytes: 48 << 20, Hits: 3, Misses: 1}); err != nil {
		t.Fatal(err)
	}
	admin := f.browser()
	admin.mustLogin(f.adminKey)
	p := admin.get("/workers")
	wantContains(t, p, "<th scope=\"col\">Dependency caches</th>", "48.0 MiB<br><small>75% warm (3 of 4 builds)</small>", "none reported")
}
