package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/freeagent-build/freeagent/api"
)

// Exit codes (also in the help text and the README).
const (
	ExitOK          = 0   // success; for --wait/--watch/-f: the build completed
	ExitFailed      = 1   // the build failed or was cancelled, or the operation failed
	ExitUsage       = 2   // bad command line or input (no project, unknown platform, 400/422)
	ExitUnreachable = 3   // the controller could not be reached (after retries)
	ExitAuth        = 4   // the API key or build token was rejected (401/403) or is missing
	ExitNotFound    = 5   // no such build or artifact (404)
	ExitInterrupted = 130 // interrupted (Ctrl-C)
)

const exitCodesHelp = `Exit codes:
  0    success (with --wait, --watch or -f: the build completed)
  1    the build failed or was cancelled, or the operation failed
  2    usage error or bad input (no project, unknown platform, a field the controller refused)
  3    the controller could not be reached (after retrying network errors)
  4    authentication: API key or build token missing or rejected (401/403)
  5    not found: no such build or artifact (404)
  130  interrupted`

// cliError is an error with its exit code and what to do about it.
type cliError struct {
	code int
	msg  string // what failed
	hint string // how to fix it (optional)
	err  error
}

func (e *cliError) Error() string {
	if e.err == nil {
		return e.msg
	}
	if e.msg == "" {
		return e.err.Error()
	}
	return e.msg + ": " + e.err.Error()
}

func (e *cliError) Unwrap() error { return e.err }

func usageErr(format string, args ...any) error {
	return &cliError{code: ExitUsage, msg: fmt.Sprintf(format, args...)}
}

func failErr(hint, format string, args ...any) error {
	return &cliError{code: ExitFailed, msg: fmt.Sprintf(format, args...), hint: hint}
}

// buildEnded reports a followed build that did not complete.
type buildEnded struct {
	id     string
	status api.BuildStatus
	detail string
}

func (e *buildEnded) Error() string {
	s := fmt.Sprintf("build %s %s", e.id, e.status)
	if e.detail != "" {
		s += ": " + e.detail
	}
	return s
}

// exitCode maps an error to the process exit code.
func exitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var ce *cliError
	if errors.As(err, &ce) {
		return ce.code
	}
	var be *buildEnded
	if errors.As(err, &be) {
		return ExitFailed
	}
	if errors.Is(err, context.Canceled) {
		return ExitInterrupted
	}
	if isNetworkError(err) || isCertError(err) {
		return ExitUnreachable
	}
	switch s := api.StatusOf(err); {
	case s == http.StatusUnauthorized || s == http.StatusForbidden:
		return ExitAuth
	case s == http.StatusNotFound:
		return ExitNotFound
	case s == http.StatusBadRequest || s == http.StatusUnprocessableEntity:
		return ExitUsage
	}
	return ExitFailed
}

// retryable reports an error worth retrying (api.Transient: the request
// did not reach the controller, its answer was lost, or the answer says
// "later"), and a transfer that stalled; never a failure to read the
// project.
func retryable(err error) bool {
	var pe *packError
	if errors.As(err, &pe) {
		return false
	}
	return api.Transient(err) || errors.Is(err, errStalled)
}

// isNetworkError reports a retryable error that says the controller was
// not reached: no answer (connection refused or reset, DNS, timeouts, a
// body cut short, a stall), or a proxy in front of it saying so
// (502/503/504). The controller's own answers are not network errors.
func isNetworkError(err error) bool {
	switch api.StatusOf(err) {
	case 0, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return retryable(err)
	}
	return false
}

// isCertError reports a certificate the TLS handshake refused.
func isCertError(err error) bool { return api.CertificateError(err) }

// isDialError reports an error from before the request was sent: safe to
// retry even for a request that is not idempotent.
func isDialError(err error) bool {
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Op == "dial" {
		return true
	}
	var de *net.DNSError
	return errors.As(err, &de)
}

// packError is a failure to read the project while packing: not retried.
type packError struct{ err error }

func (e *packError) Error() string { return "packing the project failed: " + e.err.Error() }
func (e *packError) Unwrap() error { return e.err }

var errStalled = errors.New("no data received for too long")

// describe turns err into the message and the hint shown to the user; s
// (optional) gives the controller URL for network errors.
func describe(err error, s *session) (msg, hint string) {
	var ce *cliError
	if errors.As(err, &ce) && (ce.code != ExitFailed || ce.hint != "" || ce.err == nil) {
		return ce.Error(), ce.hint
	}
	var be *buildEnded
	if errors.As(err, &be) {
		return be.Error(), fmt.Sprintf("the log: expo-build logs %s · run it again: expo-build retry %s", be.id, be.id)
	}
	if errors.Is(err, context.Canceled) {
		return "interrupted", ""
	}
	var ae *api.Error
	if errors.As(err, &ae) {
		switch ae.Status {
		case http.StatusUnauthorized, http.StatusForbidden:
			return err.Error(), authHint(ae.Status)
		case http.StatusNotFound:
			return err.Error(), "check the id; `expo-build build:list` shows recent builds"
		case http.StatusRequestEntityTooLarge:
			return err.Error(), "the project is larger than the controller accepts: exclude large files in .easignore (or .gitignore)"
		case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return err.Error(), unreachableHint(s)
		}
		if ae.Status >= 500 {
			return err.Error(), "the controller failed; its log says why (try again later)"
		}
		return err.Error(), ""
	}
	if isCertError(err) {
		return fmt.Sprintf("the controller's TLS certificate is not trusted: %s", shortNetErr(err)),
			"check that the URL's host name is the certificate's; a certificate from a private CA is trusted with SSL_CERT_FILE=ca.pem"
	}
	if isNetworkError(err) {
		base := ""
		if s != nil {
			base = s.baseURL
		}
		return fmt.Sprintf("cannot reach the controller at %s: %s", base, shortNetErr(err)), unreachableHint(s)
	}
	return err.Error(), ""
}

func authHint(status int) string {
	if status == http.StatusForbidden {
		return "this key's role may not do that (developer or admin keys submit and read builds; `workers` needs an admin key): " +
			"store another with `expo-build config --api-key-stdin` or set EXPO_CONTROLLER_API_KEY"
	}
	return "store a valid key with `expo-build config --api-key-stdin` (keys come from `freeagent-controller keys create --role developer`) or set EXPO_CONTROLLER_API_KEY"
}

func unreachableHint(s *session) string {
	h := "check the controller URL (--controller-url, EXPO_CONTROLLER_URL or `expo-build config --controller-url URL`) and that the controller is running"
	if s != nil && s.baseURL != "" {
		h += " (" + strings.TrimRight(s.baseURL, "/") + "/health answers when it is)"
	}
	return h
}

// shortNetErr is the heart of a network error ("connect: connection
// refused") without the request line around it.
func shortNetErr(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) && ue.Err != nil {
		err = ue.Err
	}
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		return oe.Err.Error()
	}
	return err.Error()
}

// redact removes secrets from text shown to the user.
func redact(text string, secrets ...string) string {
	for _, s := range secrets {
		if len(s) >= 8 {
			text = strings.ReplaceAll(text, s, "[redacted]")
		}
	}
	return text
}
