package appstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/freeagent-build/freeagent/api"
)

// Error is App Store Connect's refusal of a request, with Apple's own
// words (its first error's code, title and detail), what the client was
// doing, and the fix when one is known. It unwraps to an *api.Error, so
// api.Transient says whether repeating the request may help (5xx, 429,
// 408) and api.Retry honours a Retry-After.
type Error struct {
	Op     string // "create the build upload"
	Status int
	Code   string // "NOT_AUTHORIZED", "ENTITY_ERROR.ATTRIBUTE.INVALID"…
	Title  string
	Detail string
	Fix    string
	http   *api.Error
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "App Store Connect refused to %s (%d", e.Op, e.Status)
	if e.Code != "" {
		b.WriteString(" " + e.Code)
	}
	b.WriteString(")")
	sep := ": "
	for _, s := range []string{e.Title, e.Detail} {
		if s != "" {
			b.WriteString(sep + s)
			sep = ": "
			if strings.HasSuffix(s, ".") {
				sep = " "
			}
		}
	}
	if fix := e.fix(); fix != "" {
		b.WriteString(" — " + fix)
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.http }

// fix is the caller's fix, else the one every request shares for its
// status.
func (e *Error) fix() string {
	if e.Fix != "" {
		return e.Fix
	}
	switch s := e.Status; {
	case s == http.StatusUnauthorized:
		return "check the API key: ascApiKeyIssuerId and ascApiKeyId must name the key whose .p8 is ascApiKeyPath " +
			"(App Store Connect → Users and Access → Integrations), the key must not be revoked, and this machine's clock must be right"
	case s == http.StatusForbidden:
		return "the API key's role may not do this: give the key the App Manager or Admin role in App Store Connect → Users and Access → Integrations"
	case s == http.StatusTooManyRequests:
		return "the API key's hourly request limit is spent; the submission can be retried later"
	case s >= 500:
		return "App Store Connect is failing; the submission can be retried later"
	}
	return ""
}

// errorResponse is Apple's error body (ErrorResponse).
type errorResponse struct {
	Errors []struct {
		Status string `json:"status"`
		Code   string `json:"code"`
		Title  string `json:"title"`
		Detail string `json:"detail"`
	} `json:"errors"`
}

// maxErrorText bounds what of a body that is not Apple's JSON goes into
// an error.
const maxErrorText = 512

// newError reads a refusal: Apple's ErrorResponse when the body is one,
// else the start of the body.
func newError(op string, status int, h http.Header, body []byte, now time.Time) *Error {
	e := &Error{Op: op, Status: status}
	var r errorResponse
	if json.Unmarshal(body, &r) == nil && len(r.Errors) > 0 {
		first := r.Errors[0]
		e.Code, e.Title, e.Detail = first.Code, first.Title, first.Detail
	} else if text := strings.TrimSpace(string(body)); text != "" {
		e.Detail = truncate(text, maxErrorText)
	} else {
		e.Title = http.StatusText(status)
	}
	e.http = &api.Error{Status: status, Code: e.Code, Message: e.Title, RetryAfter: api.ParseRetryAfter(h, now)}
	return e
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// asError is err's *Error, or nil.
func asError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return nil
}

// StateDetail is one of Apple's findings about an upload or a build
// (StateDetail: an ITMS code and its description).
type StateDetail struct {
	Code        string `json:"code"`
	Description string `json:"description"`
}

// ProcessingError is App Store Connect's verdict on an upload it took:
// the build upload FAILED, or the build's processing ended FAILED or
// INVALID. Repeating the submission will not help; the fix is in the app.
type ProcessingError struct {
	What   string // "the build upload", "the build"
	State  string
	Errors []StateDetail
}

func (e *ProcessingError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "App Store Connect processed %s: %s", e.What, e.State)
	for _, d := range e.Errors {
		b.WriteString("; ")
		if d.Code != "" {
			b.WriteString(d.Code + ": ")
		}
		b.WriteString(d.Description)
	}
	if len(e.Errors) == 0 {
		b.WriteString(" (App Store Connect gave no reason: the build's page in App Store Connect → TestFlight, or Apple's e-mail to the account holder, says why)")
	}
	b.WriteString(" — fix what Apple names in the app, raise the build number and submit a new build")
	return b.String()
}
