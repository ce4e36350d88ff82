package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/freeagent-build/freeagent/api"
)

// RetryPolicy bounds the retries of network errors.
type RetryPolicy struct {
	Attempts int           // tries in all, ≥ 1
	Initial  time.Duration // first pause; doubles each time, with jitter
	Max      time.Duration // longest pause
}

// DefaultRetry tries 5 times over about 8 s (pauses of about 0.5, 1, 2 and
// 4 s) before calling the controller unreachable.
func DefaultRetry() RetryPolicy {
	return RetryPolicy{Attempts: 5, Initial: 500 * time.Millisecond, Max: 8 * time.Second}
}

// policy is p as api.Retry takes it: pauses doubling from Initial to Max,
// each drawn from its upper half.
func (p RetryPolicy) policy() api.RetryPolicy {
	return api.RetryPolicy{Backoff: p.backoff(), Attempts: max(p.Attempts, 1)}
}

func (p RetryPolicy) backoff() api.Backoff {
	return api.Backoff{Initial: p.Initial, Max: p.Max, Multiplier: 2, Jitter: 0.5}
}

// resume runs fn, one try of a resumable transfer that advances *pos, on
// the retry policy while retryable accepts its error: a failure after *pos
// moved starts the count of failures and the waits over, so a long
// transfer over a flaky link is bounded by consecutive failures only. warn
// hears of each retry and its wait. It returns fn's last error; the caller
// tells a cancellation, a final answer and spent attempts apart.
func (a *App) resume(ctx context.Context, pos *int64, retryable func(error) bool, fn func(context.Context) error, warn func(err error, wait time.Duration)) error {
	p := a.Retry.policy()
	p.Retryable = retryable
	last := *pos
	p.Progressed = func() bool {
		moved := *pos > last
		last = *pos
		return moved
	}
	p.OnRetry = func(err error, _ int, wait time.Duration) { warn(err, wait) }
	return api.Retry(ctx, p, fn)
}

// session is one command's view of the controller: where it is, the
// credentials, the config file.
type session struct {
	a   *App
	ui  *ui
	cfg *Config
	// cfgPath is the config file.
	cfgPath       string
	baseURL       string
	baseURLSource string
	apiKey        string
	apiKeySource  string
	http          *http.Client
	// worked is, per build, the client whose credentials the controller
	// accepted last.
	worked map[string]*api.Client
}

func (a *App) newSession(ui *ui, urlFlag string, insecure bool) (*session, error) {
	path, err := configPath(a.getenv)
	if err != nil {
		return nil, err
	}
	cfg, err := loadConfig(path)
	if err != nil {
		return nil, err
	}
	s := &session{a: a, ui: ui, cfg: cfg, cfgPath: path, http: a.HTTPClient}
	switch {
	case urlFlag != "":
		s.baseURL, s.baseURLSource = urlFlag, "--controller-url"
	case a.getenv("EXPO_CONTROLLER_URL") != "":
		s.baseURL, s.baseURLSource = a.getenv("EXPO_CONTROLLER_URL"), "EXPO_CONTROLLER_URL"
	case cfg.ControllerURL != "":
		s.baseURL, s.baseURLSource = cfg.ControllerURL, "config file"
	}
	if s.baseURL != "" {
		u, err := normalizeURL(s.baseURL)
		if err != nil {
			return nil, usageErr("controller URL from %s: %v", s.baseURLSource, err)
		}
		s.baseURL = u
		if err := a.checkTransport(ui, u, s.baseURLSource, insecure); err != nil {
			return nil, err
		}
	}
	switch {
	case a.getenv("EXPO_CONTROLLER_API_KEY") != "":
		s.apiKey, s.apiKeySource = strings.TrimSpace(a.getenv("EXPO_CONTROLLER_API_KEY")), "EXPO_CONTROLLER_API_KEY"
	case cfg.APIKey != "":
		s.apiKey, s.apiKeySource = cfg.APIKey, "config file"
	}
	if s.http == nil {
		s.http = defaultHTTPClient()
	}
	ui.secrets = append(ui.secrets, s.apiKey)
	for _, r := range cfg.Builds {
		ui.secrets = append(ui.secrets, r.Token)
	}
	return s, nil
}

// checkTransport refuses a plain-http controller on another machine unless
// --insecure (or EXPO_BUILD_INSECURE=1) allows it, and then warns.
func (a *App) checkTransport(ui *ui, u, source string, insecure bool) error {
	err := api.CheckTransport(u)
	if err == nil {
		return nil
	}
	setting := "--insecure"
	if !insecure {
		if v := a.getenv("EXPO_BUILD_INSECURE"); v == "1" || strings.EqualFold(v, "true") {
			insecure, setting = true, "EXPO_BUILD_INSECURE=1"
		}
	}
	if !insecure {
		return &cliError{code: ExitUsage, msg: fmt.Sprintf("controller URL from %s: %v", source, err),
			hint: "use the controller's https:// URL (freeagent-controller serve --tls-cert/--tls-key, or a TLS proxy); to go on unencrypted anyway pass --insecure"}
	}
	if !ui.insecureWarned {
		ui.insecureWarned = true
		ui.warn("%s", api.InsecureWarning(u, setting))
	}
	return nil
}

// normalizeURL checks a controller URL: http(s), a host, no query.
func normalizeURL(raw string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return "", fmt.Errorf("%q is not a URL: %w", raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return "", fmt.Errorf("%q is not an http(s) URL like https://builds.example.com", u.Redacted())
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("%q: a controller URL has no query or fragment", u.Redacted())
	}
	return strings.TrimRight(u.String(), "/"), nil
}

func defaultHTTPClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 2 * time.Minute,
		IdleConnTimeout:       90 * time.Second,
		MaxIdleConnsPerHost:   4,
	}}
}

func (s *session) requireURL() error {
	if s.baseURL == "" {
		return &cliError{code: ExitUsage, msg: "no controller URL is configured",
			hint: "run `expo-build config --controller-url https://your-controller`, set EXPO_CONTROLLER_URL, or pass --controller-url"}
	}
	return nil
}

func (s *session) client(apiKey, buildToken string) *api.Client {
	return &api.Client{BaseURL: s.baseURL, APIKey: apiKey, BuildToken: buildToken, HTTP: s.http, UserAgent: "expo-build/" + s.a.version()}
}

// keyClient is for calls that need the API key (submit, list, workers).
func (s *session) keyClient() (*api.Client, error) {
	if err := s.requireURL(); err != nil {
		return nil, err
	}
	if s.apiKey == "" {
		return nil, &cliError{code: ExitAuth, msg: "no API key is configured",
			hint: "run `expo-build config --api-key-stdin` and paste a developer key (from `freeagent-controller keys create --role developer`), or set EXPO_CONTROLLER_API_KEY"}
	}
	return s.client(s.apiKey, ""), nil
}

// buildClients are the credentials to try for one build, in order: its own
// build token (least privilege, and it works even with a key that may not
// read the build), then the API key.
func (s *session) buildClients(id string) ([]*api.Client, error) {
	if err := s.requireURL(); err != nil {
		return nil, err
	}
	var out []*api.Client
	if tok := s.cfg.token(id); tok != "" {
		out = append(out, s.client("", tok))
	}
	if s.apiKey != "" {
		out = append(out, s.client(s.apiKey, ""))
	}
	if len(out) == 0 {
		return nil, &cliError{code: ExitAuth, msg: fmt.Sprintf("no credentials for build %s: no API key is configured and this machine holds no token for that build", id),
			hint: "run `expo-build config --api-key-stdin` or set EXPO_CONTROLLER_API_KEY"}
	}
	return out, nil
}

// clientFor is the client to use for build id: the one the controller
// accepted before, else the first candidate.
func (s *session) clientFor(id string) (*api.Client, error) {
	if c := s.worked[id]; c != nil {
		return c, nil
	}
	clients, err := s.buildClients(id)
	if err != nil {
		return nil, err
	}
	return clients[0], nil
}

// withBuild calls f with each credential for build id until one is not
// rejected (401/403), retrying network errors. safe says whether a request
// whose answer was lost may be sent again.
func (s *session) withBuild(ctx context.Context, id, what string, safe bool, f func(context.Context, *api.Client) error) error {
	clients, err := s.buildClients(id)
	if err != nil {
		return err
	}
	if c := s.worked[id]; c != nil {
		clients = []*api.Client{c}
	}
	for i, c := range clients {
		err = s.retry(ctx, what, safe, func(ctx context.Context) error { return f(ctx, c) })
		if err == nil {
			if s.worked == nil {
				s.worked = map[string]*api.Client{}
			}
			s.worked[id] = c
		}
		st := api.StatusOf(err)
		if (st == http.StatusUnauthorized || st == http.StatusForbidden) && i < len(clients)-1 {
			continue
		}
		break
	}
	return wrapOp(what, err)
}

// wrapOp names the operation that failed.
func wrapOp(what string, err error) error {
	if err == nil {
		return nil
	}
	var ce *cliError
	var be *buildEnded
	if errors.As(err, &ce) || errors.As(err, &be) || errors.Is(err, context.Canceled) {
		return err
	}
	return fmt.Errorf("%s: %w", what, err)
}

// retry runs f, repeating it after transient errors (retryable) on the
// policy's schedule. With safe false only errors from before the request
// was sent (dial, DNS) are retried, since the controller may have acted on
// it.
func (s *session) retry(ctx context.Context, what string, safe bool, f func(context.Context) error) error {
	p := s.a.Retry.policy()
	p.Retryable = func(err error) bool { return retryable(err) && (safe || isDialError(err)) }
	p.OnRetry = func(err error, attempt int, wait time.Duration) {
		s.ui.warn("%s: %s; retrying in %s (%d/%d)", what, shortNetErr(err), wait.Round(100*time.Millisecond), attempt+1, p.Attempts)
	}
	err := api.Retry(ctx, p, f)
	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// saveToken stores a build's token.
func (s *session) saveToken(id, token, platform string, at time.Time) error {
	if token == "" {
		return nil
	}
	s.ui.secrets = append(s.ui.secrets, token)
	_, err := updateConfig(s.cfgPath, func(c *Config) error {
		if c.Builds == nil {
			c.Builds = map[string]BuildRecord{}
		}
		c.Builds[id] = BuildRecord{Token: token, ControllerURL: s.baseURL, Platform: platform, SubmittedAt: at}
		return nil
	})
	if err != nil {
		return fmt.Errorf("save the token of build %s: %w", id, err)
	}
	if s.cfg.Builds == nil {
		s.cfg.Builds = map[string]BuildRecord{}
	}
	s.cfg.Builds[id] = BuildRecord{Token: token, ControllerURL: s.baseURL, Platform: platform, SubmittedAt: at}
	return nil
}
