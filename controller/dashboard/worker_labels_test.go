package dashboard_test

import (
	"context"
	"regexp"
	"testing"

	"github.com/freeagent-build/freeagent/api"
)

// A worker's labels (pool, macOS and Xcode versions, VM driver) are shown
// by GET /api/workers and on the workers page, with whether its pool is
// trusted.
func TestWorkerLabelsShown(t *testing.T) {
	t.Parallel()
	f := newFarm(t)
	ctx := context.Background()
	if _, err := f.admin.SetPool(ctx, api.Pool{Name: "studio", Trusted: true}); err != nil {
		t.Fatal(err)
	}
	caps := api.Capabilities{Platforms: []string{"ios"}, MaxConcurrentBuilds: 1, Pool: "studio", VMDriver: "tart",
		MacOSVersion: "15.3.1", XcodeVersion: "16.2", TartVersion: "2.30.0"}
	f.register("mac-studio", caps)
	f.register("borrowed", api.Capabilities{Platforms: []string{"android"}, MaxConcurrentBuilds: 1, Pool: "community", VMDriver: "tart"})
	list, err := f.admin.ListWorkers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, w := range list.Workers {
		if w.Name == "mac-studio" {
			found = true
			if c := w.Capabilities; c.Pool != "studio" || c.VMDriver != "tart" || c.MacOSVersion != "15.3.1" || c.XcodeVersion != "16.2" {
				t.Fatalf("GET /api/workers: %+v", c)
			}
		}
	}
	if !found {
		t.Fatalf("GET /api/workers: %+v", list.Workers)
	}
	b := f.browser()
	b.mustLogin(f.adminKey)
	page := b.get("/workers")
	wantContains(t, page, "macOS 15.3.1", "Xcode 16.2", "tart driver", "Tart 2.30.0", "pool studio (trusted)")
	if !regexp.MustCompile(`pool community</small>`).MatchString(page.body) {
		t.Errorf("the untrusted pool's worker is not shown as such:\n%s", page.body)
	}
}
