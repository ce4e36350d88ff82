package vmbootstrap

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/internal/vmshare"
)

// inProcess runs Bootstrap.Run in the test process with short timeouts.
func inProcess(t *testing.T, shared string, tune func(*Config)) int {
	t.Helper()
	cfg := DefaultConfig()
	cfg.SharedDir = shared
	cfg.WorkDir = t.TempDir()
	cfg.HomeDir = t.TempDir()
	cfg.WaitTimeout = 5 * time.Second
	cfg.PollInterval = 20 * time.Millisecond
	cfg.AuthRetryFor = time.Second
	cfg.RetryFor = time.Second
	cfg.FinalFlush = 5 * time.Second
	cfg.LogStream = fastStreamConfig()
	if tune != nil {
		tune(&cfg)
	}
	b := &Bootstrap{Config: cfg, Log: quietLog(), Version: "test"}
	return b.Run(context.Background())
}

func readBuildError(t *testing.T, shared string) vmshare.BuildError {
	t.Helper()
	var be vmshare.BuildError
	readJSONFile(t, filepath.Join(shared, vmshare.BuildErrorFile), &be)
	return be
}

// TestRefusedOTP: a used OTP is fatal at once (no retries), reported as
// build-error without vm-ready.
func TestRefusedOTP(t *testing.T) {
	t.Parallel()
	c := startController(t)
	j := c.startJob(api.PlatformAndroid, project(t, map[string]string{"package.json": "{}"}), nil)
	c.vmToken(j.job) // uses the OTP
	shared := t.TempDir()
	writeConfig(t, shared, c, j, j.job.OTP)
	start := time.Now()
	if code := inProcess(t, shared, func(c *Config) { c.AuthRetryFor = time.Minute }); code != 1 {
		t.Fatalf("exit %d", code)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatal("a 401 was retried")
	}
	be := readBuildError(t, shared)
	if be.Code != vmshare.CodeVMAuthFailed || !be.Retryable || strings.Contains(be.Message, j.job.OTP) {
		t.Fatalf("build-error %+v", be)
	}
	if fileExists(filepath.Join(shared, vmshare.ReadyFile)) {
		t.Fatal("vm-ready written without a VM token")
	}
}

// TestControllerUnreachable: network errors are retried, then reported as
// retryable infrastructure trouble.
func TestControllerUnreachable(t *testing.T) {
	t.Parallel()
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	shared := t.TempDir()
	writeJSONAtomic(shared, vmshare.BuildConfigFile, vmshare.BuildConfig{BuildID: "b1", AttemptID: "a1", ControllerURL: "http://" + addr, OTP: "otp-secret-value", Platform: "android"})
	if code := inProcess(t, shared, nil); code != 1 {
		t.Fatalf("exit %d", code)
	}
	be := readBuildError(t, shared)
	if be.Code != vmshare.CodeUnreachable || !be.Retryable || !strings.Contains(be.Message, addr) {
		t.Fatalf("build-error %+v", be)
	}
}

// TestNoBuildConfig: a shared folder without a usable config is reported
// there after the wait timeout; no folder at all means exit 1 only.
func TestNoBuildConfig(t *testing.T) {
	t.Parallel()
	shared := t.TempDir()
	os.WriteFile(filepath.Join(shared, vmshare.BuildConfigFile), []byte(`{"build_id":"b1","platform":"windows"}`), 0o644)
	if code := inProcess(t, shared, func(c *Config) { c.WaitTimeout = 200 * time.Millisecond }); code != 1 {
		t.Fatalf("exit %d", code)
	}
	be := readBuildError(t, shared)
	if be.Code != vmshare.CodeNoBuildConfig || !be.Retryable || !strings.Contains(be.Message, "controller_url") {
		t.Fatalf("build-error %+v", be)
	}
	missing := filepath.Join(t.TempDir(), "never-mounted")
	if code := inProcess(t, missing, func(c *Config) { c.WaitTimeout = 100 * time.Millisecond }); code != 1 {
		t.Fatalf("exit %d", code)
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Fatal("the missing shared folder was created")
	}
}

// TestAlreadyFinished: a relaunched bootstrap does not build twice.
func TestAlreadyFinished(t *testing.T) {
	t.Parallel()
	shared := t.TempDir()
	writeJSONAtomic(shared, vmshare.BuildConfigFile, vmshare.BuildConfig{BuildID: "b1", ControllerURL: "http://127.0.0.1:1", OTP: "x", Platform: "ios"})
	writeJSONAtomic(shared, vmshare.BuildCompleteFile, vmshare.Complete{})
	if code := inProcess(t, shared, nil); code != 0 {
		t.Fatalf("exit %d", code)
	}
	os.Remove(filepath.Join(shared, vmshare.BuildCompleteFile))
	writeJSONAtomic(shared, vmshare.BuildErrorFile, vmshare.BuildError{Code: "x"})
	if code := inProcess(t, shared, nil); code != 1 {
		t.Fatalf("exit %d", code)
	}
}

// TestUnsafeSourceRefused: an archive escaping its directory fails the
// build (not retryable) and writes nothing outside the work directory.
func TestUnsafeSourceRefused(t *testing.T) {
	t.Parallel()
	c := startController(t)
	src := tarGz(t, tarEntry{name: "package.json", body: "{}"}, tarEntry{name: "../../escaped.txt", body: "pwned"})
	j := c.startJob(api.PlatformAndroid, src, nil)
	shared := t.TempDir()
	writeConfig(t, shared, c, j, j.job.OTP)
	parent := t.TempDir()
	work := filepath.Join(parent, "w1", "w2")
	if code := inProcess(t, shared, func(c *Config) { c.WorkDir = work }); code != 1 {
		t.Fatalf("exit %d", code)
	}
	be := readBuildError(t, shared)
	if be.Code != vmshare.CodeInvalidSource || be.Retryable || !strings.Contains(be.Message, "escapes") {
		t.Fatalf("build-error %+v", be)
	}
	filepath.WalkDir(parent, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			t.Errorf("file left behind: %s", p)
		}
		return nil
	})
	if log := string(c.log(j.sub.ID)); !strings.Contains(log, "✖ unusable source") {
		t.Fatalf("log:\n%s", log)
	}
}

func TestClassify(t *testing.T) {
	t.Parallel()
	r := &buildRun{cfg: Config{BuildTimeout: time.Hour}}
	live := context.Background()
	cases := []struct {
		ctx       context.Context
		err       error
		code      string
		retryable bool
	}{
		{live, &StepError{Step: Step{Argv: []string{"npm", "ci"}}, Status: "exit status 1", Code: 1}, api.CodeBuildFailed, false},
		{live, fmt.Errorf("extract: %w", &os.PathError{Op: "write", Path: "x", Err: syscall.ENOSPC}), vmshare.CodeDiskFull, true},
		{live, &ToolMissingError{Step: Step{Argv: []string{"pod"}}, Err: errors.New("not found")}, vmshare.CodeToolMissing, true},
		{live, fmt.Errorf("%w: x", ErrBadArchive), vmshare.CodeInvalidSource, false},
		{live, fmt.Errorf("%w: x", ErrNoArtifacts), vmshare.CodeNoArtifacts, false},
		{live, fmt.Errorf("%w: x", ErrAttemptEnded), api.CodeLeaseLost, true},
		{live, errors.New("surprise"), vmshare.CodeInternalFailure, true},
		{cancelledWith(ErrBuildTimeout), &StepError{}, api.CodeTimeout, false},
		{cancelledWith(fmt.Errorf("%w (terminated)", ErrSignalled)), fail(vmshare.CodeSourceDownload, true, nil, "download"), api.CodeCancelled, false},
		{cancelledWith(ErrAttemptEnded), &StepError{}, api.CodeLeaseLost, true},
	}
	for i, c := range cases {
		f := r.classify(c.ctx, c.err)
		if f.code != c.code || f.retryable != c.retryable {
			t.Errorf("case %d (%v): got %s/%v, want %s/%v", i, c.err, f.code, f.retryable, c.code, c.retryable)
		}
	}
}

func cancelledWith(cause error) context.Context {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(cause)
	return ctx
}

func TestConfigPrecedence(t *testing.T) {
	t.Parallel()
	env := map[string]string{"FREEAGENT_SHARED_DIR": "/from/env", "FREEAGENT_BUILD_TIMEOUT": "90", "FREEAGENT_KILL_GRACE": "3s", "FREEAGENT_MAX_SOURCE_BYTES": "2GiB"}
	cfg, err := ParseConfig([]string{"--shared-dir", "/from/flag", "--kill-grace=5s"}, func(k string) string { return env[k] }, &strings.Builder{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.SharedDir != "/from/flag" || cfg.BuildTimeout != 90*time.Second || cfg.KillGrace != 5*time.Second ||
		cfg.Limits.MaxBytes != 2<<30 || cfg.WaitTimeout != 5*time.Minute || cfg.SecurityTool != "/usr/bin/security" {
		t.Fatalf("config %+v", cfg)
	}
	def, _ := ParseConfig(nil, func(string) string { return "" }, &strings.Builder{})
	if def.SharedDir != DefaultSharedDir || def.BuildTimeout != 2*time.Hour || def.Limits != DefaultExtractLimits() {
		t.Fatalf("defaults %+v", def)
	}
	if _, err := ParseConfig(nil, func(k string) string {
		return map[string]string{"FREEAGENT_BUILD_TIMEOUT": "soon"}[k]
	}, &strings.Builder{}); err == nil || !strings.Contains(err.Error(), "FREEAGENT_BUILD_TIMEOUT") {
		t.Fatalf("bad env: %v", err)
	}
	if _, err := ParseConfig([]string{"extra"}, func(string) string { return "" }, &strings.Builder{}); err == nil {
		t.Fatal("a positional argument was accepted")
	}
	if def.BuildUser != "" || def.HomeDir == "" {
		t.Fatalf("without a build user: %+v", def)
	}
	// A build user moves the defaults of --home (its own) and --work-dir
	// (out of this user's private temporary directory), not given values.
	bu, err := ParseConfig(nil, func(k string) string { return map[string]string{"FREEAGENT_BUILD_USER": "freeagent-build"}[k] }, &strings.Builder{})
	if err != nil || bu.BuildUser != "freeagent-build" || bu.HomeDir != "" || bu.WorkDir != DefaultBuildUserWorkDir {
		t.Fatalf("with a build user: %+v %v", bu, err)
	}
	bu, err = ParseConfig([]string{"--build-user", "b", "--home", "/h", "--work-dir", "/w"}, func(string) string { return "" }, &strings.Builder{})
	if err != nil || bu.BuildUser != "b" || bu.HomeDir != "/h" || bu.WorkDir != "/w" {
		t.Fatalf("with a build user and explicit directories: %+v %v", bu, err)
	}
}

func TestWriteFileAtomic(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for i := range 3 {
		if err := writeJSONAtomic(dir, vmshare.ProgressFile, vmshare.Progress{Phase: "build", Progress: i}); err != nil {
			t.Fatal(err)
		}
	}
	var p vmshare.Progress
	readJSONFile(t, filepath.Join(dir, vmshare.ProgressFile), &p)
	if p.Progress != 2 {
		t.Fatalf("progress %+v", p)
	}
	noTempFiles(t, dir)
	if err := writeFileAtomic(filepath.Join(dir, "missing"), "x", nil); err == nil {
		t.Fatal("no error for a missing directory")
	}
}

func TestRedactor(t *testing.T) {
	t.Parallel()
	var r redactor
	r.add("abc") // too short: ignored
	r.add("secret-one")
	r.add("line1-secret\nline2-secret")
	var out strings.Builder
	for _, p := range []string{"xx secr", "et-on", "e yy line", "2-secret zz abc se"} {
		out.Write(r.write([]byte(p)))
	}
	out.Write(r.flush())
	if got := out.String(); got != "xx [REDACTED] yy [REDACTED] zz abc se" {
		t.Fatalf("got %q", got)
	}
	tl := newTail(2)
	tl.write([]byte("one\ntwo\nthree\nfour"))
	if got := tl.String(); got != "two\nthree\nfour" {
		t.Fatalf("tail %q", got)
	}
}

// TestSecretsAlreadyFetched: the controller hands the spec out once per
// attempt; a 410 (an earlier run of this attempt took it) fails the attempt
// as retryable, at once, so the next attempt fetches again.
func TestSecretsAlreadyFetched(t *testing.T) {
	t.Parallel()
	var specFetches atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/api/vm/auth":
			json.NewEncoder(w).Encode(api.VMAuthResponse{VMToken: "fvt_token", BuildID: "b1", ExpiresAt: time.Now().Add(time.Hour)})
		case r.URL.Path == "/api/builds/b1/spec":
			specFetches.Add(1)
			w.WriteHeader(http.StatusGone)
			json.NewEncoder(w).Encode(api.ErrorResponse{Error: "this attempt's VM already fetched the build's secrets", Code: api.CodeGone})
		case r.Method == http.MethodPost && r.URL.Path == "/api/builds/b1/logs":
			n, _ := io.Copy(io.Discard, r.Body)
			off, _ := strconv.ParseInt(r.URL.Query().Get("offset"), 10, 64)
			json.NewEncoder(w).Encode(api.LogAppendResponse{Length: off + n})
		default:
			w.WriteHeader(http.StatusNotFound)
			json.NewEncoder(w).Encode(api.ErrorResponse{Error: "no", Code: api.CodeNotFound})
		}
	}))
	t.Cleanup(srv.Close)
	shared := t.TempDir()
	writeJSONAtomic(shared, vmshare.BuildConfigFile, vmshare.BuildConfig{BuildID: "b1", AttemptID: "a1", ControllerURL: srv.URL, OTP: "fot_otp", Platform: "android"})
	if code := inProcess(t, shared, nil); code != 1 {
		t.Fatalf("exit %d", code)
	}
	be := readBuildError(t, shared)
	if be.Code != vmshare.CodeAlreadyFetched || !be.Retryable {
		t.Fatalf("build-error %+v", be)
	}
	if n := specFetches.Load(); n != 1 {
		t.Fatalf("the spec was fetched %d times; a 410 is final", n)
	}
}
