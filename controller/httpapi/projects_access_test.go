package httpapi_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/controllertest"
)

// projectKey creates a developer key bound to projects, as `keys create
// --role developer --project P` does.
func (e *env) projectKey(name string, projects ...string) *api.Client {
	e.t.Helper()
	k, c := e.newKey(name, "developer")
	if err := e.store.BindKey(context.Background(), k.ID, projects, nil); err != nil {
		e.t.Fatal(err)
	}
	return c
}

func submitAs(t *testing.T, c *api.Client, spec *api.BuildSpec, creds *api.BuildCredentials) (api.SubmitResponse, error) {
	t.Helper()
	return c.Submit(context.Background(), api.SubmitRequest{Platform: spec.Platform, Spec: spec, Credentials: creds,
		Source: bytes.NewReader(controllertest.Project(t, map[string]string{"package.json": `{"name":"app"}`, "nonce": randomID()}))})
}

// TestProjectBoundaries: a developer key of p2 cannot read, list, cancel,
// retry, download or follow the logs of a build of p1 (404, as if it did
// not exist) nor submit into p1 or use p1's variables (403 naming the
// project); an admin sees both; the unbound developer key of the env is
// refused once keys are bound.
func TestProjectBoundaries(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()

	// A one-team farm: the unbound developer key works, and its builds
	// belong to their spec's project.
	pre, err := e.submitSpec(androidSpec("p1", "preview"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if b := e.build(pre.ID); b.Project != "p1" {
		t.Fatalf("project of the build: %q", b.Project)
	}

	p1, p2 := e.projectKey("team-1", "p1"), e.projectKey("team-2", "p2")
	b1, err := submitAs(t, p1, androidSpec("p1", "preview"), nil)
	if err != nil {
		t.Fatal(err)
	}
	// --project overrides the slug: the same app submitted into p2.
	spec := androidSpec("p1", "preview")
	spec.ProjectName = "p2"
	b2, err := submitAs(t, p2, spec, nil)
	if err != nil {
		t.Fatal(err)
	}
	if b := e.build(b2.ID); b.Project != "p2" {
		t.Fatalf("--project: the build is in %q", b.Project)
	}

	// Reading another project's build: 404, exactly as for no build.
	_, err = p2.GetBuild(ctx, b1.ID)
	wantStatus(t, err, http.StatusNotFound)
	_, missing := p2.GetBuild(ctx, "AAAAAAAAAAAAAAAAAAAAAAAAAA")
	if api.StatusOf(missing) != http.StatusNotFound {
		t.Fatalf("a missing build: %v", missing)
	}
	_, err = p2.Cancel(ctx, b1.ID)
	wantStatus(t, err, http.StatusNotFound)
	_, err = p2.Retry(ctx, b1.ID)
	wantStatus(t, err, http.StatusNotFound)
	_, err = p2.ReadLogs(ctx, b1.ID, 0)
	wantStatus(t, err, http.StatusNotFound)
	if resp, err := p2.DownloadArtifact(ctx, b1.ID, "app.apk", 0); err == nil {
		resp.Body.Close()
		t.Fatal("downloaded another project's artifact")
	} else {
		wantStatus(t, err, http.StatusNotFound)
	}
	// Live logs (SSE) too.
	req, err := p2.NewRequest(ctx, http.MethodGet, "/api/builds/"+b1.ID+"/logs?follow=1", nil, map[string]string{"Accept": "text/event-stream"})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("follow another project's logs: %d %s", resp.StatusCode, body)
	}

	// Its own build reads fine.
	if _, err := p2.GetBuild(ctx, b2.ID); err != nil {
		t.Fatal(err)
	}
	// Lists hold only the key's projects; the admin's holds all.
	list, err := p2.ListBuilds(ctx, api.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Builds) != 1 || list.Builds[0].ID != b2.ID {
		t.Fatalf("p2's list: %+v", list.Builds)
	}
	if list, err = p2.ListBuilds(ctx, api.ListOptions{Project: "p1"}); err != nil || len(list.Builds) != 0 {
		t.Fatalf("p2 filtering on p1: %+v %v", list.Builds, err)
	}
	all, err := e.admin.ListBuilds(ctx, api.ListOptions{})
	if err != nil || len(all.Builds) != 3 {
		t.Fatalf("admin's list: %+v %v", all.Builds, err)
	}
	if only, err := e.admin.ListBuilds(ctx, api.ListOptions{Project: "p2"}); err != nil || len(only.Builds) != 1 || only.Builds[0].ID != b2.ID {
		t.Fatalf("admin filtering on p2: %+v %v", only.Builds, err)
	}
	if _, err := e.admin.GetBuild(ctx, b1.ID); err != nil {
		t.Fatal(err)
	}

	// Submitting into p1 with p2's key: 403 naming the project and the fix.
	_, err = submitAs(t, p2, androidSpec("p1", "preview"), nil)
	wantStatus(t, err, http.StatusForbidden)
	if !strings.Contains(err.Error(), `project "p1"`) || !strings.Contains(err.Error(), "keys bind") {
		t.Fatalf("the 403 does not name the project and the fix: %v", err)
	}
	// A raw submit naming p1, and one naming none, are refused too.
	_, err = p2.Submit(ctx, api.SubmitRequest{Platform: api.PlatformAndroid, Project: "p1", Source: bytes.NewReader(controllertest.Project(t, map[string]string{"a": "b"}))})
	wantStatus(t, err, http.StatusForbidden)
	_, err = p2.Submit(ctx, api.SubmitRequest{Platform: api.PlatformAndroid, Source: bytes.NewReader(controllertest.Project(t, map[string]string{"a": "b"}))})
	wantStatus(t, err, http.StatusForbidden)

	// Project variables and credentials obey the same rule.
	_, err = p2.ListVariables(ctx, "p1", "")
	wantStatus(t, err, http.StatusForbidden)
	_, err = p2.SetVariable(ctx, "p1", api.SetVariableRequest{Name: "X", Value: "y", Visibility: api.VisibilityPlaintext, Environments: []string{"preview"}})
	wantStatus(t, err, http.StatusForbidden)
	_, err = p2.ListCredentials(ctx, "p1")
	wantStatus(t, err, http.StatusForbidden)
	if _, err := p2.ListVariables(ctx, "p2", ""); err != nil {
		t.Fatal(err)
	}

	// Keys are bound now: an unbound developer key is refused everywhere,
	// with the fix. (A fresh key: the env's was verified before keys were
	// bound, and a verified key is trusted for the key cache's TTL.)
	_, unbound := e.newKey("unbound", "developer")
	_, err = unbound.ListBuilds(ctx, api.ListOptions{})
	wantStatus(t, err, http.StatusForbidden)
	if !strings.Contains(err.Error(), "bound to no project") || !strings.Contains(err.Error(), "keys bind") {
		t.Fatalf("the unbound key's 403: %v", err)
	}
	_, err = unbound.GetBuild(ctx, pre.ID)
	wantStatus(t, err, http.StatusForbidden)
	_, err = submitAs(t, unbound, androidSpec("p1", "preview"), nil)
	wantStatus(t, err, http.StatusForbidden)

	// p1's own key cancels its build; p2's cancel above changed nothing.
	if b := e.build(b1.ID); b.Status != api.StatusPending {
		t.Fatalf("p2's cancel reached p1's build: %s", b.Status)
	}
	if _, err := p1.Cancel(ctx, b1.ID); err != nil {
		t.Fatal(err)
	}
	// A p1 key retries its build into p1.
	retried, err := p1.Retry(ctx, b1.ID)
	if err != nil {
		t.Fatal(err)
	}
	if b := e.build(retried.ID); b.Project != "p1" {
		t.Fatalf("the retry is in %q", b.Project)
	}
}

// TestCredentialedBuildRouting: a build carrying credentials (or secret
// variables) never reaches an untrusted pool's worker nor a local-driver
// worker of a pool that does not allow it; it reaches a trusted pool's VM
// worker; a project limited to pools is built only there; the queue reason
// names the missing trusted pool.
func TestCredentialedBuildRouting(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.admin.SetPool(ctx, api.Pool{Name: "macs", Trusted: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.SetPool(ctx, api.Pool{Name: "ci", Trusted: true, AllowLocal: true}); err != nil {
		t.Fatal(err)
	}
	untrusted := e.register("borrowed-mac", api.Capabilities{Pool: "community", VMDriver: "tart"})
	local := e.register("linux-box", api.Capabilities{Pool: "macs", VMDriver: api.VMDriverLocal})
	// An older agent names its driver only as a label: still local.
	oldLocal := e.register("old-agent", api.Capabilities{Labels: map[string]string{"vm_driver": "local"}})

	signed, err := e.submitSpec(androidSpec("app", "production"), &api.BuildCredentials{Android: testKeystore()})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []*workerSession{untrusted, local, oldLocal} {
		if j := w.poll(0); j != nil {
			t.Fatalf("worker %s claimed the credentialed build", w.id)
		}
	}
	reason := queueReason(t, e, signed.ID)
	if !strings.Contains(reason, `no trusted worker for project "app" online`) {
		t.Fatalf("queue reason: %q", reason)
	}

	// A plain build goes anywhere; the untrusted worker takes it.
	plain, err := e.submitSpec(androidSpec("app", "production"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if j := untrusted.poll(0); j == nil || j.ID != plain.ID {
		t.Fatalf("untrusted worker and a plain build: %+v", j)
	}

	// A secret variable makes a build need trust too.
	e.setVar("app", api.SetVariableRequest{Name: "TOKEN", Value: "s3cret-value", Visibility: api.VisibilitySecret, Environments: []string{"preview"}})
	secretive, err := e.submitSpec(androidSpec("app", "preview"), nil)
	if err != nil {
		t.Fatal(err)
	}
	untrusted2 := e.register("borrowed-mac-2", api.Capabilities{Pool: "community", VMDriver: "tart"})
	if j := untrusted2.poll(0); j != nil {
		t.Fatalf("an untrusted worker claimed a build with secret variables: %s", j.ID)
	}

	// A trusted VM worker takes the credentialed builds.
	vm := e.register("studio-mac", api.Capabilities{Pool: "macs", VMDriver: "tart", MaxConcurrentBuilds: 2})
	got := map[string]bool{}
	for range 2 {
		if j := vm.poll(0); j != nil {
			got[j.ID] = true
			if _, err := vm.heartbeat(j); err != nil { // acknowledged: the next poll claims anew
				t.Fatal(err)
			}
		}
	}
	if !got[signed.ID] || !got[secretive.ID] {
		t.Fatalf("the trusted VM worker got %v, want %s and %s", got, signed.ID, secretive.ID)
	}

	// A pool that allows the local driver runs credentialed builds on it.
	ciLocal := e.register("ci-runner", api.Capabilities{Pool: "ci", VMDriver: api.VMDriverLocal})
	third, err := e.submitSpec(androidSpec("app", "production"), &api.BuildCredentials{Android: testKeystore()})
	if err != nil {
		t.Fatal(err)
	}
	if j := local.poll(0); j != nil {
		t.Fatal("a local worker of a pool without allow_local claimed a credentialed build")
	}
	if j := ciLocal.poll(0); j == nil || j.ID != third.ID {
		t.Fatalf("the allow_local pool's worker: %+v", j)
	}

	// A project limited to pools is built only there, even a plain build.
	if _, err := e.admin.SetProjectPools(ctx, "walled", []string{"walled-macs"}); err != nil {
		t.Fatal(err)
	}
	walled, err := e.submitSpec(androidSpec("walled", "production"), nil)
	if err != nil {
		t.Fatal(err)
	}
	untrusted3 := e.register("borrowed-mac-3", api.Capabilities{Pool: "community", VMDriver: "tart"})
	if j := untrusted3.poll(0); j != nil {
		t.Fatalf("a worker outside the project's pools claimed its build: %s", j.ID)
	}
	if reason := queueReason(t, e, walled.ID); !strings.Contains(reason, `pools walled-macs, the pools project "walled" may use`) {
		t.Fatalf("queue reason for a walled project: %q", reason)
	}
	inside := e.register("walled-mac", api.Capabilities{Pool: "walled-macs", VMDriver: "tart"})
	if j := inside.poll(0); j == nil || j.ID != walled.ID {
		t.Fatalf("a worker of the project's pool: %+v", j)
	}
}

// TestTrustedPoolMembershipIsAnAdminsWord: once worker keys are bound to
// pools, an unbound worker key cannot declare itself into a trusted pool,
// and a bound one registers only in its pools.
func TestTrustedPoolMembershipIsAnAdminsWord(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	// No worker key bound: the default (trusted) pool is open, as today.
	_, first := e.newKey("first", "worker")
	if _, err := first.Register(ctx, api.RegisterRequest{Name: "mac"}); err != nil {
		t.Fatal(err)
	}
	k, owner := e.newKey("owner", "worker")
	if err := e.store.BindKey(ctx, k.ID, nil, []string{"studio"}); err != nil {
		t.Fatal(err)
	}
	// Once one is, an unbound key cannot declare itself into it.
	_, err := e.worker.Register(ctx, api.RegisterRequest{Name: "sneaky", Capabilities: api.Capabilities{Pool: api.DefaultPool}})
	wantStatus(t, err, http.StatusForbidden)
	if !strings.Contains(err.Error(), "keys bind") {
		t.Fatalf("the 403 does not say how to fix it: %v", err)
	}
	if _, err := e.worker.Register(ctx, api.RegisterRequest{Name: "guest", Capabilities: api.Capabilities{Pool: "community"}}); err != nil {
		t.Fatalf("an unbound key in an untrusted pool: %v", err)
	}
	_, err = owner.Register(ctx, api.RegisterRequest{Name: "elsewhere", Capabilities: api.Capabilities{Pool: "community"}})
	wantStatus(t, err, http.StatusForbidden)
	if _, err := owner.Register(ctx, api.RegisterRequest{Name: "studio-1", Capabilities: api.Capabilities{Pool: "studio"}}); err != nil {
		t.Fatal(err)
	}
	pools, err := e.admin.ListPools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]api.Pool{}
	for _, p := range pools.Pools {
		byName[p.Name] = p
	}
	if !byName["default"].Trusted || byName["community"].Trusted || byName["studio"].OnlineWorkers != 1 {
		t.Fatalf("pools: %+v", pools.Pools)
	}
}

// TestSquattedPoolIsNotTrustedWithItsSquatter: a worker whose unbound key
// registered it in a pool before an admin trusted the pool is not carried
// into the trust: trusting the pool lists it as not admitted, it gets no
// credentialed build, and binding its key to the pool (the admin's word)
// admits it.
func TestSquattedPoolIsNotTrustedWithItsSquatter(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	k, owner := e.newKey("owner", "worker") // some worker key is bound: keys are told apart by pool
	if err := e.store.BindKey(ctx, k.ID, nil, []string{"vault"}); err != nil {
		t.Fatal(err)
	}
	squatter := e.register("squatter", api.Capabilities{Pool: "vault", VMDriver: "tart", MaxConcurrentBuilds: 2}) // untrusted yet: allowed
	ownerReg, err := owner.Register(ctx, api.RegisterRequest{Name: "studio-mac",                                  // an iOS Mac: the Android builds below are not its
		Capabilities: api.Capabilities{Pool: "vault", VMDriver: "tart", Platforms: []string{api.PlatformIOS}}})
	if err != nil {
		t.Fatal(err)
	}

	set, err := e.admin.SetPool(ctx, api.Pool{Name: "vault", Trusted: true})
	if err != nil {
		t.Fatal(err)
	}
	admitted := map[string]bool{}
	for _, w := range set.Workers {
		admitted[w.ID] = w.PoolAdmitted
	}
	if len(set.Workers) != 2 || admitted[squatter.id] || !admitted[ownerReg.ID] {
		t.Fatalf("trusting the pool lists %+v: want the squatter not admitted, the bound key's worker admitted", set.Workers)
	}

	signed, err := e.submitSpec(androidSpec("app", "production"), &api.BuildCredentials{Android: testKeystore()})
	if err != nil {
		t.Fatal(err)
	}
	if j := squatter.poll(0); j != nil {
		t.Fatalf("the squatter claimed credentialed build %s", j.ID)
	}
	if reason := queueReason(t, e, signed.ID); !strings.Contains(reason, "bound to its pool") {
		t.Errorf("queue reason: %q", reason)
	}
	// A plain build still goes to it: the pool's trust is all it lacks.
	plain, err := e.submitSpec(androidSpec("app", "production"), nil)
	if err != nil {
		t.Fatal(err)
	}
	j := squatter.poll(0)
	if j == nil || j.ID != plain.ID {
		t.Fatalf("the squatter and a plain build: %+v", j)
	}
	if _, err := squatter.heartbeat(j); err != nil { // acknowledged: the next poll claims anew
		t.Fatal(err)
	}

	// The admin accepts it by binding its key to the pool.
	var keyID string
	for _, w := range set.Workers {
		if w.ID == squatter.id {
			keyID = w.KeyID
		}
	}
	if err := e.store.BindKey(ctx, keyID, nil, []string{"vault"}); err != nil {
		t.Fatal(err)
	}
	if j := squatter.poll(0); j == nil || j.ID != signed.ID {
		t.Fatalf("once admitted, the worker got %+v, want %s", j, signed.ID)
	}
}

// queueReason is the queue page's reason for build id, as an admin sees it.
func queueReason(t *testing.T, e *env, id string) string {
	t.Helper()
	q, err := e.admin.Queue(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range q.Builds {
		if b.ID == id {
			return b.Reason
		}
	}
	t.Fatalf("build %s is not in the queue: %+v", id, q.Builds)
	return ""
}

// TestIdempotencyKeyStaysInItsProject: a key unbound from p1 cannot win
// back a build of p1 by repeating the Idempotency-Key of a submit it made
// there: the repeat names another project, so it is another request (409),
// and it neither returns p1's build nor a build token that reads it.
func TestIdempotencyKeyStaysInItsProject(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	k, mover := e.newKey("mover", "developer")
	if err := e.store.BindKey(ctx, k.ID, []string{"p1"}, nil); err != nil {
		t.Fatal(err)
	}
	submit := func(project string) (api.SubmitResponse, error) {
		return mover.Submit(ctx, api.SubmitRequest{Platform: api.PlatformAndroid, Spec: androidSpec(project, "preview"), IdempotencyKey: "release-42",
			Source: bytes.NewReader(controllertest.Project(t, map[string]string{"package.json": `{"name":"app"}`}))})
	}
	b1, err := submit("p1")
	if err != nil {
		t.Fatal(err)
	}
	// The repeat a lost answer calls for still finds its build.
	again, err := submit("p1")
	if err != nil || again.ID != b1.ID {
		t.Fatalf("the repeat of the submit: %+v %v", again, err)
	}
	if err := e.store.UnbindKey(ctx, k.ID, []string{"p1"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := e.store.BindKey(ctx, k.ID, []string{"p2"}, nil); err != nil {
		t.Fatal(err)
	}
	_, err = mover.GetBuild(ctx, b1.ID)
	wantStatus(t, err, http.StatusNotFound)

	got, err := submit("p2")
	if err == nil {
		reader := &api.Client{BaseURL: e.URL, BuildToken: got.AccessToken}
		_, rerr := reader.GetBuild(ctx, b1.ID)
		t.Fatalf("a repeat into p2 answered build %s (p1's is %s); its token reads p1's build: %v", got.ID, b1.ID, rerr == nil)
	}
	wantStatus(t, err, http.StatusConflict)
	if !strings.Contains(err.Error(), "Idempotency-Key") {
		t.Fatalf("the 409 does not name the Idempotency-Key: %v", err)
	}
	// p1's build token from the first submit went with the key's p1.
	_, err = (&api.Client{BaseURL: e.URL, BuildToken: again.AccessToken}).GetBuild(ctx, b1.ID)
	wantStatus(t, err, http.StatusUnauthorized)
}

// TestBuildTokenFollowsKeyBindings: a build token reads its build only
// while the key that submitted it may: unbinding the key from the build's
// project, or moving it to another project, ends the token (as revoking
// the key does); binding the project back restores it, since the token is
// checked against the key's access each time.
func TestBuildTokenFollowsKeyBindings(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	k, dev := e.newKey("p1-ci", "developer")
	if err := e.store.BindKey(ctx, k.ID, []string{"p1"}, nil); err != nil {
		t.Fatal(err)
	}
	sub, err := submitAs(t, dev, androidSpec("p1", "preview"), nil)
	if err != nil {
		t.Fatal(err)
	}
	token := &api.Client{BaseURL: e.URL, BuildToken: sub.AccessToken}
	if _, err := token.GetBuild(ctx, sub.ID); err != nil {
		t.Fatalf("the token of a bound key: %v", err)
	}
	if err := e.store.UnbindKey(ctx, k.ID, []string{"p1"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := e.store.BindKey(ctx, k.ID, []string{"p2"}, nil); err != nil {
		t.Fatal(err)
	}
	_, err = token.GetBuild(ctx, sub.ID)
	wantStatus(t, err, http.StatusUnauthorized)
	if !strings.Contains(err.Error(), `project "p1"`) {
		t.Fatalf("the 401 does not name the project the key lost: %v", err)
	}
	_, err = token.ReadLogs(ctx, sub.ID, 0)
	wantStatus(t, err, http.StatusUnauthorized)
	if err := e.store.UnbindKey(ctx, k.ID, []string{"p2"}, nil); err != nil {
		t.Fatal(err)
	}
	// Unbound on a farm of bound keys, the key itself is refused, and so
	// is its token.
	_ = e.projectKey("other", "p3")
	_, err = token.GetBuild(ctx, sub.ID)
	wantStatus(t, err, http.StatusUnauthorized)
	if err := e.store.BindKey(ctx, k.ID, []string{"p1"}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := token.GetBuild(ctx, sub.ID); err != nil {
		t.Fatalf("the key has p1 again, the token does not: %v", err)
	}
}
