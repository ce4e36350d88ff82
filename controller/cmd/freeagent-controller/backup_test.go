package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/pgtest"
)

// farmEnv points the controller binary (and ctl) at one farm.
func farmEnv(t *testing.T, dsn, files, certsKey, linkKey string) {
	t.Setenv("DATABASE_URL", dsn)
	t.Setenv("FREEAGENT_BLOB_STORE", "file://"+files)
	t.Setenv("FREEAGENT_CERTS_KEY", certsKey)
	t.Setenv("FREEAGENT_LINK_KEY", linkKey)
}

func randomHex(t *testing.T, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// A farm with a completed build and its artifact, a pending build, a
// secret variable and an audit log is backed up while it serves, restored
// into a fresh database and blob store, and found whole there: both
// builds, the artifact with its SHA-256, the secret still readable with
// the same certificate key, the event chain valid and in step with the
// tables. A second restore over it is refused.
func TestBackupRestore(t *testing.T) {
	bin := controllerBinary(t)
	ctx := context.Background()
	certsKey, linkKey := randomHex(t, 32), randomHex(t, 32)
	farmEnv(t, pgtest.NewDatabase(t), t.TempDir(), certsKey, linkKey)
	a := startReplica(t, bin, "--data-dir", t.TempDir())
	_, admin := createKey(t, bin, "--name", "admin", "--role", "admin")
	c := &api.Client{BaseURL: a.URL, APIKey: admin}
	if _, err := c.SetVariable(ctx, "shop", api.SetVariableRequest{Name: "API_TOKEN", Value: "s3cret-value", Visibility: "secret", Environments: []string{"production"}}); err != nil {
		t.Fatal(err)
	}
	spec := &api.BuildSpec{Version: api.SpecVersion, Platform: api.PlatformAndroid, ProfileName: "production", Environment: "production",
		Profile: api.BuildProfile{Distribution: "store", Environment: "production"},
		App:     api.App{Name: "Shop", Slug: "shop", Version: "1.0.0", AndroidPackage: "com.example.shop", ConfigSource: "app.json"},
		Project: api.Project{PackageManager: api.PackageManagerNPM}, Credentials: api.CredentialsInfo{Source: api.CredentialsNone}}
	submit := func(c *api.Client) string {
		t.Helper()
		sub, err := c.Submit(ctx, api.SubmitRequest{Platform: api.PlatformAndroid, Source: plainSource(), Spec: spec})
		if err != nil {
			t.Fatal(err)
		}
		return sub.ID
	}
	// takeJob registers a worker, claims the next build and opens it as its VM would.
	takeJob := func(c *api.Client) (api.PollResponse, string, api.BuildJob) {
		t.Helper()
		reg, err := c.Register(ctx, api.RegisterRequest{Name: "mac", Capabilities: api.Capabilities{Platforms: []string{"android"}, MaxConcurrentBuilds: 1}})
		if err != nil {
			t.Fatal(err)
		}
		poll, err := c.Poll(ctx, reg.AccessToken, 10*time.Second)
		if err != nil || poll.Job == nil {
			t.Fatalf("poll: %+v %v", poll, err)
		}
		vm, err := c.VMAuth(ctx, poll.Job.ID, poll.Job.OTP)
		if err != nil {
			t.Fatal(err)
		}
		job, err := c.BuildJob(ctx, poll.Job.ID, vm.VMToken)
		if err != nil {
			t.Fatal(err)
		}
		return poll, vm.VMToken, job
	}
	secretOf := func(job api.BuildJob) string {
		for _, v := range job.Variables {
			if v.Name == "API_TOKEN" {
				return v.Value
			}
		}
		return ""
	}

	first := submit(c)
	poll, vmToken, job := takeJob(c)
	if poll.Job.ID != first || secretOf(job) != "s3cret-value" {
		t.Fatalf("the first build's job: %s, variables %+v", poll.Job.ID, job.Variables)
	}
	artifact := make([]byte, 300<<10)
	rand.Read(artifact) //nolint:errcheck
	sum := sha256.Sum256(artifact)
	if _, err := c.UploadArtifact(ctx, first, vmToken, "app-release.aab", bytes.NewReader(artifact), hex.EncodeToString(sum[:])); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Upload(ctx, poll.AccessToken, api.Result{BuildID: first, AttemptID: poll.Job.AttemptID, LeaseToken: poll.Job.LeaseToken, Success: true}); err != nil {
		t.Fatal(err)
	}
	second := submit(c)

	// Back up while the replica serves.
	backup := filepath.Join(t.TempDir(), "backup")
	out, stderr, code := ctl(t, bin, "backup", "--to", backup)
	if code != 0 || !strings.Contains(out, "FREEAGENT_CERTS_KEY") {
		t.Fatalf("backup: %d %s %s", code, out, stderr)
	}
	if _, stderr, code := ctl(t, bin, "backup", "--to", backup); code == 0 || !strings.Contains(stderr, "not empty") {
		t.Fatalf("a backup into a used directory: %d %s", code, stderr)
	}

	// Restore into a new database and store, then start a replica there.
	farmEnv(t, pgtest.NewDatabase(t), t.TempDir(), certsKey, linkKey)
	dataB := t.TempDir()
	if out, stderr, code := ctl(t, bin, "restore", "--from", backup, "--data-dir", dataB); code != 0 {
		t.Fatalf("restore: %d %s %s", code, out, stderr)
	}
	if _, stderr, code := ctl(t, bin, "restore", "--from", backup, "--data-dir", dataB); code == 0 || !strings.Contains(stderr, "not empty") {
		t.Fatalf("a restore over a farm: %d %s", code, stderr)
	}
	b := startReplica(t, bin, "--data-dir", dataB)
	c = &api.Client{BaseURL: b.URL, APIKey: admin} // the keys came back too
	done, err := c.GetBuild(ctx, first)
	if err != nil || done.Status != api.StatusCompleted || len(done.Artifacts) != 1 || done.Artifacts[0].SHA256 != hex.EncodeToString(sum[:]) {
		t.Fatalf("the completed build after the restore: %+v %v", done, err)
	}
	resp, err := c.DownloadArtifact(ctx, first, "app-release.aab", 0)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || !bytes.Equal(got, artifact) {
		t.Fatalf("the artifact after the restore: %d bytes, %v", len(got), err)
	}
	poll, _, job = takeJob(c)
	if poll.Job.ID != second || secretOf(job) != "s3cret-value" {
		t.Fatalf("the pending build after the restore: %s, variables %+v", poll.Job.ID, job.Variables)
	}
	if out, stderr, code := ctl(t, bin, "events", "verify"); code != 0 || !strings.Contains(out, "event chain valid") {
		t.Fatalf("events verify: %d %s %s", code, out, stderr)
	}
	if out, stderr, code := ctl(t, bin, "events", "replay", "--check"); code != 0 || !strings.Contains(out, "matches the tables") {
		t.Fatalf("events replay --check: %d %s %s", code, out, stderr)
	}

	// A damaged backup is refused before anything is visible.
	sums, err := os.ReadFile(filepath.Join(backup, "blobs.sha256"))
	if err != nil {
		t.Fatal(err)
	}
	line := strings.SplitN(string(sums), "\n", 2)[0]
	key := strings.SplitN(line, "  ", 2)[1]
	if err := os.WriteFile(filepath.Join(backup, "blobs", filepath.FromSlash(key)), []byte("tampered"), 0o600); err != nil {
		t.Fatal(err)
	}
	farmEnv(t, pgtest.NewDatabase(t), t.TempDir(), certsKey, linkKey)
	if _, stderr, code := ctl(t, bin, "restore", "--from", backup, "--data-dir", t.TempDir()); code == 0 || !strings.Contains(stderr, "damaged") {
		t.Fatalf("a damaged backup restored: %d %s", code, stderr)
	}
}
