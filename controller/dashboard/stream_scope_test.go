package dashboard_test

import (
	"bufio"
	"bytes"
	"context"
	"net/http"
	"testing"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/store"
)

// changeStream is an open /ui/stream whose "change" events are counted.
type changeStream struct {
	changes chan struct{}
	cancel  context.CancelFunc
}

func (b *browser) openStream(path string) (*changeStream, int) {
	b.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, b.base+path, nil)
	c := *b.c
	c.Timeout = 0
	resp, err := c.Do(req)
	if err != nil {
		cancel()
		b.t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		cancel()
		return nil, resp.StatusCode
	}
	s := &changeStream{changes: make(chan struct{}, 100), cancel: cancel}
	b.t.Cleanup(func() { cancel(); resp.Body.Close() })
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if sc.Text() == "event: change" {
				s.changes <- struct{}{}
			}
		}
		close(s.changes)
	}()
	return s, resp.StatusCode
}

func (s *changeStream) next(t *testing.T, what string) {
	t.Helper()
	if _, ok := <-s.changes; !ok {
		t.Fatalf("the stream ended before %s", what)
	}
}

// A session of a key bound to p2 is not told of p1's builds' changes, and
// cannot follow a p1 build; a p1 session is told. ScopeChanged, the check
// behind it, is exact.
func TestLiveStreamScopedToProjects(t *testing.T) {
	t.Parallel()
	f := newFarm(t)
	ctx := context.Background()
	keys := map[string]string{}
	for _, p := range []string{"p1", "p2"} {
		_, secret, err := f.store.CreateBoundKey(ctx, store.NewKey{Name: "dev-" + p, Role: api.RoleDeveloper, Projects: []string{p}})
		if err != nil {
			t.Fatal(err)
		}
		keys[p] = secret
	}
	submit := func(p string) api.SubmitResponse {
		sub, err := f.admin.Submit(ctx, api.SubmitRequest{Platform: api.PlatformAndroid, Project: p, Source: bytes.NewReader(project(t))})
		if err != nil {
			t.Fatal(err)
		}
		return sub
	}
	b1, b2 := f.browser(), f.browser()
	b1.mustLogin(keys["p1"])
	b2.mustLogin(keys["p2"])

	head, err := f.store.LastSequence(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s1, _ := b1.openStream("/ui/stream")
	s2, _ := b2.openStream("/ui/stream")
	p1Build := submit("p1")
	if _, status := b2.openStream("/ui/stream?build=" + p1Build.ID); status != http.StatusNotFound {
		t.Fatalf("a p2 session following a p1 build: %d, want 404", status)
	}
	// p1's session is told once the build's events are sealed; p2's, told
	// by the same sealer notification had it been unfiltered, is not.
	s1.next(t, "p1's session was told of its build")
	if _, err := f.admin.Cancel(ctx, p1Build.ID); err != nil {
		t.Fatal(err)
	}
	s1.next(t, "p1's session was told of the cancel")
	select {
	case <-s2.changes:
		t.Fatal("p2's session was told of p1's build")
	default:
	}
	// p2's own build reaches it.
	submit("p2")
	s2.next(t, "p2's session was told of its build")

	// The check itself: the events since head concern p1 and p2, each once.
	all, _ := store.KeyScope(store.APIKey{Role: api.RoleAdmin})
	for name, want := range map[string]bool{"p1": true, "p2": true, "p3": false} {
		_, changed, err := f.store.ScopeChanged(ctx, head, store.Scope{Projects: []string{name}}, "")
		if err != nil || changed != want {
			t.Errorf("ScopeChanged for %s: %v %v, want %v", name, changed, err, want)
		}
	}
	h, changed, err := f.store.ScopeChanged(ctx, head, all, p1Build.ID)
	if err != nil || !changed || h <= head {
		t.Errorf("ScopeChanged of build %s: head %d→%d %v %v", p1Build.ID, head, h, changed, err)
	}
	if _, changed, _ := f.store.ScopeChanged(ctx, h, all, ""); changed {
		t.Error("ScopeChanged after the head reports a change")
	}
}
