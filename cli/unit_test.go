package cli

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/internal/testsupport/syncbuf"
)

func TestExitCodes(t *testing.T) {
	netErr := &url.Error{Op: "Get", URL: "http://x", Err: &net.OpError{Op: "dial", Err: errors.New("connection refused")}}
	for _, c := range []struct {
		err  error
		want int
	}{
		{nil, ExitOK},
		{usageErr("x"), ExitUsage},
		{&buildEnded{id: "b", status: api.StatusFailed}, ExitFailed},
		{fmt.Errorf("get: %w", &api.Error{Status: 401}), ExitAuth},
		{&api.Error{Status: 403}, ExitAuth},
		{&api.Error{Status: 404}, ExitNotFound},
		{&api.Error{Status: 422}, ExitUsage},
		{&api.Error{Status: 409}, ExitFailed},
		{&api.Error{Status: 500}, ExitFailed},
		{&api.Error{Status: 503}, ExitUnreachable},
		{netErr, ExitUnreachable},
		{fmt.Errorf("x: %w", io.ErrUnexpectedEOF), ExitUnreachable},
		{&packError{err: netErr}, ExitFailed},
		{context.Canceled, ExitInterrupted},
	} {
		if got := exitCode(c.err); got != c.want {
			t.Errorf("exitCode(%v) = %d, want %d", c.err, got, c.want)
		}
	}
	if !isDialError(netErr) || isDialError(io.ErrUnexpectedEOF) {
		t.Error("isDialError")
	}
	if isNetworkError(&api.Error{Status: 400}) || !isNetworkError(&api.Error{Status: 502}) {
		t.Error("isNetworkError on answers")
	}
}

func TestRedact(t *testing.T) {
	if got := redact("key fa_secret_value_1 and tok_abcdefgh", "fa_secret_value_1", "tok_abcdefgh", "short"); got != "key [redacted] and [redacted]" {
		t.Errorf("redact: %q", got)
	}
	var errb bytes.Buffer
	u := &ui{out: io.Discard, err: &errb, secrets: []string{"fa_secret_value_1"}}
	u.fail(1, "rejected fa_secret_value_1", "")
	if strings.Contains(errb.String(), "fa_secret_value_1") {
		t.Error("fail printed a secret")
	}
}

func TestPlainNameAndOutputTarget(t *testing.T) {
	for name, want := range map[string]bool{"app.ipa": true, "App Release.apk": true, "": false, ".": false, "..": false,
		"../x": false, "a/b": false, `a\b`: false, "/etc/passwd": false, "x\x00y": false,
		"x\ny": false, "x\ty": false, "\x1b[2Japp.apk": false, "a\u009bb": false, "\xffapp": false, "ünï.apk": true} {
		if plainName(name) != want {
			t.Errorf("plainName(%q) = %v", name, !want)
		}
	}
	// -o always names a directory: existing, or created with its
	// parents, whatever its name looks like; never a file.
	dir := t.TempDir()
	for _, o := range []string{dir, filepath.Join(dir, "new") + "/", filepath.Join(dir, "x.ipa"), filepath.Join(dir, "a", "b", "app.apk")} {
		if d, err := outputDir(o, "b1"); err != nil || d != o || !isDir(d) {
			t.Errorf("outputDir(%q) = %q, %v; want the directory, created", o, d, err)
		}
	}
	file := filepath.Join(dir, "file")
	os.WriteFile(file, []byte("x"), 0o644)
	if _, err := outputDir(file, "b1"); exitCode(err) != ExitUsage || !strings.Contains(err.Error(), "names the directory") {
		t.Errorf("an existing file: %v", err)
	}
	if _, err := outputDir("", "../b1"); exitCode(err) != ExitUsage {
		t.Errorf("a build id that is no directory name: %v", err)
	}
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

func TestContentRangeStart(t *testing.T) {
	for v, want := range map[string]int64{"bytes 100-199/200": 100, "bytes 0-9/10": 0, "": -1, "bytes x-1/2": -1} {
		if got := contentRangeStart(v); got != want {
			t.Errorf("%q: %d", v, got)
		}
	}
}

func TestLogSinkSplitsPolledBytes(t *testing.T) {
	var out bytes.Buffer
	k := &logSink{u: &ui{out: &out, err: io.Discard, json: true}}
	k.bytes([]byte("one\ntw"), 6)
	k.bytes([]byte("o\r\nthr"), 12)
	k.flush()
	want := `{"line":"one","offset":4}` + "\n" + `{"line":"two","offset":9}` + "\n" + `{"line":"thr","offset":12}` + "\n"
	if out.String() != want {
		t.Errorf("got %q", out.String())
	}
}

func TestReadLineCapsLongLines(t *testing.T) {
	long := strings.Repeat("x", 200_000)
	br := bufioReader(long + "\nnext\n")
	l, err := readLine(br, 1000)
	if err != nil || len(l) > 1000 {
		t.Fatalf("len %d, %v", len(l), err)
	}
	if l, _ := readLine(br, 1000); l != "next" {
		t.Fatalf("next line %q", l)
	}
}

func TestConfigConcurrentUpdatesAndPruning(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c", "config.json")
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := updateConfig(path, func(c *Config) error {
				if c.Builds == nil {
					c.Builds = map[string]BuildRecord{}
				}
				c.Builds[fmt.Sprint("b", i)] = BuildRecord{Token: "t", SubmittedAt: time.Now()}
				return nil
			}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	c, err := loadConfig(path)
	if err != nil || len(c.Builds) != 8 {
		t.Fatalf("%d builds after concurrent updates (%v)", len(c.Builds), err)
	}
	c, _ = updateConfig(path, func(c *Config) error {
		for i := range maxBuildRecords + 50 {
			c.Builds[fmt.Sprint("old", i)] = BuildRecord{Token: "t", SubmittedAt: time.Unix(int64(i), 0)}
		}
		c.PendingSubmits = map[string]PendingSubmit{"stale": {StartedAt: time.Now().Add(-48 * time.Hour)}, "fresh": {StartedAt: time.Now()}}
		return nil
	})
	if len(c.Builds) != maxBuildRecords || c.Builds["b0"].Token == "" || len(c.PendingSubmits) != 1 {
		t.Fatalf("pruning: %d builds, b0 kept %v, %d pending", len(c.Builds), c.Builds["b0"].Token != "", len(c.PendingSubmits))
	}
	// A file others can read is made private on load.
	os.Chmod(path, 0o644)
	if _, err := loadConfig(path); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", st.Mode().Perm())
	}
	os.WriteFile(path, []byte("{not json"), 0o600)
	if _, err := loadConfig(path); exitCode(err) != ExitUsage || !strings.Contains(err.Error(), "not valid JSON") {
		t.Errorf("corrupt config: %v", err)
	}
}

func TestProgressDrawsOnlyOnTerminal(t *testing.T) {
	var errb syncbuf.Buffer
	u := &ui{out: io.Discard, err: &errb, errTTY: true}
	p := u.newProgress("Uploading", 1000)
	p.done.Store(500)
	p.moved.Store(300)
	waitFor(t, &errb, "50%", 2*time.Second)
	p.finish()
	if s := errb.String(); !strings.Contains(s, "Uploading") || !strings.Contains(s, "/s") {
		t.Errorf("bar: %q", s)
	}
	var plain bytes.Buffer
	q := (&ui{out: io.Discard, err: &plain}).newProgress("Uploading", 10)
	q.done.Store(5)
	time.Sleep(200 * time.Millisecond)
	q.finish()
	if plain.Len() != 0 {
		t.Errorf("progress drawn without a terminal: %q", plain.String())
	}
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"help"}, {"help", "download"}, {"download", "--help"}, {"logs", "-h"}} {
		var out bytes.Buffer
		a := &App{Stdout: &out, Env: func(string) string { return "" }}
		if code := a.Run(context.Background(), args); code != 0 {
			t.Errorf("%v: exit %d", args, code)
		}
		if !strings.Contains(out.String(), "Exit codes:") || !strings.Contains(out.String(), "130") {
			t.Errorf("%v: help lacks the exit codes:\n%s", args, out.String())
		}
	}
	var out bytes.Buffer
	(&App{Stdout: &out, Env: func(string) string { return "" }}).Run(context.Background(), []string{"logs", "--help"})
	if !strings.Contains(out.String(), "-f, --follow") {
		t.Errorf("logs help: %s", out.String())
	}
}

func bufioReader(s string) *bufio.Reader { return bufio.NewReaderSize(strings.NewReader(s), 4096) }

// resume bounds a transfer by its consecutive failures: bytes that arrive
// start the count over, and a cancelled context ends the wait at once.
func TestResumeCountsFailuresSinceProgress(t *testing.T) {
	a := &App{Retry: RetryPolicy{Attempts: 2, Initial: time.Microsecond, Max: time.Microsecond}}
	cut := io.ErrUnexpectedEOF
	var pos int64
	calls, warned := 0, 0
	err := a.resume(context.Background(), &pos, retryable, func(context.Context) error {
		calls++
		if calls <= 4 {
			pos += 10 // each try gets a little further before the cut
		}
		return cut
	}, func(error, time.Duration) { warned++ })
	if !errors.Is(err, cut) || calls != 5 || warned != 4 || pos != 40 {
		t.Fatalf("resume: %v after %d calls, %d warnings, at %d; want the cut after 5 calls (the 4th moved and starts the run of 2 the attempts allow), 4 warnings, at 40", err, calls, warned, pos)
	}

	ctx, cancel := context.WithCancel(context.Background())
	a.Retry.Initial, a.Retry.Max = time.Hour, time.Hour
	calls = 0
	err = a.resume(ctx, &pos, retryable, func(context.Context) error { calls++; return cut }, func(error, time.Duration) { cancel() })
	if calls != 1 || ctx.Err() == nil || !errors.Is(err, cut) {
		t.Fatalf("cancelled during the wait: %v after %d calls; want the cut after 1 call", err, calls)
	}
}
