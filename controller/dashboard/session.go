package dashboard

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/store"
)

const (
	sessionCookie = "freeagent_session"
	// loginCookie carries the token the login form must echo, so another
	// site cannot sign a browser in under its own key (login CSRF).
	loginCookie = "freeagent_login"
	maxFormBody = 64 << 10
)

type role int

const (
	roleDeveloper role = iota // builds only
	roleAdmin                 // everything
)

// session is a signed-in browser.
type session struct {
	Key  store.APIKey
	id   string
	CSRF string // the synchronizer token every form carries
	// Scope is the projects whose builds the key sees (store.KeyScope);
	// scopeErr refuses an unbound developer key on a farm of bound ones.
	Scope    store.Scope
	scopeErr error
}

// Admin reports whether the session may see and act on everything.
func (s *session) Admin() bool { return s.Key.Role == api.RoleAdmin }

func (s *session) allows(r role) bool { return r == roleDeveloper || s.Admin() }

// csrfToken derives a session's CSRF token from its id: it is never stored,
// cannot be turned back into the id, and dies with the session.
func csrfToken(sessionID string) string {
	sum := sha256.Sum256([]byte("freeagent dashboard csrf\x00" + sessionID))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

func randomToken() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("crypto/rand failed: " + err.Error()) // the OS RNG never fails on supported platforms
	}
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// secure reports whether the browser reached us over TLS, directly or
// through a proxy that says so.
func secure(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

func (d *Dashboard) setCookie(w http.ResponseWriter, r *http.Request, name, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: value, Path: "/", MaxAge: maxAge, HttpOnly: true,
		Secure: secure(r), SameSite: http.SameSiteLaxMode})
}

// session returns the browser's live session, or nil.
func (d *Dashboard) session(r *http.Request) (*session, error) {
	c, err := r.Cookie(sessionCookie)
	if err != nil || c.Value == "" {
		return nil, nil
	}
	k, err := d.Store.Session(r.Context(), c.Value)
	if errors.Is(err, store.ErrUnauthorized) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	sc, scopeErr := store.KeyScope(k)
	return &session{Key: k, id: c.Value, CSRF: csrfToken(c.Value), Scope: sc, scopeErr: scopeErr}, nil
}

// page guards a page: without a session the browser goes to the login page
// and comes back after.
func (d *Dashboard) page(need role, h func(http.ResponseWriter, *http.Request, *session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, err := d.session(r)
		if err != nil {
			d.fail(w, r, nil, err)
			return
		}
		if s == nil {
			http.Redirect(w, r, "/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		if !s.allows(need) {
			d.renderError(w, r, s, http.StatusForbidden, "This page needs an admin key; you are signed in with a "+s.Key.Role+" key.")
			return
		}
		if s.scopeErr != nil {
			d.renderError(w, r, s, http.StatusForbidden, trimSentinel(s.scopeErr, store.ErrForbidden))
			return
		}
		h(w, r, s)
	}
}

// stream guards an event stream: no redirects, a plain status instead.
func (d *Dashboard) stream(need role, h func(http.ResponseWriter, *http.Request, *session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, err := d.session(r)
		switch {
		case err != nil:
			d.fail(w, r, nil, err)
		case s == nil:
			http.Error(w, "not signed in", http.StatusUnauthorized)
		case !s.allows(need):
			http.Error(w, "this needs an admin key", http.StatusForbidden)
		case s.scopeErr != nil:
			http.Error(w, trimSentinel(s.scopeErr, store.ErrForbidden), http.StatusForbidden)
		default:
			h(w, r, s)
		}
	}
}

// action guards a state change: a session, the role, a same-origin request
// and the session's CSRF token in the form.
func (d *Dashboard) action(need role, h func(http.ResponseWriter, *http.Request, *session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, err := d.session(r)
		if err != nil {
			d.fail(w, r, nil, err)
			return
		}
		if s == nil {
			d.renderError(w, r, nil, http.StatusUnauthorized, "You are not signed in (or your session ended). Sign in and try again.")
			return
		}
		if !s.allows(need) {
			d.renderError(w, r, s, http.StatusForbidden, "This action needs an admin key; you are signed in with a "+s.Key.Role+" key.")
			return
		}
		if s.scopeErr != nil {
			d.renderError(w, r, s, http.StatusForbidden, trimSentinel(s.scopeErr, store.ErrForbidden))
			return
		}
		if !sameOrigin(r) {
			d.renderError(w, r, s, http.StatusForbidden, "This request came from another site and was refused.")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxFormBody)
		if err := r.ParseForm(); err != nil {
			d.renderError(w, r, s, http.StatusBadRequest, "The form could not be read: "+err.Error())
			return
		}
		if subtle.ConstantTimeCompare([]byte(r.PostForm.Get("csrf")), []byte(s.CSRF)) != 1 {
			d.renderError(w, r, s, http.StatusForbidden, "The form's security token is missing or stale (the page may be from an earlier session). Reload the page and try again.")
			return
		}
		h(w, r, s)
	}
}

// sameOrigin refuses a request whose Origin names another host than the
// one the browser reached (directly, or through a proxy that rewrites Host
// and says so in X-Forwarded-Host). Browsers send Origin on every POST; its
// absence (an old client) leaves the CSRF token as the guard.
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	if err != nil {
		return false
	}
	fwd := r.Header.Get("X-Forwarded-Host")
	return u.Host == r.Host || fwd != "" && u.Host == fwd
}

type loginView struct {
	Next, Token, Error string
}

func (d *Dashboard) loginPage(w http.ResponseWriter, r *http.Request) {
	s, err := d.session(r)
	if err != nil {
		d.fail(w, r, nil, err)
		return
	}
	next := localPath(r.URL.Query().Get("next"))
	if s != nil {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	d.showLogin(w, r, http.StatusOK, next, "")
}

func (d *Dashboard) showLogin(w http.ResponseWriter, r *http.Request, status int, next, msg string) {
	token := randomToken()
	d.setCookie(w, r, loginCookie, token, 3600)
	d.render(w, r, "login", status, view{Title: "Sign in", Data: loginView{Next: next, Token: token, Error: msg}})
}

func (d *Dashboard) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBody)
	if err := r.ParseForm(); err != nil {
		d.showLogin(w, r, http.StatusBadRequest, "/", "The form could not be read: "+err.Error())
		return
	}
	next := localPath(r.PostForm.Get("next"))
	c, err := r.Cookie(loginCookie)
	if err != nil || !sameOrigin(r) || subtle.ConstantTimeCompare([]byte(c.Value), []byte(r.PostForm.Get("csrf"))) != 1 {
		d.showLogin(w, r, http.StatusForbidden, next, "The sign-in form expired. Enter your key again.")
		return
	}
	key := strings.TrimSpace(r.PostForm.Get("api_key"))
	if key == "" {
		d.showLogin(w, r, http.StatusUnprocessableEntity, next, "Enter an API key.")
		return
	}
	k, err := d.Store.AuthenticateKey(r.Context(), key)
	if errors.Is(err, store.ErrUnauthorized) {
		// As at the API: a valid key signs in whatever others failed from
		// this address; only more wrong keys meet the spent budget.
		if wait := d.AuthFailed(r); wait > 0 {
			secs := strconv.Itoa(int(wait.Seconds()))
			w.Header().Set("Retry-After", secs)
			d.showLogin(w, r, http.StatusTooManyRequests, next, "Too many wrong keys from this address: try again in "+secs+" s.")
			return
		}
		d.showLogin(w, r, http.StatusUnauthorized, next, "That API key is unknown or revoked.")
		return
	}
	if err != nil {
		d.fail(w, r, nil, err)
		return
	}
	if k.Role == api.RoleWorker {
		d.showLogin(w, r, http.StatusForbidden, next, "A worker key cannot sign in to the dashboard; use an admin or developer key.")
		return
	}
	id, err := d.Store.CreateSession(r.Context(), k.ID, d.SessionTTL)
	if err != nil {
		d.fail(w, r, nil, err)
		return
	}
	d.setCookie(w, r, loginCookie, "", -1)
	d.setCookie(w, r, sessionCookie, id, int(d.SessionTTL.Seconds()))
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (d *Dashboard) logout(w http.ResponseWriter, r *http.Request, s *session) {
	if err := d.Store.DeleteSession(r.Context(), s.id); err != nil {
		d.fail(w, r, s, err)
		return
	}
	d.setCookie(w, r, sessionCookie, "", -1)
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

// localPath keeps a redirect target on this site: a path, never a
// scheme or host (browsers drop tabs and newlines and read a backslash as
// a slash, so "/\t/evil.example" would leave the site).
func localPath(p string) string {
	u, err := url.Parse(p)
	if err != nil || u.Scheme != "" || u.Host != "" || !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") ||
		strings.ContainsFunc(p, func(r rune) bool { return r < 0x20 || r == 0x7f || r == '\\' }) {
		return "/"
	}
	return p
}
