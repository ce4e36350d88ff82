package serve_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/controllertest"
	"github.com/freeagent-build/freeagent/controller/httpapi"
	"github.com/freeagent-build/freeagent/controller/pgtest"
	"github.com/freeagent-build/freeagent/controller/serve"
	"github.com/freeagent-build/freeagent/controller/store"
)

// TestZeroConfigTakesDefaults starts the composition root with nothing but
// a database, a data directory and a free port: every other setting is
// zero, and the controller runs with the production defaults (90 s leases,
// the default source limit), not with 0 s leases or 0-byte limits.
func TestZeroConfigTakesDefaults(t *testing.T) {
	ctx := context.Background()
	c, err := serve.Start(ctx, serve.Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), DatabaseURL: pgtest.NewDatabase(t)}, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := c.Shutdown(sctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	_, key, err := c.Store().CreateKey(ctx, "admin", api.RoleAdmin)
	if err != nil {
		t.Fatal(err)
	}
	cl := &api.Client{BaseURL: c.URL, APIKey: key}

	limits, err := cl.Limits(ctx)
	if err != nil || limits.MaxSourceBytes != httpapi.DefaultLimits().Source {
		t.Fatalf("limits: %+v %v, want the default source limit %d", limits, err, httpapi.DefaultLimits().Source)
	}
	reg, err := cl.Register(ctx, api.RegisterRequest{Name: "mac", Capabilities: api.Capabilities{Platforms: []string{"android"}, MaxConcurrentBuilds: 1}})
	lease := store.DefaultConfig().LeaseTTL
	if err != nil || reg.LeaseTTLSeconds != int(lease.Seconds()) || reg.PollWaitSeconds != int(httpapi.DefaultLimits().PollMaxWait.Seconds()) {
		t.Fatalf("register: %+v %v, want a %v lease and the default poll wait", reg, err, lease)
	}
	// A 1 KiB source is within the limits.
	src := sourceOf(t, 1<<10)
	sub, err := cl.Submit(ctx, api.SubmitRequest{Platform: "android", Source: bytes.NewReader(src)})
	if err != nil {
		t.Fatalf("submit a 1 KiB source: %v", err)
	}
	before := time.Now()
	poll, err := cl.Poll(ctx, reg.AccessToken, 5*time.Second)
	if err != nil || poll.Job == nil || poll.Job.ID != sub.ID {
		t.Fatalf("poll: %+v %v", poll, err)
	}
	// The lease runs the default length from the claim (the database's
	// clock and ours may differ by a little).
	if got := poll.Job.LeaseExpiresAt.Sub(before); got < lease-10*time.Second || got > lease+10*time.Second {
		t.Fatalf("lease expires %v after the claim, want about %v", got, lease)
	}
}

// sourceOf is a tar.gz project archive of at least size bytes (a file of
// random bytes, which do not compress).
func sourceOf(t *testing.T, size int) []byte {
	t.Helper()
	noise := make([]byte, size)
	rand.Read(noise)
	return controllertest.Project(t, map[string]string{"package.json": `{"name":"app"}`, "noise.bin": string(noise)})
}
