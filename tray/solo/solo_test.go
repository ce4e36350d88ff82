package solo

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/freeagent-build/freeagent/agent/hostcheck"
	"github.com/freeagent-build/freeagent/agent/secrets"
	"github.com/freeagent-build/freeagent/controller/api"
	"github.com/freeagent-build/freeagent/controller/pgcluster"
)

// dataDir is a folder the postgres user can traverse when the tests run as
// root (the private cluster then runs as postgres).
func dataDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "fa-solo-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o711)
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func TestSoloControllerWithItsOwnDatabaseAndKeys(t *testing.T) {
	if _, err := pgcluster.FindBinDir(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	ctx := context.Background()
	dir := dataDir(t)
	sec := &secrets.FileStore{Path: filepath.Join(dir, "credentials.json")}
	log := logrus.New()
	log.SetOutput(io.Discard)
	cfg := Config{DataDir: dir, Listen: "127.0.0.1:0", Secrets: sec}
	c, err := Start(ctx, cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	if r := hostcheck.Controller(ctx, hostcheck.Config{ControllerURL: c.URL, APIKey: c.WorkerKey}); r.Severity != hostcheck.OK {
		t.Fatalf("the worker key does not work: %+v", r)
	}
	if stored, _ := sec.Get(KeyWorker); stored != c.WorkerKey {
		t.Fatalf("worker key not stored: %q", stored)
	}
	dev, err := os.ReadFile(c.DeveloperKeyFile)
	if err != nil || c.DeveloperKeyFile != filepath.Join(dir, "controller", "developer-key") {
		t.Fatalf("developer key file %s: %v", c.DeveloperKeyFile, err)
	}
	if st, _ := os.Stat(c.DeveloperKeyFile); st.Mode().Perm() != 0o600 {
		t.Fatalf("developer key mode %v", st.Mode())
	}
	devClient := &api.Client{BaseURL: c.URL, APIKey: strings.TrimSpace(string(dev))}
	if _, err := devClient.ListBuilds(ctx, api.ListOptions{}); err != nil {
		t.Fatalf("expo-build's key does not work: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "controller", "postgres")); err != nil {
		t.Fatalf("the database is not under the app's data folder: %v", err)
	}
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := c.Shutdown(sctx); err != nil {
		t.Fatal(err)
	}

	// Started again on the same folder: same database, same keys.
	c2, err := Start(ctx, cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Shutdown(sctx)
	dev2, _ := os.ReadFile(c2.DeveloperKeyFile)
	if c2.WorkerKey != c.WorkerKey || string(dev2) != string(dev) {
		t.Fatal("restarting created new keys")
	}
	// A key the database no longer knows is replaced.
	sec.Set(KeyWorker, "fak_forgotten")
	c2.ensureKeys(ctx, sec)
	if c2.WorkerKey == "fak_forgotten" || c2.WorkerKey == "" {
		t.Fatalf("an unknown stored key was kept: %q", c2.WorkerKey)
	}
}

func TestLoopbackURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://0.0.0.0:8420": "http://127.0.0.1:8420", "http://[::]:8420": "http://127.0.0.1:8420",
		"http://127.0.0.1:9": "http://127.0.0.1:9", "http://192.168.64.1:8420": "http://192.168.64.1:8420",
	} {
		if got := loopbackURL(in); got != want {
			t.Errorf("loopbackURL(%q) = %q, want %q", in, got, want)
		}
	}
}
