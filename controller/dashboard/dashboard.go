// Package dashboard is the controller's web UI: server-rendered pages for
// builds, the queue and workers, with a session login by API key, CSRF
// tokens on every action and live updates over server-sent events. It needs
// no JavaScript toolchain; a small script only refreshes pages in place.
package dashboard

import (
	"embed"
	"errors"
	"html/template"
	"io/fs"
	"net/http"
	"strings"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/freeagent-build/freeagent/controller/notify"
	"github.com/freeagent-build/freeagent/controller/store"
	"github.com/freeagent-build/freeagent/controller/webhooks"
)

//go:embed templates/*.html
var templateFiles embed.FS

//go:embed static
var staticFiles embed.FS

// Options give the dashboard what it needs. The file and stream handling
// of builds stays in the API server: the composition root (serve) passes in
// its methods (httpapi.Server's FollowLogs, ServeArtifact, RetryBuild,
// ServeQR, BuildEnded, AuthFailed and Done).
type Options struct {
	Store *store.Store
	Hub   *notify.Hub
	Log   logrus.FieldLogger
	// FollowLogs streams build id's log as server-sent events from byte
	// offset after, ending when the build ends.
	FollowLogs func(w http.ResponseWriter, r *http.Request, buildID string, after int64)
	// ServeArtifact streams an artifact of a build.
	ServeArtifact func(w http.ResponseWriter, r *http.Request, buildID, name string)
	// Retry queues a copy of an ended build, submitted by key keyID.
	Retry func(w http.ResponseWriter, r *http.Request, buildID, keyID string) (store.Submitted, error)
	// BuildEnded is called after an action ended a build.
	BuildEnded func()
	// AuthFailed charges a wrong key at the sign-in form to the client
	// address's budget of failed authentications, as the API does, and
	// says how long the address must wait once it has spent it (whole
	// seconds; 0 while it has not).
	AuthFailed func(r *http.Request) time.Duration
	// ServeQR answers with the QR code of a build's install link; nil when
	// the controller signs no install links.
	ServeQR func(w http.ResponseWriter, r *http.Request, buildID string)
	// Webhooks lists endpoints and their delivery logs; nil when webhooks
	// are not enabled.
	Webhooks *webhooks.Dispatcher
	// Done ends live streams: a graceful shutdown must not wait for them.
	Done <-chan struct{}
	// SessionTTL is how long a login lasts; default 12 h.
	SessionTTL time.Duration
}

// Dashboard serves the web UI.
type Dashboard struct {
	Options
	pages    map[string]*template.Template
	mux      *http.ServeMux
	verified verification
}

// New builds the dashboard handler. It serves every path it is given; the
// caller mounts it outside /api/ (serve: httpapi.Server.Mount, behind the
// API's logging, recovery, rate limits and body guard).
func New(o Options) *Dashboard {
	if o.SessionTTL == 0 {
		o.SessionTTL = 12 * time.Hour
	}
	if o.BuildEnded == nil {
		o.BuildEnded = func() {}
	}
	if o.AuthFailed == nil {
		o.AuthFailed = func(*http.Request) time.Duration { return 0 }
	}
	d := &Dashboard{Options: o, pages: map[string]*template.Template{}}
	for _, name := range []string{"login", "overview", "builds", "build", "queue", "workers", "events", "controllers", "webhooks", "deliveries", "error"} {
		d.pages[name] = template.Must(template.New("layout.html").Funcs(funcs).
			ParseFS(templateFiles, "templates/layout.html", "templates/buildrows.html", "templates/hookactions.html", "templates/"+name+".html"))
	}
	static, err := fs.Sub(staticFiles, "static")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	m := http.NewServeMux()
	m.Handle("GET /static/", http.StripPrefix("/static/", staticHandler(static)))
	m.HandleFunc("GET /login", d.loginPage)
	m.HandleFunc("POST /login", d.login)
	m.HandleFunc("POST /logout", d.action(roleDeveloper, d.logout))

	m.HandleFunc("GET /{$}", d.page(roleDeveloper, d.overview))
	m.HandleFunc("GET /apps/{slug}", d.page(roleDeveloper, d.app))
	m.HandleFunc("GET /builds", d.page(roleDeveloper, d.builds))
	m.HandleFunc("GET /builds/{id}", d.page(roleDeveloper, d.build))
	m.HandleFunc("POST /builds/{id}/cancel", d.action(roleDeveloper, d.cancel))
	m.HandleFunc("POST /builds/{id}/retry", d.action(roleDeveloper, d.retry))
	m.HandleFunc("GET /ui/builds/{id}/logs", d.stream(roleDeveloper, d.followLogs))
	m.HandleFunc("GET /ui/builds/{id}/artifacts/{name}", d.page(roleDeveloper, d.artifact))
	m.HandleFunc("GET /ui/builds/{id}/qr.png", d.page(roleDeveloper, d.qrCode))
	m.HandleFunc("GET /queue", d.page(roleDeveloper, d.queue))

	m.HandleFunc("GET /workers", d.page(roleAdmin, d.workers))
	m.HandleFunc("POST /workers/{id}/pause", d.action(roleAdmin, d.pauseWorker))
	m.HandleFunc("POST /workers/{id}/resume", d.action(roleAdmin, d.resumeWorker))
	m.HandleFunc("GET /events", d.page(roleAdmin, d.events))
	m.HandleFunc("GET /controllers", d.page(roleAdmin, d.controllers))
	m.HandleFunc("GET /webhooks", d.page(roleAdmin, d.withWebhooks(d.webhookList)))
	m.HandleFunc("POST /webhooks", d.action(roleAdmin, d.withWebhooks(d.createWebhook)))
	m.HandleFunc("GET /webhooks/{id}", d.page(roleAdmin, d.withWebhooks(d.webhookDeliveries)))
	m.HandleFunc("POST /webhooks/{id}/ping", d.action(roleAdmin, d.withWebhooks(d.pingWebhook)))
	m.HandleFunc("POST /webhooks/{id}/delete", d.action(roleAdmin, d.withWebhooks(d.deleteWebhook)))
	m.HandleFunc("POST /webhooks/{id}/deliveries/{delivery}/redeliver", d.action(roleAdmin, d.withWebhooks(d.redeliver)))

	m.HandleFunc("GET /ui/stream", d.stream(roleDeveloper, d.changes))
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		d.renderError(w, r, nil, http.StatusNotFound, "There is no page at "+r.URL.Path+".")
	})
	d.mux = m
	return d
}

// ServeHTTP implements http.Handler, setting headers every page needs.
func (d *Dashboard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	d.mux.ServeHTTP(w, r)
}

func staticHandler(root fs.FS) http.Handler {
	files := http.FileServerFS(root)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=300")
		files.ServeHTTP(w, r)
	})
}

// view is what every page template receives.
type view struct {
	Title   string
	Nav     string // the active section
	Session *session
	Stream  string // server-sent events URL that signals changes; "" for a static page
	Status  int
	Data    any
	// Webhooks is set when the controller delivers webhooks (the admin
	// navigation shows their page).
	Webhooks bool
}

// render writes page name with status.
func (d *Dashboard) render(w http.ResponseWriter, r *http.Request, name string, status int, v view) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	v.Status, v.Webhooks = status, d.Webhooks != nil
	if err := d.pages[name].Execute(w, v); err != nil && r.Context().Err() == nil {
		d.Log.WithError(err).WithField("page", name).Error("render dashboard page")
	}
}

func (d *Dashboard) renderError(w http.ResponseWriter, r *http.Request, s *session, status int, msg string) {
	d.render(w, r, "error", status, view{Title: http.StatusText(status), Session: s, Data: msg})
}

// fail answers an error from the store with a page naming the problem.
func (d *Dashboard) fail(w http.ResponseWriter, r *http.Request, s *session, err error) {
	status := http.StatusInternalServerError
	msg := "Something went wrong; the controller log has the details."
	switch {
	case errors.Is(err, store.ErrNotFound):
		status, msg = http.StatusNotFound, trimSentinel(err, store.ErrNotFound)
	case errors.Is(err, store.ErrInvalid):
		status, msg = http.StatusUnprocessableEntity, trimSentinel(err, store.ErrInvalid)
	case errors.Is(err, store.ErrConflict):
		status, msg = http.StatusConflict, trimSentinel(err, store.ErrConflict)
	case errors.Is(err, store.ErrForbidden):
		status, msg = http.StatusForbidden, err.Error()
	case r.Context().Err() != nil:
		return // the browser went away
	default:
		d.Log.WithError(err).WithField("path", r.URL.Path).Error("dashboard request failed")
	}
	d.renderError(w, r, s, status, msg)
}

func trimSentinel(err, sentinel error) string {
	msg := strings.TrimPrefix(err.Error(), sentinel.Error()+": ")
	if msg != "" {
		msg = strings.ToUpper(msg[:1]) + msg[1:]
	}
	return msg
}

func isInvalid(err error) bool { return errors.Is(err, store.ErrInvalid) }
