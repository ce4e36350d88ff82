package store

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Sentinel errors; the HTTP layer maps each to a status code. Wrapped errors
// carry the detail a user needs.
var (
	ErrNotFound     = errors.New("not found")
	ErrUnauthorized = errors.New("invalid or expired credential")
	ErrForbidden    = errors.New("credential not allowed here")
	ErrLeaseLost    = errors.New("lease no longer held")
	ErrConflict     = errors.New("conflict")
	ErrInvalid      = errors.New("invalid input")
	ErrTooLarge     = errors.New("too large")
	ErrGone         = errors.New("gone") // a once-per-attempt file already handed out
)

// OffsetAheadError answers a log append that starts beyond the stored log.
type OffsetAheadError struct{ Length int64 }

func (e *OffsetAheadError) Error() string {
	return "log offset is beyond the stored length; resend from the returned length"
}

// checkText rejects text Postgres cannot store (NUL bytes, invalid UTF-8),
// naming the field, so such input is a 422 rather than a database error.
func checkText(field, s string) error {
	if !utf8.ValidString(s) || strings.ContainsRune(s, 0) {
		return fmt.Errorf("%w: field %q must be UTF-8 text without NUL characters", ErrInvalid, field)
	}
	return nil
}

// sanitizeText makes s storable and at most n bytes long, cutting on a
// character boundary: for free text (a worker's error message) that must
// be recorded, not refused.
func sanitizeText(s string, n int) string {
	s = strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "")
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
