package httpapi_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/freeagent-build/freeagent/api"
)

// Methods, paths and query parameters

func TestWrongMethodsAndPaths(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	u := e.URL
	sub, _ := biSubmit(t, e, api.PlatformAndroid, nil)
	before := biFingerprint(t, e)
	for _, c := range []struct{ method, path string }{
		{"DELETE", "/api/builds"},
		{"PUT", "/api/builds"},
		{"PATCH", "/api/builds/" + sub.ID},
		{"DELETE", "/api/builds/" + sub.ID},
		{"GET", "/api/builds/" + sub.ID + "/cancel"},
		{"GET", "/api/builds/" + sub.ID + "/retry"},
		{"PUT", "/api/builds/" + sub.ID + "/logs"},
		{"GET", "/api/builds/" + sub.ID + "/artifacts"},
		{"DELETE", "/api/builds/" + sub.ID + "/artifacts/x"},
		{"GET", "/api/workers/register"},
		{"POST", "/api/workers/poll"},
		{"GET", "/api/workers/heartbeat"},
		{"GET", "/api/vm/auth"},
		{"GET", "/api"},
		{"GET", "/api/"},
		{"GET", "/api/builds/" + sub.ID + "/nope"},
		{"GET", "/api/builds/" + sub.ID + "/artifacts/a/b"},
		{"POST", "/api/workers/register/extra"},
	} {
		r := biSend(t, c.method, u+c.path, nil, api.HeaderAPIKey, e.adminKey)
		switch r.Status {
		case http.StatusNotFound:
			r.wantError(t, http.StatusNotFound, api.CodeNotFound)
		case http.StatusMethodNotAllowed:
		default:
			t.Errorf("%s %s: want 404 or 405, got %d: %s", c.method, c.path, r.Status, biClip(r.Body))
		}
	}
	// Outside /api/ the paths are the dashboard's: a page saying so.
	for _, c := range []struct{ method, path string }{{"POST", "/health"}, {"GET", "/nope"}} {
		r := biSend(t, c.method, u+c.path, nil, api.HeaderAPIKey, e.adminKey)
		if r.Status != http.StatusNotFound || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/html") {
			t.Errorf("%s %s: want the dashboard's 404 page, got %d %s: %s", c.method, c.path, r.Status, r.Header.Get("Content-Type"), biClip(r.Body))
		}
	}
	biUnchanged(t, e, before)
}

func TestBadQueryParameters(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	u := e.URL
	w := biRegister(t, e, "mac", api.PlatformAndroid)
	before := biFingerprint(t, e)
	for _, c := range []struct{ query, field string }{
		{"limit=0", "limit"}, {"limit=201", "limit"}, {"limit=abc", "limit"}, {"limit=-5", "limit"},
		{"status=bogus", "status"}, {"status=PENDING", "status"}, {"platform=windows", "platform"},
		{"cursor=garbage!", "cursor"}, {"cursor=" + url.QueryEscape("Z2FyYmFnZQ"), "cursor"},
	} {
		biSend(t, "GET", u+"/api/builds?"+c.query, nil, api.HeaderAPIKey, e.devKey).wantFieldError(t, http.StatusUnprocessableEntity, c.field)
	}
	for _, wait := range []string{"-1", "abc", "1.5", "99999999999999999999"} {
		biSend(t, "GET", u+"/api/workers/poll?wait="+wait, nil, api.HeaderAPIKey, e.workKey, api.HeaderWorkerToken, w.Token).
			wantFieldError(t, http.StatusUnprocessableEntity, "wait")
	}
	biUnchanged(t, e, before)
}
