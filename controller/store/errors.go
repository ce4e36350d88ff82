package store

import "errors"

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
)

// OffsetAheadError answers a log append that starts beyond the stored log.
type OffsetAheadError struct{ Length int64 }

func (e *OffsetAheadError) Error() string {
	return "log offset is beyond the stored length; resend from the returned length"
}
