package googleplay_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/submit/googleplay"
	"github.com/freeagent-build/freeagent/internal/standins/fakeplay"
)

const pkg = "com.example.shop"

type fixture struct {
	play   *fakeplay.Server
	key    []byte
	client *googleplay.Client
	dir    string
}

func newFixture(t *testing.T, o googleplay.Options) *fixture {
	t.Helper()
	p := fakeplay.New(t)
	key := p.ServiceAccount("publisher")
	p.AddApp(pkg, key)
	o.Endpoint, o.TokenURL = p.URL, p.TokenURL
	if o.Retry.Attempts == 0 {
		o.Retry = api.RetryPolicy{Backoff: api.Backoff{Initial: time.Millisecond, Max: 5 * time.Millisecond}, Attempts: 3}
	}
	return &fixture{play: p, key: key, client: googleplay.New(o), dir: t.TempDir()}
}

func (f *fixture) archive(t *testing.T, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(f.dir, name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func internal(vc int64) googleplay.Release {
	return googleplay.Release{PackageName: pkg, Track: "internal", ReleaseStatus: api.ReleaseCompleted, VersionCode: vc}
}

// submit runs a submission from state, recording the states it saved.
func (f *fixture) submit(ctx context.Context, key []byte, path string, rel googleplay.Release, state googleplay.State) (googleplay.Result, []googleplay.State, string, error) {
	var saved []googleplay.State
	var log bytes.Buffer
	res, err := f.client.Submit(ctx, key, path, rel, state, func(_ context.Context, s googleplay.State) error {
		saved = append(saved, s)
		return nil
	}, &log)
	return res, saved, log.String(), err
}

func TestSubmitToInternalTrack(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		chunk int
		size  int
	}{
		{"one request (multipart)", 0, 1000},
		{"resumable, in chunks", minChunk, 3*minChunk + 100},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, googleplay.Options{ChunkSize: c.chunk})
			path := f.archive(t, "app.aab", fakeplay.Bundle(pkg, 7, c.size))
			res, saved, log, err := f.submit(context.Background(), f.key, path, internal(7), googleplay.State{})
			if err != nil {
				t.Fatalf("submit: %v\n%s", err, log)
			}
			commits := f.play.Commits()
			if len(commits) != 1 || len(saved) != 2 || saved[0].EditID != res.EditID || saved[1].VersionCode != 7 || commits[0].EditID != res.EditID {
				t.Fatalf("commits %+v, saved %+v, result %+v", commits, saved, res)
			}
			rels := commits[0].Tracks["internal"]
			if len(rels) != 1 || rels[0].Status != "completed" || len(rels[0].VersionCodes) != 1 || rels[0].VersionCodes[0] != 7 || commits[0].ChangesNotSentForReview {
				t.Fatalf("internal track committed %+v", commits[0])
			}
			if n := f.play.Uploads(res.EditID); n != 1 {
				t.Fatalf("%d uploads into the edit", n)
			}
		})
	}
}

// minChunk is the Google client's smallest chunk (256 KiB).
const minChunk = 256 << 10

func TestStagedRolloutAndReviewFlag(t *testing.T) {
	t.Parallel()
	f := newFixture(t, googleplay.Options{})
	f.play.AddTrack(pkg, "qa-team")
	path := f.archive(t, "app.aab", fakeplay.Bundle(pkg, 9, 10))
	half := 0.5
	rel := googleplay.Release{PackageName: pkg, Track: "qa-team", ReleaseStatus: api.ReleaseInProgress, Rollout: &half, ChangesNotSentForReview: true}
	if _, _, log, err := f.submit(context.Background(), f.key, path, rel, googleplay.State{}); err != nil {
		t.Fatalf("submit: %v\n%s", err, log)
	}
	c := f.play.Commits()[0]
	if r := c.Tracks["qa-team"]; len(r) != 1 || r[0].Status != "inProgress" || r[0].UserFraction != 0.5 || !c.ChangesNotSentForReview {
		t.Fatalf("committed %+v", c)
	}
}

// TestBadInput: each refusal names the problem and the fix, and nothing
// is committed.
func TestBadInput(t *testing.T) {
	t.Parallel()
	stranger, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		setup   func(f *fixture) ([]byte, string, googleplay.Release)
		want    []string
		uploads int // bundle upload requests the stand-in saw
	}{
		{"not a key file", func(f *fixture) ([]byte, string, googleplay.Release) {
			return []byte(`{"type":"authorized_user"}`), f.archive(t, "a.aab", fakeplay.Bundle(pkg, 1, 1)), internal(1)
		}, []string{"not a service account's JSON key file", "Google Cloud console"}, 0},
		{"a key Google does not know", func(f *fixture) ([]byte, string, googleplay.Release) {
			return fakeplay.KeyFile("publisher@farm-tests.iam.gserviceaccount.com", stranger, f.play.TokenURL),
				f.archive(t, "a.aab", fakeplay.Bundle(pkg, 1, 1)), internal(1)
		}, []string{"Google refused the service account key", "Invalid JWT Signature", "create a new JSON key"}, 0},
		{"unknown package", func(f *fixture) ([]byte, string, googleplay.Release) {
			r := internal(1)
			r.PackageName = "com.example.nope"
			return f.key, f.archive(t, "a.aab", fakeplay.Bundle("com.example.nope", 1, 1)), r
		}, []string{"Package not found: com.example.nope", "create it", "applicationId"}, 0},
		{"an account without access to the app", func(f *fixture) ([]byte, string, googleplay.Release) {
			other := f.play.ServiceAccount("intern")
			return other, f.archive(t, "a.aab", fakeplay.Bundle(pkg, 1, 1)), internal(1)
		}, []string{"does not have permission", "Users and permissions"}, 0},
		{"version code already in a track (refused before the upload)", func(f *fixture) ([]byte, string, googleplay.Release) {
			f.play.Used(pkg, "beta", 5)
			return f.key, f.archive(t, "a.aab", fakeplay.Bundle(pkg, 5, 1)), internal(5)
		}, []string{"Version code 5 has already been used", "track beta", "raise versionCode"}, 0},
		{"version code used, unknown to the build (Play refuses the upload)", func(f *fixture) ([]byte, string, googleplay.Release) {
			f.play.Used(pkg, "beta", 5)
			return f.key, f.archive(t, "a.aab", fakeplay.Bundle(pkg, 5, 1)), internal(0)
		}, []string{"Version code 5 has already been used", "raise versionCode"}, 1},
		{"a bundle Play refuses", func(f *fixture) ([]byte, string, googleplay.Release) {
			return f.key, f.archive(t, "a.aab", []byte("not a zip")), internal(0)
		}, []string{"Android App Bundle was not valid", "refused the archive"}, 1},
		{"a bundle of another app", func(f *fixture) ([]byte, string, googleplay.Release) {
			return f.key, f.archive(t, "a.aab", fakeplay.Bundle("com.example.other", 3, 1)), internal(0)
		}, []string{"does not match the edit's package", "refused the archive"}, 1},
		{"an archive Play does not take", func(f *fixture) ([]byte, string, googleplay.Release) {
			return f.key, f.archive(t, "a.ipa", []byte("x")), internal(0)
		}, []string{"a.ipa is not an Android App Bundle (.aab) or APK"}, 0},
		{"a track the app does not have", func(f *fixture) ([]byte, string, googleplay.Release) {
			r := internal(0)
			r.Track = "nightly"
			return f.key, f.archive(t, "a.aab", fakeplay.Bundle(pkg, 4, 1)), r
		}, []string{"Track not found: nightly", "eas.json's submit profile"}, 1},
		{"Play failing (5xx) on every try", func(f *fixture) ([]byte, string, googleplay.Release) {
			f.play.Fail("edits.insert", fakeplay.Fault{Status: 503}, fakeplay.Fault{Status: 503}, fakeplay.Fault{Status: 503})
			return f.key, f.archive(t, "a.aab", fakeplay.Bundle(pkg, 4, 1)), internal(4)
		}, []string{"503", "to every try", "submit again later"}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, googleplay.Options{})
			key, path, rel := c.setup(f)
			_, _, log, err := f.submit(context.Background(), key, path, rel, googleplay.State{})
			if err == nil {
				t.Fatalf("submitted:\n%s", log)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if n := len(f.play.Commits()); n != 0 {
				t.Errorf("%d commits", n)
			}
			if n := f.play.Requests("bundles.upload"); n != c.uploads {
				t.Errorf("%d bundle uploads, want %d", n, c.uploads)
			}
		})
	}
}

// TestTokenURLIsConfigured: the key file's token_uri is not followed;
// the signed JWT goes to the configured token URL only.
func TestTokenURLIsConfigured(t *testing.T) {
	t.Parallel()
	f := newFixture(t, googleplay.Options{})
	var decoyHits atomic.Int32
	decoy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		decoyHits.Add(1)
		http.Error(w, "no", http.StatusTeapot)
	}))
	defer decoy.Close()
	var m map[string]any
	if err := json.Unmarshal(f.key, &m); err != nil {
		t.Fatal(err)
	}
	m["token_uri"] = decoy.URL + "/token"
	key, _ := json.Marshal(m)
	path := f.archive(t, "app.aab", fakeplay.Bundle(pkg, 12, 10))
	if _, _, log, err := f.submit(context.Background(), key, path, internal(12), googleplay.State{}); err != nil {
		t.Fatalf("submit: %v\n%s", err, log)
	}
	if n := decoyHits.Load(); n != 0 {
		t.Fatalf("the key file's token_uri got %d requests", n)
	}
}

// TestTransientFailuresRetried: a 5xx from sign-in, the edit, the upload
// and the commit is retried with the retry policy, and the submission
// goes through with one upload.
func TestTransientFailuresRetried(t *testing.T) {
	t.Parallel()
	f := newFixture(t, googleplay.Options{})
	for _, op := range []string{"token", "edits.insert", "bundles.upload", "tracks.update", "edits.commit"} {
		f.play.Fail(op, fakeplay.Fault{Status: 503})
	}
	path := f.archive(t, "app.aab", fakeplay.Bundle(pkg, 11, 10))
	res, _, log, err := f.submit(context.Background(), f.key, path, internal(11), googleplay.State{})
	if err != nil {
		t.Fatalf("submit: %v\n%s", err, log)
	}
	if len(f.play.Commits()) != 1 || f.play.Uploads(res.EditID) != 1 || !strings.Contains(log, "try 2 again") {
		t.Fatalf("commits %d, uploads %d\n%s", len(f.play.Commits()), f.play.Uploads(res.EditID), log)
	}
}

// TestTimeout: a Play that never answers fails the submission with a
// clear error once every try timed out.
func TestTimeout(t *testing.T) {
	t.Parallel()
	f := newFixture(t, googleplay.Options{CallTimeout: 300 * time.Millisecond})
	f.play.Fail("edits.insert", fakeplay.Fault{Hang: true}, fakeplay.Fault{Hang: true}, fakeplay.Fault{Hang: true})
	path := f.archive(t, "app.aab", fakeplay.Bundle(pkg, 2, 10))
	_, _, _, err := f.submit(context.Background(), f.key, path, internal(2), googleplay.State{})
	if err == nil || !strings.Contains(err.Error(), "did not answer") || !strings.Contains(err.Error(), "submit again later") {
		t.Fatalf("want a timeout error, got %v", err)
	}
}

// TestResume: a try interrupted after its upload resumes its edit without
// uploading again; one interrupted after its commit sends nothing again.
func TestResume(t *testing.T) {
	t.Parallel()
	f := newFixture(t, googleplay.Options{})
	path := f.archive(t, "app.aab", fakeplay.Bundle(pkg, 21, 10))
	// The first try dies at the track update (every try of it fails),
	// after its upload.
	f.play.Fail("tracks.update", fakeplay.Fault{Status: 503}, fakeplay.Fault{Status: 503}, fakeplay.Fault{Status: 503})
	_, saved, _, err := f.submit(context.Background(), f.key, path, internal(21), googleplay.State{})
	if err == nil || len(saved) != 2 {
		t.Fatalf("first try: %v, saved %+v", err, saved)
	}
	last := saved[1]
	edit := last.EditID
	if f.play.Uploads(edit) != 1 {
		t.Fatalf("first try uploaded %d times", f.play.Uploads(edit))
	}
	res, _, log, err := f.submit(context.Background(), f.key, path, internal(0), last)
	if err != nil {
		t.Fatalf("resumed try: %v\n%s", err, log)
	}
	if res.EditID != edit || f.play.Uploads(edit) != 1 || len(f.play.Commits()) != 1 {
		t.Fatalf("resumed into %s (first %s), uploads %d, commits %d\n%s", res.EditID, edit, f.play.Uploads(edit), len(f.play.Commits()), log)
	}
	// Again from the same state: the edit is committed, the version code
	// is in the track, so the earlier try's commit is taken as the result.
	res, _, log, err = f.submit(context.Background(), f.key, path, internal(0), last)
	if err != nil || !res.Resumed || len(f.play.Commits()) != 1 || f.play.Requests("bundles.upload") != 1 {
		t.Fatalf("after the commit: %+v, %v, commits %d\n%s", res, err, len(f.play.Commits()), log)
	}
}
