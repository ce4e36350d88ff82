// Package prefs is the Preferences window: a small page served on
// 127.0.0.1 (random port) where the Mac owner sets the controller, the API
// key and the build resources without editing files. The menu opens it with
// a one-time token in the URL; the token becomes an HttpOnly session
// cookie, and every form carries a CSRF token bound to that session.
package prefs

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	_ "embed"
	"encoding/base64"
	"errors"
	"fmt"
	"html/template"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/freeagent-build/freeagent/agent"
	"github.com/freeagent-build/freeagent/agent/hostcheck"
	"github.com/freeagent-build/freeagent/agent/hostsignals"
	"github.com/freeagent-build/freeagent/agent/secrets"
	"github.com/freeagent-build/freeagent/internal/config"
	"github.com/freeagent-build/freeagent/tray/conffile"
)

// Settings keys in agent.conf (the flag names of `freeagent run`).
const (
	keyController   = "controller-url"
	keyCPU          = "cpu"
	keyMemoryMB     = "memory-mb"
	keyMaxBuilds    = "max-builds"
	keyBuildTimeout = "build-timeout"
	keyTemplate     = "template"
	keySolo         = "solo"
	// The owner's rules for taking builds (docs/polite-guest.md).
	keyBuildOnBattery = "build-on-battery"
	keyMinBattery     = "min-battery-percent"
	keyIdleMinutes    = "idle-minutes"
	keyPauseThermal   = "pause-thermal"
	keySchedule       = "schedule"
	keyMinFreeGB      = "min-free-gb"
	keyCacheGB        = "cache-gb"
)

const cookieName = "freeagent_prefs"

// Config is what the page edits and how it reports.
type Config struct {
	DataDir string // agent.conf lives here
	// Defaults are shown for settings the file does not have.
	Defaults Values
	Secrets  secrets.Store // the API key (the Keychain on a Mac)
	// Test checks a controller URL and key ("Test Connection").
	Test func(ctx context.Context, controllerURL, apiKey string) hostcheck.Result
	// Saved is called after the settings were written (the app reloads).
	Saved func()
	// Solo mode: where expo-build finds the controller and its key.
	SoloURL     string
	SoloKeyFile string
	Log         logrus.FieldLogger
}

// Server serves the page until Close.
type Server struct {
	cfg  Config
	ln   net.Listener
	http *http.Server
	base string // http://127.0.0.1:PORT

	mu       sync.Mutex
	tokens   map[string]time.Time // one-time tokens → expiry
	sessions map[string]string    // session id → CSRF token
}

// tokenTTL bounds how long an opened-but-unused link works.
const tokenTTL = 5 * time.Minute

// Start listens on a random loopback port.
func Start(cfg Config) (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("preferences: listen on 127.0.0.1: %w", err)
	}
	s := &Server{cfg: cfg, ln: ln, base: "http://" + ln.Addr().String(),
		tokens: map[string]time.Time{}, sessions: map[string]string{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.page)
	mux.HandleFunc("POST /save", s.save)
	mux.HandleFunc("POST /test", s.test)
	s.http = &http.Server{Handler: s.guard(mux), ReadHeaderTimeout: 10 * time.Second}
	go s.http.Serve(ln)
	return s, nil
}

// Close stops the server.
func (s *Server) Close(ctx context.Context) error { return s.http.Shutdown(ctx) }

// NewURL returns the page's address with a fresh one-time token.
func (s *Server) NewURL() (string, error) {
	tok, err := randomToken()
	if err != nil {
		return "", err
	}
	s.mu.Lock()
	now := time.Now()
	for t, exp := range s.tokens {
		if now.After(exp) {
			delete(s.tokens, t)
		}
	}
	s.tokens[tok] = now.Add(tokenTTL)
	s.mu.Unlock()
	return s.base + "/?token=" + tok, nil
}

func randomToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("random token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// guard refuses requests for another host name (DNS rebinding) and sets
// headers that keep the page out of frames and caches.
func (s *Server) guard(next http.Handler) http.Handler {
	host := strings.TrimPrefix(s.base, "http://")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Host != host {
			http.Error(w, "wrong host: open Preferences… from the Free Agent menu", http.StatusForbidden)
			return
		}
		w.Header().Set("X-Frame-Options", "DENY")
		w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'")
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Referrer-Policy", "no-referrer")
		next.ServeHTTP(w, r)
	})
}

// session returns the request's CSRF token, or "" when it has no session.
func (s *Server) session(r *http.Request) string {
	c, err := r.Cookie(cookieName)
	if err != nil {
		return ""
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessions[c.Value]
}

var errForbidden = errors.New("this link has expired or was already used: choose Preferences… in the Free Agent menu again")

// page shows the form. A one-time token is exchanged for a session cookie,
// then the browser is sent to the bare URL so the token leaves its history.
func (s *Server) page(w http.ResponseWriter, r *http.Request) {
	if tok := r.URL.Query().Get("token"); tok != "" {
		s.mu.Lock()
		exp, ok := s.tokens[tok]
		delete(s.tokens, tok)
		s.mu.Unlock()
		if !ok || time.Now().After(exp) {
			http.Error(w, errForbidden.Error(), http.StatusForbidden)
			return
		}
		id, err1 := randomToken()
		csrf, err2 := randomToken()
		if err := errors.Join(err1, err2); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		s.mu.Lock()
		s.sessions[id] = csrf
		s.mu.Unlock()
		http.SetCookie(w, &http.Cookie{Name: cookieName, Value: id, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	csrf := s.session(r)
	if csrf == "" {
		http.Error(w, errForbidden.Error(), http.StatusForbidden)
		return
	}
	v, err := s.load()
	if err != nil {
		s.render(w, http.StatusInternalServerError, view{CSRF: csrf, Error: err.Error()})
		return
	}
	s.render(w, http.StatusOK, view{CSRF: csrf, Values: v, KeyStored: s.keyStored(), Saved: r.URL.Query().Get("saved") == "1"})
}

// form checks the session and the CSRF token of a POST.
func (s *Server) form(w http.ResponseWriter, r *http.Request) (string, bool) {
	csrf := s.session(r)
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form: "+err.Error(), http.StatusBadRequest)
		return "", false
	}
	got := r.PostForm.Get("csrf")
	if csrf == "" || subtle.ConstantTimeCompare([]byte(got), []byte(csrf)) != 1 {
		http.Error(w, "the form is stale or not from this page: reload Preferences… from the menu", http.StatusForbidden)
		return "", false
	}
	return csrf, true
}

func (s *Server) save(w http.ResponseWriter, r *http.Request) {
	csrf, ok := s.form(w, r)
	if !ok {
		return
	}
	v, problems := parse(r.PostForm)
	if len(problems) > 0 {
		s.render(w, http.StatusUnprocessableEntity, view{CSRF: csrf, Values: v, KeyStored: s.keyStored(), Problems: problems})
		return
	}
	if err := conffile.Update(filepath.Join(s.cfg.DataDir, conffile.Name), v.conf()); err != nil {
		s.render(w, http.StatusInternalServerError, view{CSRF: csrf, Values: v, KeyStored: s.keyStored(), Error: err.Error()})
		return
	}
	if key := strings.TrimSpace(r.PostForm.Get("api_key")); key != "" {
		if err := s.cfg.Secrets.Set(secrets.KeyAPIKey, key); err != nil {
			s.render(w, http.StatusInternalServerError, view{CSRF: csrf, Values: v, KeyStored: s.keyStored(), Error: "saving the API key: " + err.Error()})
			return
		}
	}
	s.cfg.Log.WithField("controller", v.ControllerURL).Info("preferences saved")
	if s.cfg.Saved != nil {
		s.cfg.Saved()
	}
	http.Redirect(w, r, "/?saved=1", http.StatusSeeOther)
}

// test checks the controller URL and key from the form (the stored key when
// the field is empty) without saving anything.
func (s *Server) test(w http.ResponseWriter, r *http.Request) {
	csrf, ok := s.form(w, r)
	if !ok {
		return
	}
	v, problems := parse(r.PostForm)
	key := strings.TrimSpace(r.PostForm.Get("api_key"))
	if key == "" {
		key, _ = s.cfg.Secrets.Get(secrets.KeyAPIKey)
	}
	vw := view{CSRF: csrf, Values: v, KeyStored: s.keyStored(), Problems: problems}
	if _, bad := problems["controller_url"]; !bad && v.ControllerURL != "" {
		res := s.cfg.Test(r.Context(), v.ControllerURL, key)
		vw.Test = &res
	}
	s.render(w, http.StatusOK, vw)
}

func (s *Server) keyStored() bool {
	k, err := s.cfg.Secrets.Get(secrets.KeyAPIKey)
	return err == nil && k != ""
}

// Values are the page's settings.
type Values struct {
	ControllerURL string
	CPU           int // cores per VM; 0: the template's
	MemoryGB      int // per VM; 0: the template's
	MaxBuilds     int // 1 or 2
	BuildTimeout  time.Duration
	Template      string
	Solo          bool // run the controller on this Mac too
	CacheGB       int  // the dependency caches' total size; 0: none; -1: unchanged
	Rules         Rules
}

// Rules are the owner's conditions for taking builds, as agent.conf
// writes them (hostsignals parses them for the worker).
type Rules struct {
	BuildOnBattery    bool
	MinBatteryPercent int
	IdleMinutes       string // minutes, or "auto"
	PauseThermal      string // serious, critical or off
	Schedule          string
	MinFreeGB         int
}

// DefaultRules are the rules of a fresh install.
func DefaultRules() Rules {
	return Rules{MinBatteryPercent: hostsignals.DefaultMinBatteryPercent, IdleMinutes: "auto",
		PauseThermal: string(hostsignals.ThermalSerious), MinFreeGB: int(hostcheck.DefaultMinFree >> 30)}
}

func (s *Server) load() (Values, error) {
	m, err := conffile.Read(filepath.Join(s.cfg.DataDir, conffile.Name))
	if err != nil {
		return Values{}, err
	}
	v := s.cfg.Defaults
	v.ControllerURL = m[keyController]
	if t := m[keyTemplate]; t != "" {
		v.Template = t
	}
	v.CPU, _ = strconv.Atoi(m[keyCPU])
	if mb, err := strconv.Atoi(m[keyMemoryMB]); err == nil {
		v.MemoryGB = mb / 1024
	}
	if n, err := strconv.Atoi(m[keyMaxBuilds]); err == nil && n > 0 {
		v.MaxBuilds = n
	}
	if d, err := config.ParseDuration(m[keyBuildTimeout]); err == nil && d > 0 {
		v.BuildTimeout = d
	}
	v.Solo, _ = strconv.ParseBool(m[keySolo])
	if n, err := strconv.Atoi(m[keyCacheGB]); err == nil && n >= 0 {
		v.CacheGB = n
	}
	r := &v.Rules
	if b, err := strconv.ParseBool(m[keyBuildOnBattery]); err == nil {
		r.BuildOnBattery = b
	}
	if n, err := strconv.Atoi(m[keyMinBattery]); err == nil {
		r.MinBatteryPercent = n
	}
	if x := m[keyIdleMinutes]; x != "" {
		r.IdleMinutes = x
	}
	if x := m[keyPauseThermal]; x != "" {
		r.PauseThermal = x
	}
	r.Schedule = m[keySchedule]
	if n, err := strconv.Atoi(m[keyMinFreeGB]); err == nil {
		r.MinFreeGB = n
	}
	return v, nil
}

func (v Values) conf() map[string]string {
	m := map[string]string{
		keyController:   v.ControllerURL,
		keyCPU:          strconv.Itoa(v.CPU),
		keyMemoryMB:     strconv.Itoa(v.MemoryGB * 1024),
		keyMaxBuilds:    strconv.Itoa(v.MaxBuilds),
		keyBuildTimeout: config.FormatDuration(v.BuildTimeout),
		keyTemplate:     v.Template,
		keySolo:         strconv.FormatBool(v.Solo),

		keyBuildOnBattery: strconv.FormatBool(v.Rules.BuildOnBattery),
		keyMinBattery:     strconv.Itoa(v.Rules.MinBatteryPercent),
		keyIdleMinutes:    v.Rules.IdleMinutes,
		keyPauseThermal:   v.Rules.PauseThermal,
		keySchedule:       v.Rules.Schedule,
		keyMinFreeGB:      strconv.Itoa(v.Rules.MinFreeGB),
	}
	if v.CacheGB >= 0 {
		m[keyCacheGB] = strconv.Itoa(v.CacheGB)
	}
	return m
}

// parse validates the form; problems are keyed by field name.
func parse(f url.Values) (Values, map[string]string) {
	v := Values{ControllerURL: strings.TrimSpace(f.Get("controller_url")), Template: strings.TrimSpace(f.Get("template")),
		Solo: f.Get("solo") == "on"}
	problems := map[string]string{}
	// In solo mode the controller is this Mac's; a URL is kept for later but optional.
	if u, err := url.Parse(v.ControllerURL); (!v.Solo || v.ControllerURL != "") && (err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "") {
		problems["controller_url"] = "enter the controller's address, e.g. https://builds.example.com"
	}
	num := func(field string, lo, hi int, msg string) int {
		n, err := strconv.Atoi(strings.TrimSpace(f.Get(field)))
		if err != nil || n < lo || n > hi {
			problems[field] = msg
		}
		return n
	}
	v.CPU = num("cpu", 0, 128, "a whole number of cores, 0 for the template's")
	v.MemoryGB = num("memory_gb", 0, 1024, "a whole number of GB, 0 for the template's")
	v.MaxBuilds = num("max_builds", 1, agent.MaxMacOSVMs, fmt.Sprintf("1 to %d: macOS runs at most %d VMs at once", agent.MaxMacOSVMs, agent.MaxMacOSVMs))
	v.CacheGB = -1 // a form without the field leaves the setting as it is
	if f.Has("cache_gb") {
		v.CacheGB = num("cache_gb", 0, 10_000, "a whole number of GB, 0 to keep no dependency caches")
	}
	mins := num("build_timeout_minutes", 1, 24*60, "minutes, from 1 to 1440 (24 hours)")
	v.BuildTimeout = time.Duration(mins) * time.Minute
	if v.Template == "" || strings.ContainsAny(v.Template, " \t\r\n") {
		problems["template"] = "the name of a Tart VM or image, e.g. ghcr.io/cirruslabs/macos-sequoia-xcode:latest"
	}
	v.Rules = parseRules(f, problems, num)
	return v, problems
}

// parseRules reads the owner's rules from the form with the parsers the
// worker uses. A field left out (an older page) keeps its default.
func parseRules(f url.Values, problems map[string]string, num func(string, int, int, string) int) Rules {
	r := DefaultRules()
	r.BuildOnBattery = f.Get("build_on_battery") == "on"
	if f.Has("min_battery_percent") {
		r.MinBatteryPercent = num("min_battery_percent", 0, 100, "a charge from 0 to 100 %")
	}
	if f.Has("min_free_gb") {
		r.MinFreeGB = num("min_free_gb", 0, 1<<20, "a whole number of GB, 0 for no floor")
	}
	if f.Has("idle_minutes") {
		r.IdleMinutes = strings.TrimSpace(f.Get("idle_minutes"))
		if _, err := hostsignals.ParseIdleMinutes(r.IdleMinutes); err != nil {
			problems["idle_minutes"] = "minutes from 0 (any time) to 1440, or auto (10 on a laptop, 0 on a desktop)"
		}
	}
	if f.Has("pause_thermal") {
		r.PauseThermal = strings.TrimSpace(f.Get("pause_thermal"))
		if _, err := hostsignals.ParseThermalLimit(r.PauseThermal); err != nil {
			problems["pause_thermal"] = "serious, critical or off"
		}
	}
	r.Schedule = strings.TrimSpace(f.Get("schedule"))
	if _, err := hostsignals.ParseSchedule(r.Schedule); err != nil {
		problems["schedule"] = err.Error()
	}
	return r
}

type view struct {
	SoloURL     string
	SoloKeyFile string
	CSRF        string
	Values      Values
	KeyStored   bool
	Saved       bool
	Problems    map[string]string
	Test        *hostcheck.Result
	Error       string
}

func (v view) TimeoutMinutes() int { return int(v.Values.BuildTimeout / time.Minute) }

// ThermalChoices are the pause-thermal settings, mildest first.
func (v view) ThermalChoices() []string { return []string{"serious", "critical", "off"} }

//go:embed page.html
var pageHTML string

var pageTmpl = template.Must(template.New("prefs").Parse(pageHTML))

func (s *Server) render(w http.ResponseWriter, status int, v view) {
	v.SoloURL, v.SoloKeyFile = s.cfg.SoloURL, s.cfg.SoloKeyFile
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if err := pageTmpl.Execute(w, v); err != nil {
		s.cfg.Log.WithError(err).Error("preferences page")
	}
}
