package deploy

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/pgtest"
)

// buildAt builds freeagent-controller from the tree of commit into dir.
func buildAt(t *testing.T, commit, dir string) string {
	t.Helper()
	src := filepath.Join(dir, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	archive := exec.Command("git", "archive", "--format=tar", commit)
	archive.Dir = ".."
	tarball, err := archive.Output()
	if err != nil {
		t.Fatalf("git archive %s: %v", commit, err)
	}
	untar := exec.Command("tar", "-x", "-C", src)
	untar.Stdin = bytes.NewReader(tarball)
	if out, err := untar.CombinedOutput(); err != nil {
		t.Fatalf("untar: %v %s", err, out)
	}
	bin := filepath.Join(dir, "freeagent-controller")
	run(t, src, "go", "build", "-o", bin, "./controller/cmd/freeagent-controller")
	return bin
}

// previousRelease is the commit deploy/previous-release names; a shallow
// clone without it skips the test (the only allowed skip).
func previousRelease(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("previous-release")
	if err != nil {
		t.Fatal(err)
	}
	commit := strings.TrimSpace(string(b))
	probe := exec.Command("git", "cat-file", "-e", commit+"^{commit}")
	probe.Dir = ".."
	if probe.Run() != nil {
		shallow := exec.Command("git", "rev-parse", "--is-shallow-repository")
		shallow.Dir = ".."
		if out, _ := shallow.Output(); strings.TrimSpace(string(out)) == "true" {
			t.Skipf("the previous release %s is not in this shallow clone: run `git fetch --unshallow` to test upgrades", commit)
		}
		t.Fatalf("the previous release %s (deploy/previous-release) is not in this repository", commit)
	}
	return commit
}

// The previous release and this tree serve one database side by side: the
// old replica starts alone and takes builds; the new one starts (and
// migrates) while a build is in flight on the old; builds are submitted to
// both and run by workers on both; every build completes exactly once, the
// new replica is ready, and the audit log verifies.
func TestUpgradeWithMixedVersions(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the previous release")
	}
	commit := previousRelease(t)
	dir := t.TempDir()
	oldBin := buildAt(t, commit, filepath.Join(dir, "old"))
	newBin := filepath.Join(dir, "new-freeagent-controller")
	run(t, "..", "go", "build", "-o", newBin, "./controller/cmd/freeagent-controller")

	key := make([]byte, 64)
	rand.Read(key) //nolint:errcheck
	env := append(os.Environ(), "DATABASE_URL="+pgtest.NewDatabase(t), "FREEAGENT_BLOB_STORE=file://"+t.TempDir(),
		"FREEAGENT_CERTS_KEY="+hex.EncodeToString(key[:32]), "FREEAGENT_LINK_KEY="+hex.EncodeToString(key[32:]))
	serveArgs := func(name string) []string {
		return []string{"serve", "--listen", "127.0.0.1:0", "--data-dir", filepath.Join(dir, name), "--name", name, "--reaper-interval", "200ms"}
	}
	oldURL, _ := startController(t, oldBin, env, serveArgs("old")...)
	out, err := runWith(env, oldBin, "keys", "create", "--name", "admin", "--role", "admin")
	if err != nil {
		t.Fatalf("keys create: %v %s", err, out)
	}
	ctx := context.Background()
	onOld := &api.Client{BaseURL: oldURL, APIKey: strings.TrimSpace(out)}

	var mu sync.Mutex
	submitted := map[string]bool{}
	submit := func(c *api.Client) {
		t.Helper()
		sub, err := c.Submit(ctx, api.SubmitRequest{Platform: api.PlatformAndroid, Source: bytes.NewReader(emptyTarGz)})
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		submitted[sub.ID] = true
		mu.Unlock()
	}
	for range 3 {
		submit(onOld)
	}
	// A build in flight on the old replica while the new one migrates.
	reg, err := onOld.Register(ctx, api.RegisterRequest{Name: "old-mac", Capabilities: api.Capabilities{Platforms: []string{"android"}, MaxConcurrentBuilds: 1}})
	if err != nil {
		t.Fatal(err)
	}
	held, err := onOld.Poll(ctx, reg.AccessToken, 5*time.Second)
	if err != nil || held.Job == nil {
		t.Fatalf("poll on the old replica: %+v %v", held, err)
	}

	newURL, _ := startController(t, newBin, env, serveArgs("new")...)
	onNew := &api.Client{BaseURL: newURL, APIKey: onOld.APIKey}
	if out, err := runWith(env, newBin, "migrate"); err != nil {
		t.Fatalf("migrate with the new release: %v %s", err, out)
	}
	// The new replica is ready. The old one keeps serving (the builds
	// below go through it); its readiness is logged, not asserted: v0.1.0
	// wanted the exact schema it knew, so it reports 503 on a newer one
	// (docs/operations.md, "Upgrades"), which releases from v0.2.0 do not.
	for _, u := range []string{newURL, oldURL} {
		resp, err := http.Get(u + "/health/ready")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if u == newURL && resp.StatusCode != http.StatusOK {
			t.Fatalf("the new replica is not ready after its migration: %s", resp.Status)
		}
		t.Logf("%s/health/ready after the migration: %s", u, resp.Status)
	}
	// The old worker finishes its build through the old replica.
	if _, err := onOld.Upload(ctx, held.AccessToken, api.Result{BuildID: held.Job.ID, AttemptID: held.Job.AttemptID, LeaseToken: held.Job.LeaseToken, Success: true}); err != nil {
		t.Fatalf("completing the in-flight build on the old replica: %v", err)
	}
	completed := map[string]string{held.Job.ID: "old"}
	for i := range 8 {
		submit([]*api.Client{onOld, onNew}[i%2])
	}

	// One worker on each replica runs builds until none is left.
	workCtx, stop := context.WithTimeout(ctx, 2*time.Minute)
	defer stop()
	var wg sync.WaitGroup
	for name, c := range map[string]*api.Client{"old": onOld, "new": onNew} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			reg, err := c.Register(workCtx, api.RegisterRequest{Name: name + "-worker", Capabilities: api.Capabilities{Platforms: []string{"android"}, MaxConcurrentBuilds: 1}})
			if err != nil {
				t.Error(err)
				return
			}
			token := reg.AccessToken
			for workCtx.Err() == nil {
				mu.Lock()
				left := len(submitted) - len(completed)
				mu.Unlock()
				if left == 0 {
					return
				}
				p, err := c.Poll(workCtx, token, time.Second)
				if err != nil {
					continue
				}
				token = p.AccessToken
				if p.Job == nil {
					continue
				}
				if _, err := c.Upload(workCtx, token, api.Result{BuildID: p.Job.ID, AttemptID: p.Job.AttemptID, LeaseToken: p.Job.LeaseToken, Success: true}); err != nil {
					t.Errorf("%s worker: upload %s: %v", name, p.Job.ID, err)
					return
				}
				mu.Lock()
				if by, twice := completed[p.Job.ID]; twice {
					t.Errorf("build %s ran twice (by %s and %s)", p.Job.ID, by, name)
				}
				completed[p.Job.ID] = name
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for id := range submitted {
		b, err := onNew.GetBuild(ctx, id)
		if err != nil || b.Status != api.StatusCompleted {
			t.Errorf("build %s: %+v %v", id, b.Status, err)
		}
	}
	by := map[string]int{}
	for _, name := range completed {
		by[name]++
	}
	t.Logf("%d builds completed: %v", len(completed), by)
	if len(completed) != len(submitted) {
		t.Fatalf("%d of %d builds completed", len(completed), len(submitted))
	}
	if out, err := runWith(env, newBin, "events", "verify"); err != nil || !strings.Contains(out, "event chain valid") {
		t.Fatalf("events verify: %v %s", err, out)
	}
}
