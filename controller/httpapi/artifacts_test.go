package httpapi_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/blobs"
	"github.com/freeagent-build/freeagent/controller/controllertest"
	"github.com/freeagent-build/freeagent/controller/gc"
)

// vmSession is a build attempt's VM: its token, from the job's OTP.
func (e *env) vmSession(j *api.Job) (*api.Client, string) {
	e.t.Helper()
	vm := &api.Client{BaseURL: e.URL}
	auth, err := vm.VMAuth(context.Background(), j.ID, j.OTP)
	if err != nil {
		e.t.Fatalf("vm auth: %v", err)
	}
	return vm, auth.VMToken
}

func (e *env) uploadFromVM(vm *api.Client, token, buildID, name, body string) {
	e.t.Helper()
	if _, err := vm.UploadArtifact(context.Background(), buildID, token, name, strings.NewReader(body), sha([]byte(body))); err != nil {
		e.t.Fatalf("upload %s: %v", name, err)
	}
}

func artifactNames(b api.Build) []string {
	var names []string
	for _, a := range b.Artifacts {
		names = append(names, a.Name)
	}
	return names
}

// An attempt that uploads artifacts and is then abandoned (its lease
// expires, or its worker re-registers) leaves nothing on the build another
// attempt completes: the build lists exactly the completing attempt's
// artifacts, a name both uploaded holds the winner's bytes, and the loser's
// names are 404s.
func TestAbandonedAttemptLeavesNoArtifacts(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"lease expiry", "re-register"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			ctx := context.Background()
			a := e.register("a", api.Capabilities{})
			b := e.register("b", api.Capabilities{})
			sub, _ := e.submit("android")
			jobA := a.poll(0)
			if _, err := a.heartbeat(jobA); err != nil {
				t.Fatal(err)
			}
			vmA, tokA := e.vmSession(jobA)
			e.uploadFromVM(vmA, tokA, sub.ID, "app.apk", "from attempt A")
			e.uploadFromVM(vmA, tokA, sub.ID, "only-a.apk", "A alone")
			if bl := e.build(sub.ID); len(bl.Artifacts) != 0 {
				t.Fatalf("a running attempt's artifacts are visible: %v", artifactNames(bl))
			}

			switch how {
			case "lease expiry":
				e.expireLease(sub.ID)
				if r := e.sweep(); r.LeasesExpired != 1 {
					t.Fatalf("sweep: %+v", r)
				}
				e.claimableNow(sub.ID)
			case "re-register":
				reg, err := e.worker.Register(ctx, api.RegisterRequest{ID: a.id, Name: "a"})
				if err != nil {
					t.Fatal(err)
				}
				a.token = reg.AccessToken
			}
			// The abandoned VM cannot add more.
			_, err := vmA.UploadArtifact(ctx, sub.ID, tokA, "late.apk", strings.NewReader("late"), "")
			wantStatus(t, err, http.StatusUnauthorized)

			jobB := b.poll(0)
			if jobB == nil || jobB.ID != sub.ID || jobB.AttemptID == jobA.AttemptID {
				t.Fatalf("second attempt: %+v", jobB)
			}
			if _, err := b.heartbeat(jobB); err != nil {
				t.Fatal(err)
			}
			vmB, tokB := e.vmSession(jobB)
			e.uploadFromVM(vmB, tokB, sub.ID, "app.apk", "from attempt B")
			e.uploadFromVM(vmB, tokB, sub.ID, "only-b.apk", "B alone")
			if res, err := b.complete(jobB, api.Result{Success: true}); err != nil || res.Status != api.StatusCompleted {
				t.Fatalf("complete: %+v %v", res, err)
			}

			bl := e.build(sub.ID)
			if got := artifactNames(bl); !slices.Equal(got, []string{"app.apk", "only-b.apk"}) {
				t.Fatalf("completed build lists %v, want exactly the completing attempt's [app.apk only-b.apk]", got)
			}
			for _, art := range bl.Artifacts {
				if art.Name == "app.apk" && art.SHA256 != sha([]byte("from attempt B")) {
					t.Fatalf("app.apk is not the completing attempt's: %+v", art)
				}
			}
			dl, err := e.developer.DownloadArtifact(ctx, sub.ID, "app.apk", 0)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(dl.Body)
			dl.Body.Close()
			if !bytes.Equal(body, []byte("from attempt B")) {
				t.Fatalf("app.apk downloads %q", body)
			}
			_, err = e.developer.DownloadArtifact(ctx, sub.ID, "only-a.apk", 0)
			wantStatus(t, err, http.StatusNotFound)

			// The collector deletes the abandoned attempt's rows and
			// objects, and nothing of the completing attempt's.
			if rep := e.collect(); rep.StrayArtifacts != 2 || rep.Orphans != 0 || rep.Errors != 0 {
				t.Fatalf("collection: %+v", rep)
			}
			want := []string{
				blobs.AttemptsDir + "/" + jobB.AttemptID + "/" + blobs.ArtifactPrefix + "app.apk",
				blobs.AttemptsDir + "/" + jobB.AttemptID + "/" + blobs.ArtifactPrefix + "only-b.apk",
				blobs.SourceFile,
			}
			if got := e.buildFiles(sub.ID); !slices.Equal(got, want) {
				t.Fatalf("after collection the build holds %v, want %v", got, want)
			}
			var rows int
			e.store.Pool().QueryRow(ctx, `SELECT count(*) FROM artifacts WHERE build_id = $1`, sub.ID).Scan(&rows)
			if rows != 2 {
				t.Fatalf("%d artifact rows left, want the completing attempt's 2", rows)
			}
			if got := artifactNames(e.build(sub.ID)); !slices.Equal(got, []string{"app.apk", "only-b.apk"}) {
				t.Fatalf("after collection the build lists %v", got)
			}
		})
	}
}

// collect runs one garbage collection pass with no grace for orphans, as a
// replica's collector would long after the fact.
func (e *env) collect() gc.Report {
	e.t.Helper()
	rep, err := gc.New(e.store, e.blobs, gc.Config{OrphanGrace: time.Nanosecond, StagingMaxAge: time.Nanosecond, LeftoverAge: time.Nanosecond},
		testLogger(e.t)).Collect(context.Background())
	if err != nil || !rep.Ran {
		e.t.Fatalf("garbage collection: %+v %v", rep, err)
	}
	return rep
}

// buildFiles lists the build's objects on the file store.
func (e *env) buildFiles(id string) []string {
	e.t.Helper()
	return biFiles(e.t, filepath.Join(biBuildsDir(e), id))
}

// completeWithArtifact runs a build to completion with one artifact from its VM.
func (e *env) completeWithArtifact(w *workerSession, name, body string) api.SubmitResponse {
	e.t.Helper()
	sub, _ := e.submit("android")
	job := w.poll(0)
	if job == nil || job.ID != sub.ID {
		e.t.Fatalf("claimed %+v, want %s", job, sub.ID)
	}
	if _, err := w.heartbeat(job); err != nil {
		e.t.Fatal(err)
	}
	vm, tok := e.vmSession(job)
	if _, err := vm.AppendLog(context.Background(), sub.ID, tok, 0, []byte("building\n")); err != nil {
		e.t.Fatal(err)
	}
	e.uploadFromVM(vm, tok, sub.ID, name, body)
	if res, err := w.complete(job, api.Result{Success: true}); err != nil || res.Status != api.StatusCompleted {
		e.t.Fatalf("complete: %+v %v", res, err)
	}
	return sub
}

// Retention: a build that ended longer ago than --retain-artifacts,
// --retain-sources and --retain-logs keeps its record and its artifact
// list, says its artifacts expired, and answers 410 Gone (naming the
// setting) for its download, its log and a retry; a younger build keeps
// everything and shows when its artifacts expire.
func TestRetentionExpiresFilesButKeepsTheBuild(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	w := e.register("w", api.Capabilities{})
	old := e.completeWithArtifact(w, "old.apk", "old bytes")
	young := e.completeWithArtifact(w, "young.apk", "young bytes")
	if _, err := e.store.Pool().Exec(ctx, `UPDATE builds SET completed_at = now() - interval '100 days' WHERE id = $1`, old.ID); err != nil {
		t.Fatal(err)
	}
	if b := e.build(young.ID); b.ArtifactsExpired || b.ArtifactsExpireAt == nil ||
		b.ArtifactsExpireAt.Sub(*b.CompletedAt) != e.cfg.RetainArtifacts {
		t.Fatalf("young build's expiry: %v expired %v", b.ArtifactsExpireAt, b.ArtifactsExpired)
	}

	rep := e.collect()
	if rep.ExpiredArtifacts != 1 || rep.ExpiredSources != 1 || rep.ExpiredLogs != 1 || rep.Errors != 0 {
		t.Fatalf("collection: %+v", rep)
	}
	if got := e.buildFiles(old.ID); len(got) != 0 {
		t.Fatalf("the expired build still holds %v", got)
	}
	if got := e.buildFiles(young.ID); len(got) != 2 {
		t.Fatalf("the young build holds %v, want its source and artifact", got)
	}

	b := e.build(old.ID)
	if b.Status != api.StatusCompleted || !b.ArtifactsExpired || b.ArtifactsExpireAt == nil || !slices.Equal(artifactNames(b), []string{"old.apk"}) {
		t.Fatalf("expired build: status %s expired %v at %v artifacts %v", b.Status, b.ArtifactsExpired, b.ArtifactsExpireAt, artifactNames(b))
	}
	_, err := e.developer.DownloadArtifact(ctx, old.ID, "old.apk", 0)
	wantStatus(t, err, http.StatusGone)
	if !strings.Contains(err.Error(), "expired") || !strings.Contains(err.Error(), "--retain-artifacts") {
		t.Fatalf("download of an expired artifact: %v", err)
	}
	_, err = e.developer.ReadLogs(ctx, old.ID, 0)
	wantStatus(t, err, http.StatusGone)
	if !strings.Contains(err.Error(), "--retain-logs") {
		t.Fatalf("log of an expired build: %v", err)
	}
	_, err = e.developer.Retry(ctx, old.ID)
	wantStatus(t, err, http.StatusGone)
	if !strings.Contains(err.Error(), "--retain-sources") {
		t.Fatalf("retry of an expired build: %v", err)
	}

	// The young build is untouched, and a second pass finds nothing.
	dl, err := e.developer.DownloadArtifact(ctx, young.ID, "young.apk", 0)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(dl.Body)
	dl.Body.Close()
	if string(body) != "young bytes" {
		t.Fatalf("young artifact: %q", body)
	}
	if rep := e.collect(); rep.ExpiredArtifacts+rep.ExpiredSources+rep.ExpiredLogs+rep.Orphans+rep.StrayArtifacts != 0 {
		t.Fatalf("a second pass removed more: %+v", rep)
	}
}

// Orphans: an object no row wants (a crash between a file and its row), a
// staging upload nobody completes and an interrupted write's temporary file
// are removed; the collector's run is audited.
func TestCollectorRemovesOrphansAndAuditsItsRuns(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	w := e.register("w", api.Capabilities{})
	sub := e.completeWithArtifact(w, "app.apk", "bytes")
	root := filepath.Join(e.dataDir, "files")
	for _, p := range []string{
		"builds/" + sub.ID + "/attempts/06nosuchattempt0000000000/artifact-app.apk", // no row
		"builds/06nosuchbuild000000000000/source",                                   // no build
		"uploads/" + sub.ID + "/06a/abc",                                            // a staging upload
		"builds/" + sub.ID + "/.upload-123",                                         // an interrupted write
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, p), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	rep := e.collect()
	if rep.Orphans != 2 || rep.Staging != 1 || rep.Leftovers != 1 || rep.Errors != 0 {
		t.Fatalf("collection: %+v", rep)
	}
	// keys/ holds the seal-key check the controller writes at start.
	got := slices.DeleteFunc(biFiles(t, root), func(p string) bool { return strings.HasPrefix(p, "keys/") })
	want := []string{"builds/" + sub.ID + "/attempts/" + e.build(sub.ID).AttemptHistory[0].ID + "/artifact-app.apk", "builds/" + sub.ID + "/source"}
	if !slices.Equal(got, want) {
		t.Fatalf("after collection the store holds %v, want %v", got, want)
	}
	var runs int
	e.store.Pool().QueryRow(ctx, `SELECT count(*) FROM events WHERE event_type = 'controller.gc'`).Scan(&runs)
	if runs != 1 {
		t.Fatalf("%d audited runs, want 1", runs)
	}

	// One replica at a time: while another holds the lock, a pass does nothing.
	release, ok, err := e.store.TryGCLock(ctx)
	if err != nil || !ok {
		t.Fatalf("lock: %v %v", ok, err)
	}
	rep, err = gc.New(e.store, e.blobs, gc.Config{}, testLogger(t)).Collect(ctx)
	release()
	if err != nil || rep.Ran {
		t.Fatalf("a pass while another replica collects: %+v %v", rep, err)
	}
}

// A file store below --min-free-disk takes no new builds: 507 naming the
// setting; above it, submits work.
func TestSubmitBelowFreeDiskFloorIs507(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.minFree = blobs.Floor{Bytes: 1 << 62}
	e.restart()
	src := controllertest.Project(t, map[string]string{"package.json": `{"name":"app"}`})
	_, err := e.developer.Submit(context.Background(), api.SubmitRequest{Platform: "android", Source: bytes.NewReader(src)})
	wantStatus(t, err, http.StatusInsufficientStorage)
	if !strings.Contains(err.Error(), "--min-free-disk") {
		t.Fatalf("507 without the setting's name: %v", err)
	}
	e.minFree = blobs.Floor{Percent: 0.0001}
	e.restart()
	if _, err := e.developer.Submit(context.Background(), api.SubmitRequest{Platform: "android", Source: bytes.NewReader(src)}); err != nil {
		t.Fatal(err)
	}
}
