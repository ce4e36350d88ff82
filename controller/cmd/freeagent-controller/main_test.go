package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/blobs"
	"github.com/freeagent-build/freeagent/controller/httpapi"
	"github.com/freeagent-build/freeagent/controller/pgtest"
	"github.com/freeagent-build/freeagent/controller/webhooks"
)

func TestMain(m *testing.M) {
	code := pgtest.Main(m)
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

func runCmd(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return out.String(), errb.String(), code
}

func TestKeysCreateListRevoke(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	t.Setenv("DATABASE_URL", dsn)
	out, stderr, code := runCmd(t, "keys", "create", "--name", "ci", "--role", "developer")
	if code != 0 {
		t.Fatalf("keys create: %d %s", code, stderr)
	}
	key := strings.TrimSpace(out)
	if !regexp.MustCompile(`^fak_[A-Za-z0-9_-]{43}$`).MatchString(key) {
		t.Fatalf("stdout must be the key alone, got %q", out)
	}
	out, _, code = runCmd(t, "keys", "create", "--name", "w", "--role", "worker", "--json")
	var created map[string]string
	if code != 0 || json.Unmarshal([]byte(out), &created) != nil || created["role"] != "worker" || created["key"] == "" || created["id"] == "" {
		t.Fatalf("keys create --json: %q", out)
	}
	out, _, _ = runCmd(t, "keys", "list", "--json")
	var keys []map[string]any
	if json.Unmarshal([]byte(out), &keys) != nil || len(keys) != 2 {
		t.Fatalf("keys list: %q", out)
	}
	if strings.Contains(out, key) || strings.Contains(out, created["key"]) {
		t.Fatal("keys list prints a secret")
	}
	if _, _, code := runCmd(t, "keys", "revoke", created["id"]); code != 0 {
		t.Fatal("revoke failed")
	}
	if _, stderr, code := runCmd(t, "keys", "revoke", "nope"); code != 1 || !strings.Contains(stderr, "keys list") {
		t.Fatalf("revoking an unknown key: %d %q", code, stderr)
	}
	if _, stderr, code := runCmd(t, "keys", "create", "--name", "x", "--role", "root"); code != 2 || !strings.Contains(stderr, "admin|developer|worker") {
		t.Fatalf("bad role: %d %q", code, stderr)
	}
}

func TestConfigPrecedenceFlagOverEnvOverDefault(t *testing.T) {
	t.Setenv("FREEAGENT_LISTEN", "127.0.0.1:9999")
	t.Setenv("FREEAGENT_LEASE_TTL", "45s")
	t.Setenv("FREEAGENT_DATA_DIR", "/from/env")
	cfg, _, err := parseConfig("serve", []string{"--listen", "127.0.0.1:7777"}, &bytes.Buffer{}, true)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Serve.Listen != "127.0.0.1:7777" || cfg.Serve.Store.LeaseTTL != 45*time.Second || cfg.Serve.DataDir != "/from/env" ||
		cfg.Serve.Store.MaxAttempts != 5 {
		t.Fatalf("precedence: %+v", cfg.Serve)
	}
	t.Setenv("FREEAGENT_LEASE_TTL", "soon")
	_, _, err = parseConfig("serve", nil, &bytes.Buffer{}, true)
	if err == nil || !strings.Contains(err.Error(), "FREEAGENT_LEASE_TTL") {
		t.Fatalf("a bad environment value must name the variable: %v", err)
	}
}

func TestConfigBlobStore(t *testing.T) {
	t.Setenv("FREEAGENT_DATA_DIR", "/d")
	cfg, _, err := parseConfig("serve", nil, &bytes.Buffer{}, true)
	if err != nil || cfg.Serve.BlobStore != "" {
		t.Fatalf("default (the data directory's files): %q %v", cfg.Serve.BlobStore, err)
	}
	t.Setenv("FREEAGENT_BLOB_STORE", "s3://from-env/p?endpoint=http://127.0.0.1:9000")
	if cfg, _, err = parseConfig("serve", nil, &bytes.Buffer{}, true); err != nil || cfg.Serve.BlobStore != "s3://from-env/p?endpoint=http://127.0.0.1:9000" {
		t.Fatalf("from the environment: %q %v", cfg.Serve.BlobStore, err)
	}
	if cfg, _, err = parseConfig("serve", []string{"--blob-store", "file:///srv/files"}, &bytes.Buffer{}, true); err != nil || cfg.Serve.BlobStore != "file:///srv/files" {
		t.Fatalf("the flag over the environment: %q %v", cfg.Serve.BlobStore, err)
	}
}

// TestConfigTrustedProxies: --trusted-proxies (FREEAGENT_TRUSTED_PROXIES)
// reaches serve.Config as prefixes, an address as itself; a host name is
// refused naming the setting; unset, no proxy is trusted.
func TestConfigTrustedProxies(t *testing.T) {
	t.Setenv("FREEAGENT_DATA_DIR", "/d")
	cfg, _, err := parseConfig("serve", nil, &bytes.Buffer{}, true)
	if err != nil || len(cfg.Serve.TrustedProxies) != 0 {
		t.Fatalf("default: %v %v", cfg.Serve.TrustedProxies, err)
	}
	t.Setenv("FREEAGENT_TRUSTED_PROXIES", "127.0.0.1, 10.0.0.0/8")
	if cfg, _, err = parseConfig("serve", nil, &bytes.Buffer{}, true); err != nil || fmt.Sprint(cfg.Serve.TrustedProxies) != "[127.0.0.1/32 10.0.0.0/8]" {
		t.Fatalf("from the environment: %v %v", cfg.Serve.TrustedProxies, err)
	}
	if cfg, _, err = parseConfig("serve", []string{"--trusted-proxies", "::1"}, &bytes.Buffer{}, true); err != nil || fmt.Sprint(cfg.Serve.TrustedProxies) != "[::1/128]" {
		t.Fatalf("the flag over the environment: %v %v", cfg.Serve.TrustedProxies, err)
	}
	if _, _, err := parseConfig("serve", []string{"--trusted-proxies", "caddy"}, &bytes.Buffer{}, true); err == nil ||
		!strings.Contains(err.Error(), `--trusted-proxies: "caddy" is neither an address nor a CIDR prefix`) {
		t.Errorf("--trusted-proxies with a host name: %v", err)
	}
}

func TestConfigLinksAndMetrics(t *testing.T) {
	t.Setenv("FREEAGENT_DATA_DIR", "/d")
	t.Setenv("FREEAGENT_METRICS_PUBLIC", "1")
	t.Setenv("FREEAGENT_LINK_TTL", "48h")
	cfg, _, err := parseConfig("serve", []string{"--public-url", "https://builds.example.com/"}, &bytes.Buffer{}, true)
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Serve.MetricsPublic || cfg.Serve.LinkTTL != 48*time.Hour || cfg.Serve.PublicURL != "https://builds.example.com/" {
		t.Fatalf("config: %+v", cfg.Serve)
	}
	if _, _, err := parseConfig("serve", []string{"--webhook-allow", "10.0.0.0/8,hooks.internal"}, &bytes.Buffer{}, true); err == nil ||
		!strings.Contains(err.Error(), `--webhook-allow: "hooks.internal" is neither an address nor a CIDR prefix`) {
		t.Errorf("--webhook-allow with a host name: %v", err)
	}
	_, _, err = parseConfig("serve", []string{"--public-url", "builds.example.com"}, &bytes.Buffer{}, true)
	if err == nil || !strings.Contains(err.Error(), "--public-url") {
		t.Fatalf("a relative public URL must be refused, naming the flag: %v", err)
	}
	t.Setenv("FREEAGENT_METRICS_PUBLIC", "maybe")
	if _, _, err = parseConfig("serve", nil, &bytes.Buffer{}, true); err == nil || !strings.Contains(err.Error(), "FREEAGENT_METRICS_PUBLIC") {
		t.Fatalf("a bad FREEAGENT_METRICS_PUBLIC must be named: %v", err)
	}
}

// TestServeBuiltInDatabase runs the real binary as a child process with no
// DATABASE_URL: it starts its own cluster, serves, answers readiness, shares
// the cluster with `keys create`, and stops cleanly on SIGTERM.
func TestServeBuiltInDatabase(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a durable cluster")
	}
	bin := controllerBinary(t)
	// As root the cluster runs as postgres, which must reach the data dir:
	// t.TempDir's parent is 0700, so make our own traversable one.
	parent, err := os.MkdirTemp("", "fa-serve-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(parent) })
	os.Chmod(parent, 0o711)
	data := filepath.Join(parent, "data")
	// The webhook check delivers to this machine: allowed by name, as an admin would.
	cmd := exec.Command(bin, "serve", "--data-dir", data, "--listen", "127.0.0.1:0", "--webhook-allow", "127.0.0.1")
	cmd.Env = append(os.Environ(), "DATABASE_URL=")
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	urls := make(chan string, 1)
	var logBuf bytes.Buffer
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			logBuf.WriteString(sc.Text() + "\n")
			if m := regexp.MustCompile(`listening on (http://[0-9.:]+)`).FindStringSubmatch(sc.Text()); m != nil {
				urls <- m[1]
			}
		}
		close(urls) // exited
	}()
	var url string
	select {
	case u, ok := <-urls:
		if !ok {
			t.Fatalf("serve exited before listening:\n%s", logBuf.String())
		}
		url = u
	case <-time.After(60 * time.Second):
		t.Fatalf("serve did not report listening:\n%s", logBuf.String())
	}
	resp, err := http.Get(url + "/health/ready")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("ready: %v %v", resp, err)
	}
	resp.Body.Close()
	// A second serve on the same data directory is refused, naming the
	// running controller's pid and URL (not attached to its database).
	second := exec.Command(bin, "serve", "--data-dir", data, "--listen", "127.0.0.1:0")
	second.Env = append(os.Environ(), "DATABASE_URL=")
	if out, err := second.CombinedOutput(); err == nil || !strings.Contains(string(out), fmt.Sprintf("another controller (pid %d)", cmd.Process.Pid)) ||
		!strings.Contains(string(out), "listens on "+url) || !strings.Contains(string(out), "--data-dir") {
		t.Fatalf("a second serve on the same data directory: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "keys", "create", "--name", "t", "--role", "admin", "--data-dir", data).Output()
	if err != nil {
		t.Fatalf("keys create while serving: %v", err)
	}
	req, _ := http.NewRequest(http.MethodGet, url+"/api/builds", nil)
	req.Header.Set("X-API-Key", strings.TrimSpace(string(out)))
	resp, err = http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("the new key is not accepted by the running server: %v %v", resp, err)
	}
	resp.Body.Close()
	req, _ = http.NewRequest(http.MethodGet, url+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(out)))
	resp, err = http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("/metrics with the admin key: %v %v", resp, err)
	}
	resp.Body.Close()
	if st, err := os.Stat(filepath.Join(data, "links.key")); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the install link key was not created 0600 in the data directory: %v %v", st, err)
	}
	checkWebhookDelivered(t, url, strings.TrimSpace(string(out)))
	cmd.Process.Signal(os.Interrupt)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve exited with %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop within 30 s of SIGINT")
	}
	// The cluster stopped with it.
	if b, err := os.ReadFile(filepath.Join(data, "postgres", "pgdata", "postmaster.pid")); err == nil {
		t.Fatalf("postmaster.pid still present after shutdown: %s", b)
	}
}

// checkWebhookDelivered registers a local webhook on the running controller,
// submits a build, and waits for the signed build.submitted delivery: the
// sealer and the dispatcher run inside serve.
func checkWebhookDelivered(t *testing.T, url, adminKey string) {
	t.Helper()
	got := make(chan string, 10)
	var secret atomic.Value // set once the webhook exists
	secret.Store("")
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if webhooks.Sign([]byte(secret.Load().(string)), r.Header.Get(api.HeaderWebhookTimestamp), body) != r.Header.Get(api.HeaderWebhookSignature) {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		got <- r.Header.Get(api.HeaderWebhookEvent)
	}))
	defer rcv.Close()
	admin := &api.Client{BaseURL: url, APIKey: adminKey}
	ctx := context.Background()
	hook, err := admin.CreateWebhook(ctx, api.WebhookRequest{URL: rcv.URL, Events: []string{"build.submitted"}})
	if err != nil {
		t.Fatalf("create webhook: %v", err)
	}
	secret.Store(hook.Secret)
	var src bytes.Buffer
	gz := gzip.NewWriter(&src)
	gz.Write([]byte("not really a tar, but gzip is what is sniffed"))
	gz.Close()
	if _, err := admin.Submit(ctx, api.SubmitRequest{Platform: "android", Source: &src}); err != nil {
		t.Fatalf("submit: %v", err)
	}
	select {
	case ev := <-got:
		if ev != "build.submitted" {
			t.Fatalf("webhook event %q", ev)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the running controller delivered no webhook within 60 s")
	}
}

// TestKeysMaxCapacity: --max-capacity caps a key's workers, shown by keys list.
func TestKeysMaxCapacity(t *testing.T) {
	t.Setenv("DATABASE_URL", pgtest.NewDatabase(t))
	out, stderr, code := runCmd(t, "keys", "create", "--name", "alice-mac", "--role", "worker", "--max-capacity", "2", "--json")
	var created map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &created) != nil || created["max_capacity"] != float64(2) {
		t.Fatalf("keys create --max-capacity: %d %q %s", code, out, stderr)
	}
	runCmd(t, "keys", "create", "--name", "bob-mac", "--role", "worker")
	out, _, _ = runCmd(t, "keys", "list", "--json")
	var keys []map[string]any
	if json.Unmarshal([]byte(out), &keys) != nil || len(keys) != 2 {
		t.Fatalf("keys list: %q", out)
	}
	for _, k := range keys {
		if want := map[string]any{"alice-mac": float64(2), "bob-mac": nil}[k["name"].(string)]; k["max_capacity"] != want {
			t.Errorf("key %v: max_capacity %v, want %v", k["name"], k["max_capacity"], want)
		}
	}
	out, _, _ = runCmd(t, "keys", "list")
	if !strings.Contains(out, "MAX CAPACITY") || !regexp.MustCompile(`alice-mac\s+worker\s+2\s`).MatchString(out) {
		t.Fatalf("keys list table does not show the capacity:\n%s", out)
	}
	if _, stderr, code := runCmd(t, "keys", "create", "--name", "x", "--role", "worker", "--max-capacity", "-1"); code != 2 || !strings.Contains(stderr, "--max-capacity") {
		t.Fatalf("a negative capacity: %d %q", code, stderr)
	}
}

func TestConfigBuildTokenTTL(t *testing.T) {
	t.Setenv("FREEAGENT_DATA_DIR", "/d")
	cfg, _, err := parseConfig("serve", nil, &bytes.Buffer{}, true)
	if err != nil || cfg.Serve.Store.BuildTokenTTL != 30*24*time.Hour {
		t.Fatalf("default build token TTL: %v %v", cfg.Serve.Store.BuildTokenTTL, err)
	}
	t.Setenv("FREEAGENT_BUILD_TOKEN_TTL", "72h")
	if cfg, _, err = parseConfig("serve", nil, &bytes.Buffer{}, true); err != nil || cfg.Serve.Store.BuildTokenTTL != 72*time.Hour {
		t.Fatalf("FREEAGENT_BUILD_TOKEN_TTL: %v %v", cfg.Serve.Store.BuildTokenTTL, err)
	}
	if cfg, _, err = parseConfig("serve", []string{"--build-token-ttl", "1h"}, &bytes.Buffer{}, true); err != nil || cfg.Serve.Store.BuildTokenTTL != time.Hour {
		t.Fatalf("--build-token-ttl: %v %v", cfg.Serve.Store.BuildTokenTTL, err)
	}
}

// TestConfigTokenGraceOutlastsLongPoll: a new worker token is never taken
// as lost before a long poll carrying it could have answered.
func TestConfigTokenGraceOutlastsLongPoll(t *testing.T) {
	t.Setenv("FREEAGENT_DATA_DIR", "/d")
	cfg, _, err := parseConfig("serve", []string{"--poll-max-wait", "60s"}, &bytes.Buffer{}, true)
	if err != nil || cfg.Serve.Store.TokenDeliveryGrace != 75*time.Second {
		t.Fatalf("token delivery grace with 60 s long polls: %v %v", cfg.Serve.Store.TokenDeliveryGrace, err)
	}
}

// TestConfigZeroTurnsLimitsOff: the help says 0 means "no limit" for the
// rate limits and the artifact cap, while serve fills a zero with its
// default; the command line hands serve httpapi.Off for them.
func TestConfigZeroTurnsLimitsOff(t *testing.T) {
	t.Setenv("FREEAGENT_DATA_DIR", "/d")
	cfg, _, err := parseConfig("serve", []string{"--rate-per-key", "0", "--rate-per-worker", "0", "--auth-failures-per-ip", "0", "--max-artifacts-per-build", "0",
		"--max-direct-uploads-per-attempt", "0"}, &bytes.Buffer{}, true)
	if err != nil {
		t.Fatal(err)
	}
	l := cfg.Serve.Limits
	if l.RatePerKey != httpapi.Off || l.RatePerWorker != httpapi.Off || l.AuthFailuresPerIP != httpapi.Off || l.ArtifactsPerBuild != httpapi.Off || l.DirectUploadsPerAttempt != httpapi.Off {
		t.Fatalf("0 on the command line must reach serve as Off: %+v", l)
	}
	cfg, _, err = parseConfig("serve", nil, &bytes.Buffer{}, true)
	if err != nil {
		t.Fatal(err)
	}
	if d := httpapi.DefaultLimits(); cfg.Serve.Limits.ArtifactsPerBuild != d.ArtifactsPerBuild || cfg.Serve.Limits.RatePerKey != d.RatePerKey || cfg.Serve.Limits.RatePerWorker != d.RatePerWorker {
		t.Fatalf("unset limits must keep their defaults: %+v", cfg.Serve.Limits)
	}
}

func TestConfigRetentionAndDiskFloor(t *testing.T) {
	t.Setenv("FREEAGENT_DATA_DIR", "/d")
	cfg, _, err := parseConfig("serve", nil, &bytes.Buffer{}, true)
	if err != nil {
		t.Fatal(err)
	}
	s := cfg.Serve
	if s.Store.RetainArtifacts != 30*24*time.Hour || s.Store.RetainSources != 7*24*time.Hour || s.Store.RetainLogs != 90*24*time.Hour ||
		s.MinFreeDisk != (blobs.Floor{Bytes: 5 << 30}) {
		t.Fatalf("defaults: artifacts %v sources %v logs %v floor %+v", s.Store.RetainArtifacts, s.Store.RetainSources, s.Store.RetainLogs, s.MinFreeDisk)
	}
	t.Setenv("FREEAGENT_RETAIN_LOGS", "0")
	t.Setenv("FREEAGENT_MIN_FREE_DISK", "5%")
	cfg, _, err = parseConfig("serve", []string{"--retain-artifacts", "14d", "--retain-sources", "36h"}, &bytes.Buffer{}, true)
	if err != nil {
		t.Fatal(err)
	}
	s = cfg.Serve
	if s.Store.RetainArtifacts != 14*24*time.Hour || s.Store.RetainSources != 36*time.Hour || s.Store.RetainLogs != 0 || s.MinFreeDisk != (blobs.Floor{Percent: 5}) {
		t.Fatalf("set: artifacts %v sources %v logs %v floor %+v", s.Store.RetainArtifacts, s.Store.RetainSources, s.Store.RetainLogs, s.MinFreeDisk)
	}
	for _, bad := range [][]string{{"--retain-artifacts", "soon"}, {"--retain-sources", "-1d"}, {"--min-free-disk", "lots"}, {"--min-free-disk", "100%"}} {
		_, _, err := parseConfig("serve", bad, &bytes.Buffer{}, true)
		if err == nil || !strings.Contains(err.Error(), strings.TrimPrefix(bad[0], "--")) {
			t.Errorf("%v: want an error naming the setting, got %v", bad, err)
		}
	}
}

// TestTLSFlags: --tls-cert and --tls-key (or FREEAGENT_TLS_CERT/KEY) come
// in pairs, and unusable files stop serve before it binds anything.
func TestTLSFlags(t *testing.T) {
	t.Setenv("FREEAGENT_TLS_CERT", "")
	os.Unsetenv("FREEAGENT_TLS_CERT")
	for _, args := range [][]string{{"--tls-cert", "c.pem"}, {"--tls-key", "k.pem"}} {
		if _, _, err := parseConfig("serve", args, &bytes.Buffer{}, true); err == nil || !strings.Contains(err.Error(), "go together") {
			t.Errorf("%v: %v", args, err)
		}
	}
	t.Setenv("FREEAGENT_TLS_CERT", "/env/cert.pem")
	cfg, _, err := parseConfig("serve", []string{"--tls-key", "/k.pem"}, &bytes.Buffer{}, true)
	if err != nil || cfg.Serve.TLSCert != "/env/cert.pem" || cfg.Serve.TLSKey != "/k.pem" {
		t.Fatalf("from the environment: %+v %v", cfg, err)
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "bad.pem"), []byte("not pem"), 0o600)
	_, stderr, code := runCmd(t, "serve", "--data-dir", dir, "--listen", "127.0.0.1:0",
		"--tls-cert", filepath.Join(dir, "bad.pem"), "--tls-key", filepath.Join(dir, "bad.pem"))
	if code == 0 || !strings.Contains(stderr, "--tls-cert") || !strings.Contains(stderr, "PEM") {
		t.Fatalf("unusable certificate: exit %d %s", code, stderr)
	}
}
