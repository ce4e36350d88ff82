package controllertest_test

import (
	"context"
	"os"
	"testing"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/controllertest"
	"github.com/freeagent-build/freeagent/controller/pgtest"
	"github.com/freeagent-build/freeagent/controller/store"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// TestStart checks what a test gets: a controller answering on its URL with
// keys of each role (and their roles enforced), options applied, a restart
// on the same database, and a project-bound key.
func TestStart(t *testing.T) {
	ctx := context.Background()
	c := controllertest.Start(t, controllertest.StoreConfig(func(s *store.Config) { s.MaxAttempts = 2 }))
	if got := c.Serve.Store().Config().MaxAttempts; got != 2 {
		t.Fatalf("the store runs with MaxAttempts %d, want the option's 2", got)
	}
	if _, err := c.Admin.ListWorkers(ctx); err != nil {
		t.Fatalf("admin lists workers: %v", err)
	}
	if _, err := c.Developer.ListWorkers(ctx); api.StatusOf(err) != 403 {
		t.Fatalf("developer lists workers: %v, want 403", err)
	}
	if _, err := c.Worker.Register(ctx, api.RegisterRequest{Name: "mac"}); err != nil {
		t.Fatalf("worker registers: %v", err)
	}
	c.Restart()
	workers, err := c.Admin.ListWorkers(ctx)
	if err != nil || len(workers.Workers) != 1 {
		t.Fatalf("after a restart the worker is still known: %+v %v", workers, err)
	}
	_, alice := c.ProjectKey("alice", "shop")
	if _, err := alice.ListBuilds(ctx, api.ListOptions{}); err != nil {
		t.Fatalf("a project key lists builds: %v", err)
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Admin.ListWorkers(ctx); err == nil {
		t.Fatal("the controller still answers after Stop")
	}
}
