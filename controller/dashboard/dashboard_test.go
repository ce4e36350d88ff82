package dashboard_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/controllertest"
	"github.com/freeagent-build/freeagent/controller/httpapi"
)

func TestLoginSessionsAndRoles(t *testing.T) {
	t.Parallel()
	f := newFarm(t)
	b := f.browser()

	p := b.get("/builds?status=pending")
	if p.status != http.StatusSeeOther || p.header.Get("Location") != "/login?next="+url.QueryEscape("/builds?status=pending") {
		t.Fatalf("signed out: want a redirect to the login page, got %d %q", p.status, p.header.Get("Location"))
	}
	if p := b.login("fak_nonsense"); p.status != http.StatusUnauthorized || !strings.Contains(p.body, "unknown or revoked") {
		t.Errorf("wrong key: want 401 naming the problem, got %d: %.300s", p.status, p.body)
	}
	if p := b.login(f.workKey); p.status != http.StatusForbidden || !strings.Contains(p.body, "worker key cannot sign in") {
		t.Errorf("worker key: want 403, got %d: %.300s", p.status, p.body)
	}
	// A login form posted without the form's own token (login CSRF) fails.
	if p := b.post("/login", url.Values{"api_key": {f.devKey}, "csrf": {"forged"}}); p.status != http.StatusForbidden {
		t.Errorf("login without the form token: want 403, got %d", p.status)
	}

	form := b.get("/login")
	p = b.post("/login", url.Values{"csrf": {form.csrf(t)}, "api_key": {f.devKey}, "next": {"/queue"}})
	if p.status != http.StatusSeeOther || p.header.Get("Location") != "/queue" {
		t.Fatalf("login: want a redirect to next, got %d %q", p.status, p.header.Get("Location"))
	}
	cookie := sessionCookie(t, p.header)
	if !cookie.HttpOnly || cookie.SameSite != http.SameSiteLaxMode || cookie.Secure {
		t.Errorf("session cookie over plain HTTP: want HttpOnly, SameSite=Lax, not Secure; got %+v", cookie)
	}
	// Only a hash of the session id is stored.
	var stored []byte
	conn := f.conn()
	if err := conn.QueryRow(context.Background(), `SELECT id_hash FROM dashboard_sessions`).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(cookie.Value))
	if !bytes.Equal(stored, sum[:]) || bytes.Contains(stored, []byte(cookie.Value)) {
		t.Errorf("stored session id is not the hash of the cookie")
	}

	// A developer sees builds, not workers.
	wantContains(t, b.get("/builds"), "<h1>Builds</h1>", "alice · developer")
	if p := b.get("/workers"); p.status != http.StatusForbidden {
		t.Errorf("developer on /workers: want 403, got %d", p.status)
	}
	home := b.get("/builds")
	if strings.Contains(home.body, `href="/workers"`) {
		t.Errorf("developer's navigation links to the workers page")
	}
	if p := b.post("/workers/nobody/pause", url.Values{"csrf": {home.csrf(t)}}); p.status != http.StatusForbidden {
		t.Errorf("developer pausing a worker: want 403, got %d", p.status)
	}
	// Unknown API paths stay JSON.
	if p := b.get("/api/nope"); p.status != http.StatusNotFound || !strings.HasPrefix(p.header.Get("Content-Type"), "application/json") {
		t.Errorf("/api/nope: want a JSON 404, got %d %s", p.status, p.header.Get("Content-Type"))
	}

	// Logout ends the session on the server: the old cookie is worthless.
	if p := b.post("/logout", url.Values{"csrf": {home.csrf(t)}}); p.status != http.StatusSeeOther {
		t.Fatalf("logout: %d", p.status)
	}
	replay := f.browser()
	replay.setCookie(cookie)
	if p := replay.get("/builds"); p.status != http.StatusSeeOther {
		t.Errorf("old session cookie after logout: want a redirect to login, got %d", p.status)
	}

	// Revoking the key ends its sessions.
	admin := f.browser()
	admin.mustLogin(f.adminKey)
	wantContains(t, admin.get("/workers"), "<h1>Workers</h1>")
	keys, err := f.store.ListKeys(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if k.Role == api.RoleAdmin {
			if err := f.store.RevokeKey(context.Background(), k.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	if p := admin.get("/workers"); p.status != http.StatusSeeOther {
		t.Errorf("session of a revoked key: want a redirect to login, got %d", p.status)
	}
}

func TestExpiredSessionEnds(t *testing.T) {
	t.Parallel()
	f := newFarm(t)
	b := f.browser()
	b.mustLogin(f.devKey)
	if p := b.get("/builds"); p.status != http.StatusOK {
		t.Fatalf("live session: %d", p.status)
	}
	if _, err := f.conn().Exec(context.Background(), `UPDATE dashboard_sessions SET expires_at = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	if p := b.get("/builds"); p.status != http.StatusSeeOther {
		t.Errorf("expired session: want a redirect to login, got %d", p.status)
	}
	// The next login sweeps expired sessions.
	b.mustLogin(f.devKey)
	var n int
	if err := f.conn().QueryRow(context.Background(), `SELECT count(*) FROM dashboard_sessions`).Scan(&n); err != nil || n != 1 {
		t.Errorf("sessions after a new login: %d (%v), want only the new one", n, err)
	}
}

func TestLoginRedirectStaysOnSite(t *testing.T) {
	t.Parallel()
	f := newFarm(t)
	for next, want := range map[string]string{
		"/queue?cursor=x": "/queue?cursor=x", "//evil.example/x": "/", "/\t/evil.example": "/", "/\\evil.example": "/",
		"https://evil.example/": "/", "javascript:alert(1)": "/", "": "/", "queue": "/",
	} {
		b := f.browser()
		form := b.get("/login")
		p := b.post("/login", url.Values{"csrf": {form.csrf(t)}, "api_key": {f.devKey}, "next": {next}})
		if p.status != http.StatusSeeOther || p.header.Get("Location") != want {
			t.Errorf("next %q: want a redirect to %q, got %d %q", next, want, p.status, p.header.Get("Location"))
		}
	}
}

func TestSecureCookieBehindTLSProxy(t *testing.T) {
	t.Parallel()
	f := newFarm(t)
	b := f.browser()
	form := b.do(http.MethodGet, "/login", nil, "X-Forwarded-Proto", "https")
	p := b.do(http.MethodPost, "/login", url.Values{"csrf": {form.csrf(t)}, "api_key": {f.devKey}}, "X-Forwarded-Proto", "https")
	if p.status != http.StatusSeeOther {
		t.Fatalf("login: %d %.300s", p.status, p.body)
	}
	if c := sessionCookie(t, p.header); !c.Secure || !c.HttpOnly {
		t.Errorf("behind a TLS proxy the session cookie must be Secure and HttpOnly: %+v", c)
	}
}

func TestActionsNeedSessionAndCSRF(t *testing.T) {
	t.Parallel()
	f := newFarm(t)
	sub := f.submit(api.PlatformAndroid)
	cancel := "/builds/" + sub.ID + "/cancel"

	anon := f.browser()
	if p := anon.post(cancel, url.Values{"csrf": {"x"}}); p.status != http.StatusUnauthorized {
		t.Errorf("cancel without login: want 401, got %d", p.status)
	}
	old := f.browser()
	old.mustLogin(f.devKey)
	stale := old.get("/builds/" + sub.ID).csrf(t)
	old.post("/logout", url.Values{"csrf": {stale}})

	b := f.browser()
	b.mustLogin(f.devKey)
	for name, form := range map[string]url.Values{
		"no token":                 {},
		"empty token":              {"csrf": {""}},
		"a logged-out session's":   {"csrf": {stale}},
		"token in the query only":  nil,
		"another session's (live)": {"csrf": {f.liveToken(t)}},
	} {
		path := cancel
		if form == nil {
			path, form = cancel+"?csrf="+url.QueryEscape(b.get("/builds/"+sub.ID).csrf(t)), url.Values{}
		}
		if p := b.post(path, form); p.status != http.StatusForbidden || !strings.Contains(p.body, "security token") {
			t.Errorf("%s: want 403 naming the token, got %d: %.300s", name, p.status, p.body)
		}
	}
	token := b.get("/builds/" + sub.ID).csrf(t)
	if p := b.do(http.MethodPost, cancel, url.Values{"csrf": {token}}, "Origin", "http://evil.example"); p.status != http.StatusForbidden {
		t.Errorf("cross-site POST: want 403, got %d", p.status)
	}
	if p := b.do(http.MethodPost, cancel, url.Values{"csrf": {token}}, "Origin", "https://evil.example", "X-Forwarded-Host", "farm.example"); p.status != http.StatusForbidden {
		t.Errorf("cross-site POST through a proxy: want 403, got %d", p.status)
	}
	if s := f.buildStatus(sub.ID); s != api.StatusPending {
		t.Fatalf("a refused action changed the build: %s", s)
	}
	// Behind a proxy that rewrites Host, the browser's origin is the
	// forwarded host.
	if p := b.do(http.MethodPost, cancel, url.Values{"csrf": {token}}, "Origin", "https://farm.example", "X-Forwarded-Host", "farm.example"); p.status != http.StatusSeeOther {
		t.Fatalf("cancel through a proxy: want 303, got %d: %.300s", p.status, p.body)
	}
	if p := b.post(cancel, url.Values{"csrf": {token}}); p.status != http.StatusSeeOther {
		t.Fatalf("cancelling again: want 303 (nothing to do), got %d: %.300s", p.status, p.body)
	}
	if s := f.buildStatus(sub.ID); s != api.StatusCancelled {
		t.Errorf("after cancel: %s", s)
	}
	// Retry from the page makes a new build and shows it.
	p := b.post("/builds/"+sub.ID+"/retry", url.Values{"csrf": {token}})
	loc := p.header.Get("Location")
	if p.status != http.StatusSeeOther || !strings.HasPrefix(loc, "/builds/") || loc == "/builds/"+sub.ID {
		t.Fatalf("retry: want a redirect to the new build, got %d %q", p.status, loc)
	}
	wantContains(t, b.get(loc), "Retry of", sub.ID, ">pending<")
	// A second cancel of an ended build names the conflict.
	done := b.post("/builds/"+strings.TrimPrefix(loc, "/builds/")+"/cancel", url.Values{"csrf": {token}})
	if done.status != http.StatusSeeOther {
		t.Fatalf("cancel retry: %d", done.status)
	}
}

// liveToken is the CSRF token of a separate live session.
func (f *farm) liveToken(t *testing.T) string {
	other := f.browser()
	other.mustLogin(f.devKey)
	return other.get("/builds").csrf(t)
}

func TestBuildPageShowsLifecycleWithoutSecrets(t *testing.T) {
	t.Parallel()
	f := newFarm(t)
	ctx := context.Background()
	sub := f.submit(api.PlatformAndroid)
	w := f.register("mac-mini", api.Capabilities{Platforms: []string{"android"}, MaxConcurrentBuilds: 1})
	job := w.poll()
	if job == nil {
		t.Fatal("no job")
	}
	w.heartbeat(job)
	vm := f.vmToken(job)
	var lines []string
	for i := range 30 {
		lines = append(lines, fmt.Sprintf("step %d: compiling module %d", i, i))
	}
	logText := strings.Join(lines, "\n") + "\n"
	if _, err := f.worker.AppendLog(ctx, job.ID, vm, 0, []byte(logText)); err != nil {
		t.Fatal(err)
	}
	b := f.browser()
	b.mustLogin(f.devKey)
	p := b.get("/builds/" + sub.ID)
	wantContains(t, p, ">building<", "mac-mini", "step 29: compiling module 29", `data-follow="/ui/builds/`+sub.ID+`/logs?after=`)

	w.complete(job, api.Result{Success: false, ErrorMessage: "gradle: compilation failed", ErrorCode: "build_failed"})
	p = b.get("/builds/" + sub.ID)
	wantContains(t, p, ">failed<", "build_failed", "gradle: compilation failed", "step 0: compiling", "Retry build", "#1</strong>")
	if strings.Contains(p.body, "data-follow") {
		t.Errorf("an ended build's log still follows")
	}
	for name, secret := range map[string]string{"developer key": f.devKey, "admin key": f.adminKey, "worker key": f.workKey,
		"build token": sub.AccessToken, "worker token": w.token, "lease token": job.LeaseToken, "OTP": job.OTP, "VM token": vm} {
		for _, path := range []string{"/builds", "/builds/" + sub.ID, "/queue"} {
			if strings.Contains(b.get(path).body, secret) {
				t.Errorf("%s renders the %s", path, name)
			}
		}
	}
	admin := f.browser()
	admin.mustLogin(f.adminKey)
	if body := admin.get("/workers").body; strings.Contains(body, w.token) || strings.Contains(body, f.workKey) {
		t.Errorf("the workers page renders a worker credential")
	}

	// A completed build lists its artifact with size and checksum, and the
	// session downloads it.
	sub2 := f.submit(api.PlatformAndroid)
	job = w.poll()
	w.heartbeat(job)
	apk := bytes.Repeat([]byte("APK!"), 1000)
	sum := sha256.Sum256(apk)
	w.complete(job, api.Result{Success: true, FileName: "app release.apk", File: bytes.NewReader(apk)})
	p = b.get("/builds/" + sub2.ID)
	wantContains(t, p, ">completed<", "app release.apk", "3.9 KiB", hex.EncodeToString(sum[:]), `src="/ui/builds/`+sub2.ID+`/qr.png"`)
	qr := b.get("/ui/builds/" + sub2.ID + "/qr.png")
	if qr.status != http.StatusOK || qr.header.Get("Content-Type") != "image/png" || !strings.HasPrefix(qr.body, "\x89PNG") {
		t.Errorf("QR code through the session: %d %s", qr.status, qr.header.Get("Content-Type"))
	}
	if p := f.browser().get("/ui/builds/" + sub2.ID + "/qr.png"); p.status != http.StatusSeeOther {
		t.Errorf("QR code without a session: want a redirect to login, got %d", p.status)
	}
	dl := b.get("/ui/builds/" + sub2.ID + "/artifacts/app%20release.apk")
	if dl.status != http.StatusOK || dl.body != string(apk) {
		t.Errorf("artifact download through the session: %d, %d bytes", dl.status, len(dl.body))
	}
	if p := f.browser().get("/ui/builds/" + sub2.ID + "/artifacts/app%20release.apk"); p.status != http.StatusSeeOther {
		t.Errorf("artifact download without a session: want a redirect to login, got %d", p.status)
	}

	// The page says when the artifacts expire, and once the collector
	// deleted them, that they did: no download link, no QR code.
	built, err := f.store.GetBuild(context.Background(), sub2.ID)
	if err != nil || built.ArtifactsExpireAt == nil {
		t.Fatalf("build %+v: %v", built, err)
	}
	wantContains(t, p, "Kept until "+built.ArtifactsExpireAt.UTC().Format("2006-01-02 15:04:05 UTC"), "--retain-artifacts")
	if _, err := f.store.Pool().Exec(context.Background(), `UPDATE builds SET artifacts_deleted_at = now() WHERE id = $1`, sub2.ID); err != nil {
		t.Fatal(err)
	}
	p = b.get("/builds/" + sub2.ID)
	wantContains(t, p, "These artifacts expired on ", "app release.apk")
	if strings.Contains(p.body, "/artifacts/app%20release.apk") || strings.Contains(p.body, "qr.png") {
		t.Errorf("an expired build's page still links its artifact or QR code")
	}
	if dl := b.get("/ui/builds/" + sub2.ID + "/artifacts/app%20release.apk"); dl.status != http.StatusGone {
		t.Errorf("expired artifact download through the session: %d, want 410", dl.status)
	}
}

func TestPagingThousandsOfBuilds(t *testing.T) {
	t.Parallel()
	f := newFarm(t)
	ctx := context.Background()
	conn := f.conn()
	// 3000 builds: every third pending, the rest completed or failed.
	_, err := conn.Exec(ctx, `INSERT INTO builds (id, status, platform, profile, priority, token_hash, source_size, source_sha256,
			source_format, timeout_seconds, submitted_at, started_at, completed_at)
		SELECT lpad(to_hex(i), 26, '0'), (ARRAY['pending','completed','failed'])[i % 3 + 1], (ARRAY['ios','android'])[i % 2 + 1],
			'p' || i, i % 4, sha256(int4send(i)), 1, 'x', 'tar.gz', 1800,
			now() - make_interval(secs => 3000 - i), CASE WHEN i % 3 > 0 THEN now() - make_interval(secs => 3000 - i) END,
			CASE WHEN i % 3 > 0 THEN now() - make_interval(secs => 2990 - i) END
		FROM generate_series(1, 3000) i`)
	if err != nil {
		t.Fatal(err)
	}
	b := f.browser()
	b.mustLogin(f.devKey)
	rows := regexp.MustCompile(`<tr data-build="([0-9a-f]{26})"`)
	next := regexp.MustCompile(`<a href="([^"]+)" rel="next">`)

	seen := map[string]bool{}
	path := "/builds"
	for page := 1; page <= 3; page++ {
		start := time.Now()
		p := b.get(path)
		took := time.Since(start)
		if p.status != http.StatusOK {
			t.Fatalf("page %d: %d", page, p.status)
		}
		if took > 2*time.Second {
			t.Errorf("page %d of 3000 builds took %v", page, took)
		}
		t.Logf("builds page %d of 3000 builds: %v", page, took)
		ids := rows.FindAllStringSubmatch(p.body, -1)
		if len(ids) != 50 {
			t.Fatalf("page %d: want 50 rows, got %d", page, len(ids))
		}
		for _, m := range ids {
			if seen[m[1]] {
				t.Fatalf("page %d repeats build %s", page, m[1])
			}
			seen[m[1]] = true
		}
		if page == 1 && ids[0][1] != fmt.Sprintf("%026x", 3000) {
			t.Errorf("first row is %s, want the newest build", ids[0][1])
		}
		m := next.FindStringSubmatch(p.body)
		if m == nil {
			t.Fatalf("page %d has no next-page link", page)
		}
		path = strings.ReplaceAll(m[1], "&amp;", "&")
	}
	// Filters carry over to the next page.
	p := b.get("/builds?status=failed&platform=ios")
	m := next.FindStringSubmatch(p.body)
	if m == nil {
		t.Fatal("filtered list has no next page")
	}
	p2 := b.get(strings.ReplaceAll(m[1], "&amp;", "&"))
	statuses := regexp.MustCompile(`<tr data-build="[0-9a-f]{26}" data-status="(\w+)">\s*<td>.*?</td>\s*<td class="app">.*?</td>\s*<td>.*?</td>\s*<td>(\w+)</td>`).FindAllStringSubmatch(p2.body, -1)
	if len(statuses) != 50 {
		t.Fatalf("second filtered page: %d rows", len(statuses))
	}
	for _, m := range statuses {
		if m[1] != "failed" || m[2] != "ios" {
			t.Fatalf("second page of a filtered list lost the filter: a %s %s build", m[1], m[2])
		}
	}
	if p := b.get("/builds?status=bogus"); p.status != http.StatusUnprocessableEntity || !strings.Contains(p.body, "is not one of pending") {
		t.Errorf("bad filter: want 422 naming it, got %d", p.status)
	}

	// The queue pages through the 1000 pending builds in claim order.
	start := time.Now()
	q := b.get("/queue")
	t.Logf("queue page 1 of 1000 pending builds: %v", time.Since(start))
	wantContains(t, q, "1000 pending", "No worker is online.")
	positions := regexp.MustCompile(`<tr data-build="[0-9a-f]{26}">\s*<td>(\d+)</td>`)
	first := positions.FindAllStringSubmatch(q.body, -1)
	if len(first) != 100 || first[0][1] != "1" || first[99][1] != "100" {
		t.Fatalf("queue page 1: %d rows", len(first))
	}
	m = next.FindStringSubmatch(q.body)
	if m == nil {
		t.Fatal("queue has no next page")
	}
	second := positions.FindAllStringSubmatch(b.get(strings.ReplaceAll(m[1], "&amp;", "&")).body, -1)
	if len(second) != 100 || second[0][1] != "101" {
		t.Fatalf("queue page 2 starts at %v", second[0])
	}
	if p := b.get("/queue?cursor=garbage"); p.status != http.StatusUnprocessableEntity {
		t.Errorf("bad queue cursor: want 422, got %d", p.status)
	}

	// The worker filter offers the workers by name.
	w := f.register("build-mac-7", api.Capabilities{})
	wantContains(t, b.get("/builds?worker_id="+w.id), `<option value="`+w.id+`" selected>build-mac-7</option>`, "No builds match these filters.")
}

func TestQueueReasonsAndPause(t *testing.T) {
	t.Parallel()
	f := newFarm(t)
	ctx := context.Background()
	b := f.browser()
	b.mustLogin(f.adminKey)
	reason := func(id string) string {
		t.Helper()
		m := regexp.MustCompile(`<tr data-build="` + id + `">(?s:.*?)<td class="reason">([^<]*)</td>`).FindStringSubmatch(b.get("/queue").body)
		if m == nil {
			t.Fatalf("build %s not in the queue", id)
		}
		return m[1]
	}
	ios := f.submit(api.PlatformIOS)
	and1 := f.submit(api.PlatformAndroid)
	and2 := f.submit(api.PlatformAndroid)
	if got := reason(ios.ID); got != "No worker is online." {
		t.Errorf("no workers: %q", got)
	}
	w := f.register("linux-box", api.Capabilities{Platforms: []string{"android"}, MaxConcurrentBuilds: 1})
	if got := reason(ios.ID); got != "No online worker builds ios." {
		t.Errorf("no ios worker: %q", got)
	}
	if got := reason(and1.ID); !strings.HasPrefix(got, "Next in line") {
		t.Errorf("first android build: %q", got)
	}
	if got := reason(and2.ID); got != "All android workers are busy (1 ahead)." {
		t.Errorf("second android build: %q", got)
	}

	// Pause from the workers page: the worker gets no build while paused.
	wp := b.get("/workers")
	wantContains(t, wp, "linux-box", `action="/workers/`+w.id+`/pause"`)
	if p := b.post("/workers/"+w.id+"/pause", url.Values{"csrf": {wp.csrf(t)}}); p.status != http.StatusSeeOther {
		t.Fatalf("pause: %d %.300s", p.status, p.body)
	}
	wantContains(t, b.get("/workers"), `s-paused`, `/workers/`+w.id+`/resume"`)
	if got := reason(and1.ID); got != "Every android worker is paused." {
		t.Errorf("paused: %q", got)
	}
	if j := w.poll(); j != nil {
		t.Fatalf("a paused worker was given build %s", j.ID)
	}
	if p := b.post("/workers/"+w.id+"/resume", url.Values{"csrf": {wp.csrf(t)}}); p.status != http.StatusSeeOther {
		t.Fatalf("resume: %d", p.status)
	}
	job := w.poll()
	if job == nil || job.ID != and1.ID {
		t.Fatalf("resumed worker: want %s, got %+v", and1.ID, job)
	}
	w.heartbeat(job)
	if got := reason(and2.ID); got != "All android workers are busy (0 ahead)." {
		t.Errorf("worker full: %q", got)
	}

	// Pausing through the admin API drains: the running build goes on.
	if err := f.dev.PauseWorker(ctx, w.id); api.StatusOf(err) != http.StatusForbidden {
		t.Errorf("developer key pausing: want 403, got %v", err)
	}
	if err := f.admin.PauseWorker(ctx, "no-such-worker"); api.StatusOf(err) != http.StatusNotFound {
		t.Errorf("unknown worker: want 404, got %v", err)
	}
	if err := f.admin.PauseWorker(ctx, w.id); err != nil {
		t.Fatal(err)
	}
	w.heartbeat(job)
	w.complete(job, api.Result{Success: true})
	if j := w.poll(); j != nil {
		t.Fatalf("paused through the API, the worker was given %s", j.ID)
	}
	list, err := f.admin.ListWorkers(ctx)
	if err != nil || !slices.ContainsFunc(list.Workers, func(x api.Worker) bool { return x.ID == w.id && x.Paused }) {
		t.Errorf("worker list does not show the pause: %+v %v", list, err)
	}
	if err := f.admin.ResumeWorker(ctx, w.id); err != nil {
		t.Fatal(err)
	}
	if j := w.poll(); j == nil || j.ID != and2.ID {
		t.Fatalf("after resume: want %s, got %+v", and2.ID, j)
	}

	// Backoff: a build waiting out its retry delay says until when.
	if _, err := f.conn().Exec(ctx, `UPDATE builds SET run_after = now() + interval '10 minutes' WHERE id = $1`, ios.ID); err != nil {
		t.Fatal(err)
	}
	f.register("mac", api.Capabilities{Platforms: []string{"ios"}})
	if got := reason(ios.ID); !strings.HasPrefix(got, "Backing off after a failed attempt until ") {
		t.Errorf("backoff: %q", got)
	}
}

func TestLiveStream(t *testing.T) {
	t.Parallel()
	f := newFarm(t)
	b := f.browser()
	if p := b.get("/ui/stream"); p.status != http.StatusUnauthorized {
		t.Fatalf("stream without login: want 401, got %d", p.status)
	}
	b.mustLogin(f.devKey)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, f.url+"/ui/stream", nil)
	resp, err := b.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	buf := make([]byte, 4096)
	n, _ := resp.Body.Read(buf) // the greeting
	if !strings.Contains(string(buf[:n]), "retry:") {
		t.Fatalf("greeting %q", buf[:n])
	}
	f.submit(api.PlatformIOS)
	var got strings.Builder
	for !strings.Contains(got.String(), "event: change") {
		n, err := resp.Body.Read(buf)
		if err != nil {
			t.Fatalf("stream ended before a change arrived: %v (%q)", err, got.String())
		}
		got.Write(buf[:n])
	}
	// A graceful shutdown ends the stream at once rather than waiting for it.
	start := time.Now()
	if err := f.shutdown(); err != nil {
		t.Fatalf("shutdown with a live stream open: %v", err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("shutdown took %v with a live stream open", took)
	}
	if _, err := io.ReadAll(resp.Body); err != nil {
		t.Errorf("the stream did not end cleanly: %v", err)
	}
}

func sessionCookie(t *testing.T, h http.Header) *http.Cookie {
	t.Helper()
	for _, c := range (&http.Response{Header: h}).Cookies() {
		if c.Name == "freeagent_session" && c.Value != "" {
			return c
		}
	}
	t.Fatalf("no session cookie in %v", h["Set-Cookie"])
	return nil
}

func (b *browser) setCookie(c *http.Cookie) {
	u, _ := url.Parse(b.base)
	b.c.Jar.SetCookies(u, []*http.Cookie{{Name: c.Name, Value: c.Value, Path: "/"}})
}

func (f *farm) conn() *pgx.Conn {
	f.t.Helper()
	conn, err := pgx.Connect(context.Background(), f.dsn)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func TestEventsAndControllersPages(t *testing.T) {
	t.Parallel()
	f := newFarm(t)
	ctx := context.Background()
	sub := f.submit(api.PlatformAndroid)
	f.register("mac-pro", api.Capabilities{})
	// Events are listed once sealed, a moment after their change.
	deadline := time.Now().Add(10 * time.Second)
	for {
		list, err := f.admin.Events(ctx, 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(list.Events); n > 0 && list.Events[n-1].EventType == "worker.registered" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("events not sealed: %+v", list.Events)
		}
		time.Sleep(50 * time.Millisecond)
	}
	b := f.browser()
	b.mustLogin(f.adminKey)
	p := b.get("/events")
	wantContains(t, p, "Hash chain verified", "build.submitted", "worker.registered", "controller.registered",
		`href="/builds/`+sub.ID+`"`, `&#34;android&#34;`)
	c := b.get("/controllers")
	wantContains(t, c, "<h1>Controllers</h1>", ">live<")

	dev := f.browser()
	dev.mustLogin(f.devKey)
	for _, path := range []string{"/events", "/controllers"} {
		if p := dev.get(path); p.status != http.StatusForbidden {
			t.Errorf("developer on %s: want 403, got %d", path, p.status)
		}
	}
}

func TestEventsPageShowsABrokenChainAndPages(t *testing.T) {
	t.Parallel()
	f := newFarm(t)
	// 250 sealed events whose hashes are wrong: a tampered log.
	if _, err := f.conn().Exec(context.Background(), `WITH e AS (
			INSERT INTO events (event_type, entity_type, entity_id, payload)
			SELECT 'build.completed', 'build', 'forged' || i, '{"status":"completed"}' FROM generate_series(1, 250) i
			RETURNING ord, entity_id)
		INSERT INTO event_chain (sequence, ord, previous_hash, event_hash)
		SELECT 100000 + substr(entity_id, 7)::int, ord, 'x', 'y' FROM e`); err != nil {
		t.Fatal(err)
	}
	b := f.browser()
	b.mustLogin(f.adminKey)
	p := b.get("/events")
	wantContains(t, p, "Hash chain broken at sequence")
	seqs := regexp.MustCompile(`<tr data-sequence="(\d+)"`)
	first := seqs.FindAllStringSubmatch(p.body, -1)
	if len(first) != 100 || first[0][1] != "100250" {
		t.Fatalf("first events page: %d rows, starting %v", len(first), first[0])
	}
	m := regexp.MustCompile(`<a href="([^"]+)" rel="next">`).FindStringSubmatch(p.body)
	if m == nil {
		t.Fatal("no older-events link")
	}
	second := seqs.FindAllStringSubmatch(b.get(strings.ReplaceAll(m[1], "&amp;", "&")).body, -1)
	if len(second) != 100 || second[0][1] != "100150" {
		t.Fatalf("second events page: %d rows, starting %v", len(second), second[0])
	}
	if p := b.get("/events?before=x"); p.status != http.StatusUnprocessableEntity {
		t.Errorf("bad before: want 422, got %d", p.status)
	}
}

func TestWebhookPages(t *testing.T) {
	t.Parallel()
	f := newFarm(t)
	ctx := context.Background()
	var failing atomic.Bool
	failing.Store(true)
	var got atomic.Int32
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if failing.Load() {
			http.Error(w, "not now", http.StatusServiceUnavailable)
			return
		}
		got.Add(1)
	}))
	defer receiver.Close()
	hook, err := f.admin.CreateWebhook(ctx, api.WebhookRequest{URL: receiver.URL + "/hook", Events: []string{"build.submitted"}, Description: "ci"})
	if err != nil {
		t.Fatal(err)
	}
	f.submit(api.PlatformIOS)
	b := f.browser()
	b.mustLogin(f.adminKey)
	wantContains(t, b.get("/webhooks"), receiver.URL+"/hook", "build.submitted", `href="/webhooks/`+hook.ID+`"`)

	// The failed attempt shows in the delivery log with the receiver's answer.
	var p page
	deadline := time.Now().Add(15 * time.Second)
	for {
		p = b.get("/webhooks/" + hook.ID)
		if strings.Contains(p.body, "HTTP 503") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no failed attempt shown: %.2000s", p.body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	wantContains(t, p, "build.submitted", ">pending<")
	for _, path := range []string{"/webhooks", "/webhooks/" + hook.ID} {
		if strings.Contains(b.get(path).body, hook.Secret) {
			t.Errorf("%s renders the webhook secret", path)
		}
	}
	m := regexp.MustCompile(`action="(/webhooks/[^"]+/redeliver)"`).FindStringSubmatch(p.body)
	if m == nil {
		t.Fatal("no redeliver button")
	}
	if r := b.post(m[1], url.Values{}); r.status != http.StatusForbidden {
		t.Errorf("redeliver without the CSRF token: want 403, got %d", r.status)
	}
	failing.Store(false)
	if r := b.post(m[1], url.Values{"csrf": {p.csrf(t)}}); r.status != http.StatusSeeOther {
		t.Fatalf("redeliver: %d %.300s", r.status, r.body)
	}
	for !strings.Contains(b.get("/webhooks/"+hook.ID).body, ">delivered<") {
		if time.Now().After(deadline) {
			t.Fatal("the redelivered event never showed as delivered")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got.Load() == 0 {
		t.Error("the receiver got nothing")
	}
	dev := f.browser()
	dev.mustLogin(f.devKey)
	if p := dev.get("/webhooks"); p.status != http.StatusForbidden {
		t.Errorf("developer on /webhooks: want 403, got %d", p.status)
	}
}

// TestBuildPageShowsSpec: a build submitted with a spec shows its Build
// section; one without shows none.
func TestBuildPageShowsSpec(t *testing.T) {
	t.Parallel()
	f := newFarm(t)
	spec := &api.BuildSpec{Version: api.SpecVersion, Platform: api.PlatformAndroid, ProfileName: "preview", Environment: "preview",
		Profile: api.BuildProfile{Distribution: "internal", Env: map[string]string{"B_KEY": "b <value>", "A_KEY": "a-value"},
			GradleCommand: ":app:assembleRelease", BuildType: api.AndroidAPK},
		App:     api.App{Name: "Notes", Slug: "notes", Version: "0.9.0", AndroidPackage: "com.example.notes", ConfigSource: "app.json"},
		Project: api.Project{PackageManager: api.PackageManagerPNPM, Lockfile: "pnpm-lock.yaml", AppDir: "apps/notes"},
		Android: &api.AndroidBuild{GradleCommand: ":app:assembleRelease", BuildType: api.AndroidAPK},
		Credentials: api.CredentialsInfo{Source: api.CredentialsRemote, Android: &api.KeystoreInfo{Name: "default", Type: "JKS", KeyAlias: "upload",
			CertificateSHA256: strings.Repeat("1e", 32)}},
		Message: "QA build", Versions: &api.AppVersions{Source: api.VersionSourceRemote, Increment: api.IncrementBuildVersion,
			ApplicationID: "com.example.notes", AppVersion: "0.9.0", InitialBuildVersion: "12"}}
	sub, err := f.dev.Submit(context.Background(), api.SubmitRequest{Platform: api.PlatformAndroid, Spec: spec, Source: bytes.NewReader(project(t))})
	if err == nil || api.StatusOf(err) != http.StatusUnprocessableEntity {
		t.Fatalf("a remote build without a farm keystore: %v", err)
	}
	spec.Credentials = api.CredentialsInfo{Source: api.CredentialsNone}
	if sub, err = f.dev.Submit(context.Background(), api.SubmitRequest{Platform: api.PlatformAndroid, Spec: spec, Source: bytes.NewReader(project(t))}); err != nil {
		t.Fatal(err)
	}
	b := f.browser()
	b.mustLogin(f.devKey)
	p := b.get("/builds/" + sub.ID)
	wantContains(t, p, `id="spec"`, "Notes", "notes", "0.9.0", "com.example.notes", "pnpm", "pnpm-lock.yaml", "apps/notes",
		":app:assembleRelease", ">apk<", ">none<", "QA build", "b &lt;value&gt;", `&#34;gradleCommand&#34;: &#34;:app:assembleRelease&#34;`, "<details>",
		`<dd id="versions">0.9.0 <small>(version code 12, remote version source)`)
	if a, bk := strings.Index(p.body, "A_KEY"), strings.Index(p.body, "B_KEY"); a < 0 || bk < a {
		t.Errorf("the profile's env is not listed in key order")
	}
	raw := f.submit(api.PlatformAndroid)
	if strings.Contains(b.get("/builds/"+raw.ID).body, `id="spec"`) {
		t.Errorf("a build without a spec shows a Build section")
	}
}

// A worker's own pauses (its owner's, its host's) show on the workers page
// beside the admin's, and the queue says which host holds a build back.
func TestHostPauseOnWorkersAndQueuePages(t *testing.T) {
	t.Parallel()
	f := newFarm(t)
	ctx := context.Background()
	b := f.browser()
	b.mustLogin(f.adminKey)
	w := f.register("kitchen-laptop", api.Capabilities{Platforms: []string{"android"}})
	f.submit(api.PlatformAndroid)
	if _, err := f.worker.ReportPause(ctx, w.token, api.WorkerPauseReport{HostReason: "you are using this Mac"}); err != nil {
		t.Fatal(err)
	}
	wantContains(t, b.get("/workers"), `waiting: you are using this Mac`, `action="/workers/`+w.id+`/pause"`)
	wantContains(t, b.get("/queue"), `Every android worker is paused. Its host holds builds back until this clears (kitchen-laptop: you are using this Mac).`)
	if _, err := f.worker.ReportPause(ctx, w.token, api.WorkerPauseReport{OwnerPaused: true}); err != nil {
		t.Fatal(err)
	}
	wp := b.get("/workers")
	wantContains(t, wp, `paused by its owner`)
	if strings.Contains(wp.body, "waiting: ") {
		t.Errorf("the host's pause was cleared, yet shown:\n%s", wp.body)
	}
	if q := b.get("/queue"); !strings.Contains(q.body, "Every android worker is paused.") || strings.Contains(q.body, "holds builds back") {
		t.Errorf("queue while the owner pauses: %.2000s", q.body)
	}
}

// TestFailedLoginsSpendTheAddressBudget: a wrong key at the sign-in form
// is a failed authentication like a wrong X-API-Key: after the address's
// budget is spent, wrong keys are answered 429 with Retry-After at the
// form and at the API alike, so the form is no way around the API's guard
// against guessing keys; a valid key still signs in and still works.
func TestFailedLoginsSpendTheAddressBudget(t *testing.T) {
	t.Parallel()
	c := controllertest.Start(t, controllertest.Logger(quiet()), controllertest.Limits(func(l *httpapi.Limits) {
		l.AuthFailuresPerIP, l.AuthFailureBurst = 0.01, 3
	}))
	f := &farm{t: t, url: c.URL}
	b := f.browser()
	for range 3 {
		if p := b.login("fak_guessed"); p.status != http.StatusUnauthorized {
			t.Fatalf("a wrong key: want 401, got %d", p.status)
		}
	}
	p := b.login("fak_guessed")
	if p.status != http.StatusTooManyRequests || p.header.Get("Retry-After") == "" {
		t.Fatalf("a fourth wrong key at the form: %d (Retry-After %q), want 429", p.status, p.header.Get("Retry-After"))
	}
	_, err := (&api.Client{BaseURL: c.URL, APIKey: "fak_guessed"}).ListBuilds(context.Background(), api.ListOptions{})
	if api.StatusOf(err) != http.StatusTooManyRequests {
		t.Fatalf("after three failed sign-ins the API answered a wrong key with %v, want 429", err)
	}
	if _, err := c.Admin.ListBuilds(context.Background(), api.ListOptions{}); err != nil {
		t.Fatalf("after three failed sign-ins the API refused a good key: %v", err)
	}
	if p := b.login(c.AdminKey); p.status != http.StatusSeeOther {
		t.Fatalf("after three failed sign-ins a good key could not sign in: %d %.300s", p.status, p.body)
	}
}
