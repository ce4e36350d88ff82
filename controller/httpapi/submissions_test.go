package httpapi_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"strings"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/controllertest"
	"github.com/freeagent-build/freeagent/controller/serve"
	"github.com/freeagent-build/freeagent/controller/submit"
	"github.com/freeagent-build/freeagent/controller/submit/appstore"
	"github.com/freeagent-build/freeagent/internal/standins/fakeappstoreconnect"
	"github.com/freeagent-build/freeagent/internal/standins/fakeplay"
)

const playPackage = "com.example.shop"

// playEnv is a controller whose submissions go to a stand-in Play that
// knows one service account allowed to release playPackage.
type playEnv struct {
	*env
	play *fakeplay.Server
	key  []byte // the service account's JSON key file
}

func newPlayEnv(t *testing.T, tune func(*submit.Config)) *playEnv {
	t.Helper()
	p := fakeplay.New(t)
	key := p.ServiceAccount("publisher")
	p.AddApp(playPackage, key)
	e := newEnv(t)
	cfg := submit.Config{Interval: 50 * time.Millisecond}
	cfg.Play.Endpoint, cfg.Play.TokenURL = p.URL, p.TokenURL
	cfg.Play.Retry = api.RetryPolicy{Backoff: api.Backoff{Initial: time.Millisecond, Max: 10 * time.Millisecond}, Attempts: 3}
	if tune != nil {
		tune(&cfg)
	}
	e.c.Restart(controllertest.Configure(func(c *serve.Config) { c.Submit = cfg }))
	e.adopt()
	return &playEnv{env: e, play: p, key: key}
}

func internalTrack() api.SubmitProfile {
	return api.SubmitProfile{Name: "production", Android: &api.AndroidSubmitProfile{ApplicationID: playPackage, Track: "internal", ReleaseStatus: api.ReleaseCompleted}}
}

// submitBuild submits an Android build of project shop, with auto if not nil.
func (e *playEnv) submitBuild(auto *api.SubmissionRequest) string {
	e.t.Helper()
	return e.submitBuildFor(api.PlatformAndroid, auto)
}

func (e *playEnv) submitBuildFor(platform string, auto *api.SubmissionRequest) string {
	e.t.Helper()
	src := controllertest.Project(e.t, map[string]string{"package.json": `{"name":"app"}`, "app.json": `{"expo":{}}`})
	resp, err := e.developer.Submit(context.Background(), api.SubmitRequest{Platform: platform, Project: "shop",
		Source: bytes.NewReader(src), AutoSubmit: auto})
	if err != nil {
		e.t.Fatalf("submit: %v", err)
	}
	return resp.ID
}

// completeWith runs the queued build on a worker, which uploads archive as app.aab.
func (e *playEnv) completeWith(archive []byte) {
	e.t.Helper()
	e.completeAs("app.aab", archive)
}

func (e *playEnv) completeAs(name string, archive []byte) {
	e.t.Helper()
	w := e.register("w1", api.Capabilities{Platforms: []string{"android", "ios"}, MaxConcurrentBuilds: 1})
	j := w.poll(5 * time.Second)
	if j == nil {
		e.t.Fatal("no job")
	}
	if _, err := w.complete(j, api.Result{Success: true, FileName: name, File: bytes.NewReader(archive), SHA256: sha(archive)}); err != nil {
		e.t.Fatalf("complete: %v", err)
	}
}

// ended waits for a submission to end (the runner polls every 50 ms).
func (e *playEnv) ended(id string) api.Submission {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		s, err := e.developer.GetSubmission(context.Background(), id)
		if err != nil {
			e.t.Fatalf("get submission: %v", err)
		}
		if s.Status.Terminal() {
			return s
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("submission %s still %s after 30 s\n%s", id, s.Status, s.Log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (e *playEnv) buildSubmissions(buildID string) []api.Submission {
	e.t.Helper()
	l, err := e.developer.ListSubmissions(context.Background(), buildID)
	if err != nil {
		e.t.Fatalf("list submissions: %v", err)
	}
	return l.Submissions
}

// TestAutoSubmitToInternalTrack: a build queued with a submission lands
// its .aab in the stand-in Play's internal track once it completes; the
// submission's events are in the audit log; the key it came with appears
// in no answer, event or log, and is dropped once it ends.
func TestAutoSubmitToInternalTrack(t *testing.T) {
	t.Parallel()
	e := newPlayEnv(t, nil)
	id := e.submitBuild(&api.SubmissionRequest{Platform: api.PlatformAndroid, Profile: internalTrack(),
		Secrets: &api.SubmitSecrets{ServiceAccountKey: e.key}})
	subs := e.buildSubmissions(id)
	if len(subs) != 1 || subs[0].Status != api.SubmissionQueued {
		t.Fatalf("queued with the build: %+v", subs)
	}
	e.completeWith(fakeplay.Bundle(playPackage, 3, 1000))
	sub := e.ended(subs[0].ID)
	if sub.Status != api.SubmissionSucceeded || sub.Result == nil || sub.Result.VersionCode != 3 || sub.Result.Track != "internal" {
		t.Fatalf("submission ended %+v\n%s", sub, sub.Log)
	}
	commits := e.play.Commits()
	if len(commits) != 1 || len(commits[0].Tracks["internal"]) != 1 || commits[0].Tracks["internal"][0].VersionCodes[0] != 3 {
		t.Fatalf("Play's record: %+v", commits)
	}
	e.seal()
	var types []string
	var everything bytes.Buffer
	for _, ev := range e.allEvents() {
		if ev.EntityType == "submission" {
			types = append(types, ev.EventType)
		}
		everything.Write(ev.Payload)
	}
	if strings.Join(types, ",") != "submission.queued,submission.in_progress,submission.succeeded" {
		t.Errorf("submission events: %v", types)
	}
	for _, v := range []any{sub, e.build(id), e.buildSubmissions(id)} {
		b, _ := json.Marshal(v)
		everything.Write(b)
	}
	everything.WriteString(sub.Log)
	fakeplay.AssertNoKey(t, everything.Bytes(), e.key)
	var left []byte
	if err := e.store.Pool().QueryRow(context.Background(), `SELECT credentials_sealed FROM submissions WHERE id = $1`, sub.ID).Scan(&left); err != nil || left != nil {
		t.Errorf("the submission's sealed key after it ended: %d bytes (%v)", len(left), err)
	}
}

// TestSubmitWithProjectCredential: a submission names no key and uses the
// project's, kept on the farm; without one it fails naming the fix.
func TestSubmitWithProjectCredential(t *testing.T) {
	t.Parallel()
	e := newPlayEnv(t, nil)
	id := e.submitBuild(nil)
	e.completeWith(fakeplay.Bundle(playPackage, 4, 10))
	ctx := context.Background()
	sub, err := e.developer.SubmitToStore(ctx, api.SubmissionRequest{Platform: api.PlatformAndroid, BuildID: id, Profile: internalTrack()})
	if err != nil {
		t.Fatal(err)
	}
	if s := e.ended(sub.ID); s.Status != api.SubmissionFailed || !strings.Contains(*s.ErrorMessage, "expo-build credentials set --platform android --service-account-key") {
		t.Fatalf("without a kept key: %+v", s)
	}
	info, err := e.developer.SetSubmitCredential(ctx, "shop", api.PlatformAndroid, "default", api.SubmitSecrets{ServiceAccountKey: e.key})
	if err != nil || info.ClientEmail != "publisher@farm-tests.iam.gserviceaccount.com" {
		t.Fatalf("set: %+v, %v", info, err)
	}
	list, err := e.developer.ListSubmitCredentials(ctx, "shop")
	b, _ := json.Marshal(list)
	if err != nil || len(list.Credentials) != 1 {
		t.Fatalf("list: %s, %v", b, err)
	}
	fakeplay.AssertNoKey(t, b, e.key)
	sub, err = e.developer.SubmitToStore(ctx, api.SubmissionRequest{Platform: api.PlatformAndroid, BuildID: id, Profile: internalTrack()})
	if err != nil {
		t.Fatal(err)
	}
	if s := e.ended(sub.ID); s.Status != api.SubmissionSucceeded {
		t.Fatalf("with the kept key: %+v\n%s", s, s.Log)
	}
	// A key of another project does not see it.
	_, other := e.c.ProjectKey("other", "elsewhere")
	if _, err := other.GetSubmission(ctx, sub.ID); api.StatusOf(err) != 404 {
		t.Fatalf("another project's key reading the submission: %v", err)
	}
}

// TestSubmissionBadRequests: what the API refuses before queueing.
func TestSubmissionBadRequests(t *testing.T) {
	t.Parallel()
	e := newPlayEnv(t, nil)
	id := e.submitBuild(nil)
	ctx := context.Background()
	half := 0.5
	for _, c := range []struct {
		name string
		req  api.SubmissionRequest
		want string
	}{
		{"an iOS profile for an Android build", api.SubmissionRequest{Platform: api.PlatformIOS, BuildID: id,
			Profile: api.SubmitProfile{IOS: &api.IOSSubmitProfile{AscAppID: "123"}}}, "submit it with --platform android"},
		{"iOS without its app id", api.SubmissionRequest{Platform: api.PlatformIOS, BuildID: id,
			Profile: api.SubmitProfile{IOS: &api.IOSSubmitProfile{}}}, "set ascAppId"},
		{"no package", api.SubmissionRequest{Platform: api.PlatformAndroid, BuildID: id,
			Profile: api.SubmitProfile{Android: &api.AndroidSubmitProfile{Track: "internal", ReleaseStatus: "completed"}}}, "set applicationId"},
		{"rollout without inProgress", api.SubmissionRequest{Platform: api.PlatformAndroid, BuildID: id,
			Profile: api.SubmitProfile{Android: &api.AndroidSubmitProfile{ApplicationID: playPackage, Track: "internal", ReleaseStatus: "completed", Rollout: &half}}}, "only allowed with releaseStatus inProgress"},
		{"not a service account key", api.SubmissionRequest{Platform: api.PlatformAndroid, BuildID: id, Profile: internalTrack(),
			Secrets: &api.SubmitSecrets{ServiceAccountKey: []byte(`{"type":"authorized_user"}`)}}, "not a Google service account JSON key"},
		{"no build", api.SubmissionRequest{Platform: api.PlatformAndroid, Profile: internalTrack()}, "is not a build id"},
	} {
		_, err := e.developer.SubmitToStore(ctx, c.req)
		if api.StatusOf(err) != 422 && api.StatusOf(err) != 400 || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: want a refusal saying %q, got %v", c.name, c.want, err)
		}
	}
	// A build that failed has nothing to submit; one queued with it fails.
	failed := e.submitBuild(&api.SubmissionRequest{Platform: api.PlatformAndroid, Profile: internalTrack(), Secrets: &api.SubmitSecrets{ServiceAccountKey: e.key}})
	w := e.register("w1", api.Capabilities{Platforms: []string{"android"}, MaxConcurrentBuilds: 2})
	for range 2 {
		j := w.poll(5 * time.Second)
		if _, err := w.complete(j, api.Result{Success: false, ErrorMessage: "gradle failed", ErrorCode: api.CodeBuildFailed}); err != nil {
			t.Fatal(err)
		}
	}
	if s := e.ended(e.buildSubmissions(failed)[0].ID); s.Status != api.SubmissionFailed || !strings.Contains(*s.ErrorMessage, "made nothing to submit") {
		t.Fatalf("submission of a failed build: %+v", s)
	}
	if _, err := e.developer.SubmitToStore(ctx, api.SubmissionRequest{Platform: api.PlatformAndroid, BuildID: failed, Profile: internalTrack(),
		Secrets: &api.SubmitSecrets{ServiceAccountKey: e.key}}); api.StatusOf(err) != 409 || !strings.Contains(err.Error(), "submit a completed build") {
		t.Fatalf("submitting a failed build: %v", err)
	}
}

// TestSubmissionResumesAfterRestart: a controller stopped while Play hangs
// on the track update leaves the submission's edit recorded; the next
// controller resumes it once the lease ran out, without uploading again.
func TestSubmissionResumesAfterRestart(t *testing.T) {
	t.Parallel()
	e := newPlayEnv(t, func(c *submit.Config) { c.Lease = time.Second })
	e.play.Fail("tracks.update", fakeplay.Fault{Hang: true})
	id := e.submitBuild(&api.SubmissionRequest{Platform: api.PlatformAndroid, Profile: internalTrack(), Secrets: &api.SubmitSecrets{ServiceAccountKey: e.key}})
	e.completeWith(fakeplay.Bundle(playPackage, 8, 1000))
	deadline := time.Now().Add(30 * time.Second)
	for e.play.Requests("tracks.update") == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the runner never reached the track update")
		}
		time.Sleep(10 * time.Millisecond)
	}
	e.c.Restart() // the hung call is cut as the controller stops
	e.adopt()
	sub := e.ended(e.buildSubmissions(id)[0].ID)
	if sub.Status != api.SubmissionSucceeded || sub.Attempts != 2 || sub.Result == nil {
		t.Fatalf("resumed submission: %+v\n%s", sub, sub.Log)
	}
	if n := e.play.Uploads(sub.Result.EditID); n != 1 || e.play.Requests("bundles.upload") != 1 || len(e.play.Commits()) != 1 {
		t.Fatalf("uploads into edit %s: %d (requests %d), commits %d\n%s", sub.Result.EditID, n, e.play.Requests("bundles.upload"), len(e.play.Commits()), sub.Log)
	}
	if !strings.Contains(sub.Log, "Resuming edit "+sub.Result.EditID) {
		t.Fatalf("log:\n%s", sub.Log)
	}
}

// TestSubmitIPAToTestFlight: an iOS build's .ipa goes through the stand-in
// App Store Connect until it is ready for TestFlight, and into the group
// the submit profile names; the .p8 key shows in no answer or log.
func TestSubmitIPAToTestFlight(t *testing.T) {
	t.Parallel()
	sk, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(sk)
	if err != nil {
		t.Fatal(err)
	}
	p8 := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	const issuer, keyID, appID, bundle = "69a6de70-03db-47e3-e053-5b8c7c11a4d1", "2X9R4HXF34", "1234567890", "com.example.demo"
	asc := fakeappstoreconnect.Start(fakeappstoreconnect.Config{
		Keys: []fakeappstoreconnect.Key{{IssuerID: issuer, KeyID: keyID, Public: &sk.PublicKey}},
		Apps: []fakeappstoreconnect.App{{ID: appID, BundleID: bundle, Name: "Shop", Groups: []string{"QA"}}},
	})
	t.Cleanup(asc.Close)
	e := newPlayEnv(t, func(c *submit.Config) {
		c.AppStore = appstore.Client{BaseURL: asc.URL, PollInterval: time.Millisecond,
			Retry: api.RetryPolicy{Backoff: api.Backoff{Initial: time.Millisecond, Max: 2 * time.Millisecond}, Attempts: 3}}
	})
	id := e.submitBuildFor(api.PlatformIOS, &api.SubmissionRequest{Platform: api.PlatformIOS,
		Profile: api.SubmitProfile{Name: "production", IOS: &api.IOSSubmitProfile{AscAppID: appID, BundleIdentifier: bundle, Groups: []string{"QA"}}},
		Secrets: &api.SubmitSecrets{ASCAPIKey: &api.ASCAPIKey{IssuerID: issuer, KeyID: keyID, PrivateKey: p8}}})
	e.completeAs("Demo.ipa", ipa(t)) // com.example.demo, build 45
	sub := e.ended(e.buildSubmissions(id)[0].ID)
	if sub.Status != api.SubmissionSucceeded || sub.Result == nil || sub.Result.ProcessingState != "VALID" || sub.Result.BuildNumber != "45" ||
		len(sub.Result.Groups) != 1 || sub.Result.Groups[0] != "QA" {
		t.Fatalf("submission %+v (%+v)\n%s", sub, sub.Result, sub.Log)
	}
	if n := len(asc.Uploads()); n != 1 {
		t.Fatalf("%d build uploads", n)
	}
	b, _ := json.Marshal(sub)
	for _, secret := range []string{string(p8), base64.StdEncoding.EncodeToString(der)[:40], base64.StdEncoding.EncodeToString(p8)[:40]} {
		if strings.Contains(string(b), secret) || strings.Contains(sub.Log, secret) {
			t.Fatal("the .p8 key shows in the submission or its log")
		}
	}
}
