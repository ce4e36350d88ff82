package httpapi_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/api"
)

// TestBuildLifecycle walks one build through the whole protocol: submit,
// claim by long poll, heartbeat, VM auth, source, logs, artifact, result,
// and the developer's download.
func TestBuildLifecycle(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	w := e.register("mac-mini", api.Capabilities{Platforms: []string{"android"}, MaxConcurrentBuilds: 1})

	// A worker already waiting is handed the build as soon as it is submitted.
	got := make(chan *api.Job, 1)
	go func() {
		resp, err := e.worker.Poll(ctx, w.token, 10*time.Second)
		if err != nil {
			t.Error(err)
		}
		w.keep(resp.TokenGrant)
		got <- resp.Job
	}()
	time.Sleep(200 * time.Millisecond) // let the poll park
	sub, src := e.submit("android")
	if sub.Status != api.StatusPending || sub.AccessToken == "" {
		t.Fatalf("submit answer: %+v", sub)
	}
	var job *api.Job
	select {
	case job = <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting poll was not woken by the submit")
	}
	if job == nil || job.ID != sub.ID || job.OTP == "" || job.LeaseToken == "" || job.SourceURL != "/api/builds/"+sub.ID+"/source" || job.CertsURL != nil {
		t.Fatalf("job: %+v", job)
	}
	if b := e.build(sub.ID); b.Status != api.StatusAssigned || b.Attempts != 1 {
		t.Fatalf("after claim: status %s attempts %d", b.Status, b.Attempts)
	}
	hb, err := w.heartbeat(job)
	if err != nil || hb.CancelRequested || !hb.LeaseExpiresAt.After(time.Now()) {
		t.Fatalf("heartbeat: %+v %v", hb, err)
	}
	if b := e.build(sub.ID); b.Status != api.StatusBuilding || b.StartedAt == nil {
		t.Fatalf("after heartbeat: %+v", b)
	}

	// The VM: OTP → VM token → source, logs, artifact.
	vm := &api.Client{BaseURL: e.URL}
	auth, err := vm.VMAuth(ctx, sub.ID, job.OTP)
	if err != nil {
		t.Fatalf("vm auth: %v", err)
	}
	resp, err := vm.Source(ctx, sub.ID, auth.VMToken, "")
	if err != nil {
		t.Fatalf("source: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Equal(body, src) || resp.Header.Get(api.HeaderChecksum) != sha(src) {
		t.Fatalf("source differs from the submitted archive")
	}
	if n, err := vm.AppendLog(ctx, sub.ID, auth.VMToken, 0, []byte("npm ci\n")); err != nil || n != 7 {
		t.Fatalf("append log: %d %v", n, err)
	}
	if n, err := vm.AppendLog(ctx, sub.ID, auth.VMToken, 7, []byte("gradle assembleRelease\n")); err != nil || n != 30 {
		t.Fatalf("append log: %d %v", n, err)
	}
	apk := bytes.Repeat([]byte("APK!"), 50000)
	art, err := vm.UploadArtifact(ctx, sub.ID, auth.VMToken, "app-release.apk", bytes.NewReader(apk), sha(apk))
	if err != nil || art.SHA256 != sha(apk) || art.Size != int64(len(apk)) {
		t.Fatalf("artifact upload: %+v %v", art, err)
	}
	logs, err := e.developer.ReadLogs(ctx, sub.ID, 7)
	if err != nil || string(logs.Data) != "gradle assembleRelease\n" || logs.Length != 30 || logs.Status != api.StatusBuilding {
		t.Fatalf("read logs: %+v %v", logs, err)
	}

	res, err := w.complete(job, api.Result{Success: true})
	if err != nil || res.Status != api.StatusCompleted {
		t.Fatalf("complete: %+v %v", res, err)
	}
	b := e.build(sub.ID)
	if b.Status != api.StatusCompleted || b.CompletedAt == nil || len(b.Artifacts) != 1 || b.Artifacts[0].SHA256 != sha(apk) {
		t.Fatalf("completed build: %+v", b)
	}
	if len(b.AttemptHistory) != 1 || b.AttemptHistory[0].Status != "completed" {
		t.Fatalf("attempt history: %+v", b.AttemptHistory)
	}
	// The VM token dies with the attempt.
	if _, err := vm.AppendLog(ctx, sub.ID, auth.VMToken, 30, []byte("late\n")); api.StatusOf(err) != http.StatusUnauthorized {
		t.Fatalf("VM token after the attempt ended: %v", err)
	}

	// Download: whole, then ranged, with the build's own token.
	owner := &api.Client{BaseURL: e.URL, BuildToken: sub.AccessToken}
	dl, err := owner.DownloadArtifact(ctx, sub.ID, "app-release.apk", 0)
	if err != nil {
		t.Fatal(err)
	}
	all, _ := io.ReadAll(dl.Body)
	dl.Body.Close()
	if !bytes.Equal(all, apk) || dl.Header.Get(api.HeaderChecksum) != sha(apk) || dl.Header.Get("ETag") != `"`+sha(apk)+`"` {
		t.Fatal("downloaded artifact differs")
	}
	dl, err = owner.DownloadArtifact(ctx, sub.ID, "app-release.apk", 1000)
	if err != nil {
		t.Fatal(err)
	}
	part, _ := io.ReadAll(dl.Body)
	dl.Body.Close()
	if dl.StatusCode != http.StatusPartialContent || !bytes.Equal(part, apk[1000:]) {
		t.Fatalf("ranged download: %d, %d bytes", dl.StatusCode, len(part))
	}
}

func TestSSELogFollowEndsWithBuild(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	w := e.register("w", api.Capabilities{})
	sub, _ := e.submit("ios")
	job := w.poll(0)
	if _, err := w.heartbeat(job); err != nil {
		t.Fatal(err)
	}
	vm := &api.Client{BaseURL: e.URL}
	auth, err := vm.VMAuth(ctx, sub.ID, job.OTP)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := vm.AppendLog(ctx, sub.ID, auth.VMToken, 0, []byte("first line\nsecond ")); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, e.URL+"/api/builds/"+sub.ID+"/logs", nil)
	req.Header.Set(api.HeaderAPIKey, e.devKey)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := make(chan string, 100)
	go func() {
		buf := make([]byte, 4096)
		var acc string
		for {
			n, err := resp.Body.Read(buf)
			acc += string(buf[:n])
			for {
				i := strings.Index(acc, "\n\n")
				if i < 0 {
					break
				}
				lines <- acc[:i]
				acc = acc[i+2:]
			}
			if err != nil {
				close(lines)
				return
			}
		}
	}()
	next := func() string {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("stream ended early")
			}
			return l
		case <-time.After(5 * time.Second):
			t.Fatal("no event within 5 s")
		}
		return ""
	}
	if got := next(); got != "id: 11\ndata: first line" {
		t.Fatalf("first event %q", got)
	}
	// A line completed later arrives live.
	if _, err := vm.AppendLog(ctx, sub.ID, auth.VMToken, 18, []byte("line\n")); err != nil {
		t.Fatal(err)
	}
	if got := next(); got != "id: 23\ndata: second line" {
		t.Fatalf("live event %q", got)
	}
	// A bare CR (a progress bar's redraw, or output forging a field) is a
	// line break in event-stream framing: it starts another data field.
	if _, err := vm.AppendLog(ctx, sub.ID, auth.VMToken, 23, []byte("10%\revent: end\r\rdata: x\r\n")); err != nil {
		t.Fatal(err)
	}
	if got := next(); got != "id: 48\ndata: 10%\ndata: event: end\ndata: \ndata: data: x" {
		t.Fatalf("event with carriage returns %q", got)
	}
	if _, err := w.complete(job, api.Result{Success: false, ErrorMessage: "xcodebuild failed"}); err != nil {
		t.Fatal(err)
	}
	if got := next(); got != "event: end\ndata: failed" {
		t.Fatalf("end event %q", got)
	}
}

// Readiness says the database is unreachable without echoing the driver's
// error (addresses, user names) to whoever asks.
func TestReadyHidesDatabaseErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.store.Close() // pgxpool's Close is idempotent: the env's stop closes it again
	resp, err := http.Get(e.URL + "/health/ready")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), `"database":"unreachable (see the controller's log)"`) ||
		strings.Contains(string(body), "closed") {
		t.Fatalf("ready with the database gone: %d %s", resp.StatusCode, body)
	}
}
