package store_test

import (
	"sync"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/store"
)

// TestSubmissionClaimedOnce: replicas claiming at once get each ready
// submission exactly once; a submission waits for its build to complete;
// one whose lease ran out is claimed again (resumed), and one interrupted
// too often fails.
func TestSubmissionClaimedOnce(t *testing.T) {
	t.Parallel()
	f := newStore(t)
	w := f.register("", android(""))
	profile := api.SubmitProfile{Name: "production", Android: &api.AndroidSubmitProfile{ApplicationID: "com.example.app", Track: "internal", ReleaseStatus: api.ReleaseCompleted}}
	const n = 6
	var subs []string
	for range n {
		b := f.submit(store.NewBuild{})
		s, err := f.s.CreateSubmission(f.ctx, store.NewSubmission{ID: store.NewID(), Platform: api.PlatformAndroid, BuildID: b.ID, Profile: profile, CredentialName: "default"})
		if err != nil {
			t.Fatal(err)
		}
		subs = append(subs, s.ID)
	}
	if c, err := f.s.ClaimSubmission(f.ctx, "replica-a", time.Minute); err != nil || c != nil {
		t.Fatalf("a submission of a pending build was claimed: %+v %v", c, err)
	}
	for range n {
		j := f.claim(w)
		if _, err := f.s.Complete(f.ctx, w, store.Result{BuildID: j.ID, AttemptID: j.AttemptID, LeaseToken: j.LeaseToken, Success: true}); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	claimed := map[string]int{}
	var wg sync.WaitGroup
	for r := range 3 {
		wg.Go(func() {
			for {
				c, err := f.s.ClaimSubmission(f.ctx, "replica-"+string(rune('a'+r)), time.Minute)
				if err != nil {
					t.Errorf("claim: %v", err)
					return
				}
				if c == nil {
					return
				}
				mu.Lock()
				claimed[c.ID]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(claimed) != n {
		t.Fatalf("claimed %d of %d submissions: %v", len(claimed), n, claimed)
	}
	for id, k := range claimed {
		if k != 1 {
			t.Errorf("submission %s claimed %d times", id, k)
		}
	}
	// A runner that stopped renewing loses its submission to the next.
	f.exec(`UPDATE submissions SET lease_expires_at = now() - interval '1 second' WHERE id = $1`, subs[0])
	c, err := f.s.ClaimSubmission(f.ctx, "replica-b", time.Minute)
	if err != nil || c == nil || c.ID != subs[0] || c.Attempts != 2 {
		t.Fatalf("reclaiming an expired lease: %+v %v", c, err)
	}
	if err := f.s.FinishSubmission(f.ctx, subs[0], "replica-a", &api.SubmissionResult{Store: "google_play"}, ""); err == nil {
		t.Fatal("the runner that lost the lease ended the submission")
	}
	for range store.MaxSubmissionAttempts - 1 {
		f.exec(`UPDATE submissions SET lease_expires_at = now() - interval '1 second' WHERE id = $1`, subs[0])
		if _, err := f.s.ClaimSubmission(f.ctx, "replica-b", time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	s, err := f.s.GetSubmission(f.ctx, subs[0])
	if err != nil || s.Status != api.SubmissionFailed || s.ErrorMessage == nil {
		t.Fatalf("a submission interrupted %d times: %+v %v", store.MaxSubmissionAttempts, s, err)
	}
}
