package dashboard_test

import (
	"context"
	"strings"
	"testing"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/store"
)

// TestBuildPageShowsSubmissions: a build's page lists its submissions to
// the store with their status and, once one fails, the store's words.
func TestBuildPageShowsSubmissions(t *testing.T) {
	t.Parallel()
	f := newFarm(t)
	sub := f.submit(api.PlatformAndroid)
	b := f.browser()
	b.mustLogin(f.devKey)
	if p := b.get("/builds/" + sub.ID); p.status != 200 || strings.Contains(p.body, "Submissions") {
		t.Fatalf("a build without submissions: %d, or it shows a Submissions section", p.status)
	}
	_, err := f.store.CreateSubmission(context.Background(), store.NewSubmission{ID: store.NewID(), Platform: api.PlatformAndroid, BuildID: sub.ID,
		CredentialName: "default", Profile: api.SubmitProfile{Name: "production", Android: &api.AndroidSubmitProfile{
			ApplicationID: "com.example.shop", Track: "internal", ReleaseStatus: api.ReleaseCompleted}}})
	if err != nil {
		t.Fatal(err)
	}
	wantContains(t, b.get("/builds/"+sub.ID), "Submissions", "Google Play, com.example.shop, track internal", ">queued<")
	// The build fails: its submission fails, saying why.
	w := f.register("mac-mini", api.Capabilities{Platforms: []string{api.PlatformAndroid}, MaxConcurrentBuilds: 1})
	job := w.poll()
	w.complete(job, api.Result{Success: false, ErrorMessage: "gradle failed", ErrorCode: api.CodeBuildFailed})
	if _, err := f.store.FailOrphanedSubmissions(context.Background()); err != nil {
		t.Fatal(err)
	}
	wantContains(t, b.get("/builds/"+sub.ID), ">failed<", "it made nothing to submit")
}
