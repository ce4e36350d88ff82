package server_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/controller/api"
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
			e := newEnv(t, shortLease(time.Second))
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
				time.Sleep(1100 * time.Millisecond)
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
		})
	}
}
