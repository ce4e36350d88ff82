// Package appstore submits an .ipa to App Store Connect with an App Store
// Connect API key, the way Apple supports it without a Mac: the App Store
// Connect API's build uploads (a buildUploads record for the version, a
// buildUploadFiles record whose uploadOperations say which byte ranges to
// PUT where, then the file marked uploaded), then the upload's and the
// build's processing followed until the build is VALID — ready for
// TestFlight — and optionally the build added to TestFlight groups.
//
// Every request is retried on the one retry policy (api.Retry) while App
// Store Connect answers 5xx, 429 or 408 or the network fails; every answer
// is read within a bound; the key and the tokens made from it are never
// written to the log nor put in an error.
package appstore

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/internal/config"
)

// DefaultBaseURL is App Store Connect's API.
const DefaultBaseURL = "https://api.appstoreconnect.apple.com"

// Defaults of the Client's and Options' settings (their zero values).
const (
	DefaultPollInterval      = 30 * time.Second
	DefaultProcessingTimeout = 90 * time.Minute // Apple's processing usually takes 5–30 minutes
	DefaultRequestTimeout    = time.Minute
	DefaultPartTimeout       = 15 * time.Minute
)

// defaultRetry is the schedule of repeated requests: a second at first,
// doubling to a minute, at most six tries in a row.
func defaultRetry() api.RetryPolicy {
	return api.RetryPolicy{Backoff: api.Backoff{Initial: time.Second, Max: time.Minute, Jitter: 0.5}, Attempts: 6}
}

// maxResponse bounds an API answer: a build upload with its files and
// their upload operations is a few KiB, a list of TestFlight groups less
// than a hundred.
const maxResponse = 1 << 20

// Client talks to App Store Connect. Its zero value talks to Apple with
// the defaults above.
type Client struct {
	BaseURL string       // "": DefaultBaseURL
	HTTP    *http.Client // nil: http.DefaultClient
	// PollInterval is the wait between two looks at the processing state.
	PollInterval time.Duration
	// RequestTimeout bounds one API request; PartTimeout one part's upload.
	RequestTimeout, PartTimeout time.Duration
	// Retry is how failed requests are repeated (zero: a second, doubling
	// to a minute, six tries). Its Retryable is always api.Transient.
	Retry api.RetryPolicy
	// Now is the clock the tokens are dated by (nil: time.Now).
	Now func() time.Time
}

func (c *Client) baseURL() string {
	if c.BaseURL == "" {
		return DefaultBaseURL
	}
	return strings.TrimRight(c.BaseURL, "/")
}

func (c *Client) httpClient() *http.Client {
	if c.HTTP == nil {
		return http.DefaultClient
	}
	return c.HTTP
}

func (c *Client) now() time.Time {
	if c.Now == nil {
		return time.Now()
	}
	return c.Now()
}

// session is one submission's conversation: the key's signer, the token
// in use, and where progress is reported.
type session struct {
	c      *Client
	key    Key
	signer *ecdsa.PrivateKey
	tok    string
	tokExp time.Time
	log    io.Writer
}

// bearer is a token with at least five minutes left, minted anew when the
// last one is older.
func (s *session) bearer() (string, error) {
	now := s.c.now()
	if s.tok != "" && now.Add(5*time.Minute).Before(s.tokExp) {
		return s.tok, nil
	}
	t, exp, err := token(s.signer, s.key, now)
	if err != nil {
		return "", err
	}
	s.tok, s.tokExp = t, exp
	return t, nil
}

func (s *session) logf(format string, args ...any) {
	fmt.Fprintf(s.log, "App Store Connect: "+format+"\n", args...)
}

// retry runs f on the client's policy, telling the log of each retry.
func (s *session) retry(ctx context.Context, op string, f func(context.Context) error) error {
	p := s.c.Retry
	if p.Backoff == (api.Backoff{}) {
		p = defaultRetry()
	}
	p.Retryable = api.Transient
	p.OnRetry = func(err error, attempt int, wait time.Duration) {
		s.logf("%s failed (try %d): %v; trying again in %s", op, attempt, err, wait.Round(time.Millisecond))
	}
	return api.Retry(ctx, p, f)
}

// call sends a JSON:API request to App Store Connect (retried while the
// failure is transient) and decodes the answer into out (nil: ignored).
func (s *session) call(ctx context.Context, op, method, path string, in, out any) error {
	var body []byte
	if in != nil {
		b, err := jsonBody(in)
		if err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		body = b
	}
	return s.retry(ctx, op, func(ctx context.Context) error {
		return s.callOnce(ctx, op, method, path, body, out)
	})
}

func (s *session) callOnce(ctx context.Context, op, method, path string, body []byte, out any) error {
	ctx, cancel := context.WithTimeout(ctx, config.OrDefault(s.c.RequestTimeout, DefaultRequestTimeout))
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.c.baseURL()+path, rd)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	tok, err := s.bearer()
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := s.c.httpClient().Do(req)
	if err != nil {
		return fmt.Errorf("%s: App Store Connect did not answer: %w", op, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse+1))
	if err != nil {
		return fmt.Errorf("%s: read App Store Connect's answer: %w", op, err)
	}
	if len(b) > maxResponse {
		return fmt.Errorf("%s: App Store Connect's answer is larger than %d KiB; not read", op, maxResponse>>10)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return newError(op, resp.StatusCode, resp.Header, b, s.c.now())
	}
	if out == nil || len(bytes.TrimSpace(b)) == 0 {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%s: App Store Connect's answer is not the JSON expected: %w", op, err)
	}
	return nil
}

func jsonBody(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode the request: %w", err)
	}
	return b, nil
}

// query builds "path?k=v&…" with the values escaped.
func query(path string, kv ...string) string {
	q := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		q.Set(kv[i], kv[i+1])
	}
	return path + "?" + q.Encode()
}
