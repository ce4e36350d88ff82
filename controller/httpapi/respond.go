package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/blobs"
	"github.com/freeagent-build/freeagent/controller/store"
)

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.Encode(v) //nolint:errcheck // the client went away; nothing to do
}

func writeError(w http.ResponseWriter, _ *http.Request, status int, code, msg string) {
	writeJSON(w, status, api.ErrorResponse{Error: msg, Code: code})
}

// fail maps an error from the store or the file store to a response. Errors
// the client cannot act on are logged and answered with a generic 500.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	var offset *store.OffsetAheadError
	var maxBytes *http.MaxBytesError
	var limited *errRateLimited
	switch {
	case errors.As(err, &offset):
		writeJSON(w, http.StatusRequestedRangeNotSatisfiable, api.ErrorResponse{Error: err.Error(), Code: api.CodeOffsetAhead, Length: &offset.Length})
	case errors.As(err, &maxBytes):
		writeError(w, r, http.StatusRequestEntityTooLarge, api.CodeTooLarge,
			fmt.Sprintf("request body exceeds the limit of %d bytes", maxBytes.Limit))
	case errors.Is(err, store.ErrTooLarge), errors.Is(err, blobs.ErrTooLarge):
		writeError(w, r, http.StatusRequestEntityTooLarge, api.CodeTooLarge, err.Error())
	case errors.Is(err, blobs.ErrNoSpace):
		writeError(w, r, http.StatusInsufficientStorage, api.CodeInsufficientStorage, strings.TrimPrefix(err.Error(), blobs.ErrNoSpace.Error()+": "))
	case errors.Is(err, blobs.ErrChecksum):
		writeError(w, r, http.StatusUnprocessableEntity, api.CodeChecksum, err.Error())
	case errors.Is(err, store.ErrInvalid):
		writeError(w, r, http.StatusUnprocessableEntity, api.CodeInvalidField, strings.TrimPrefix(err.Error(), store.ErrInvalid.Error()+": "))
	case errors.Is(err, errBadRequest):
		writeError(w, r, http.StatusBadRequest, api.CodeBadRequest, strings.TrimPrefix(err.Error(), errBadRequest.Error()+": "))
	case errors.As(err, &limited):
		writeRateLimited(w, r, limited)
	case errors.Is(err, store.ErrUnauthorized):
		closeAfter(w)
		var held keyHeld
		if !errors.As(err, &held) {
			if limited := s.rates.authFailed(r); limited != nil {
				writeRateLimited(w, r, limited)
				return
			}
		}
		writeError(w, r, http.StatusUnauthorized, api.CodeUnauthorized, err.Error())
	case errors.Is(err, store.ErrForbidden):
		closeAfter(w)
		writeError(w, r, http.StatusForbidden, api.CodeForbidden, err.Error())
	case errors.Is(err, errSlowBody):
		closeAfter(w)
		writeError(w, r, http.StatusRequestTimeout, api.CodeBadRequest,
			fmt.Sprintf("%v (the controller waits %s plus a second per %d bytes)", errSlowBody, s.limits.BodyGrace, s.limits.BodyMinRate))
	case errors.Is(err, store.ErrNotFound):
		writeError(w, r, http.StatusNotFound, api.CodeNotFound, strings.TrimPrefix(err.Error(), store.ErrNotFound.Error()+": "))
	case errors.Is(err, store.ErrLeaseLost):
		writeError(w, r, http.StatusConflict, api.CodeLeaseLost, err.Error())
	case errors.Is(err, store.ErrGone):
		writeError(w, r, http.StatusGone, api.CodeGone, strings.TrimPrefix(err.Error(), store.ErrGone.Error()+": "))
	case errors.Is(err, store.ErrConflict):
		writeError(w, r, http.StatusConflict, api.CodeConflict, strings.TrimPrefix(err.Error(), store.ErrConflict.Error()+": "))
	case errors.Is(err, r.Context().Err()) && r.Context().Err() != nil:
		// The client went away; nobody reads the answer.
	default:
		s.log.WithError(err).WithField("path", r.URL.Path).Error("request failed")
		writeError(w, r, http.StatusInternalServerError, api.CodeInternal, "internal error; see the controller log")
	}
}

var errBadRequest = errors.New("bad request")

func badRequest(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errBadRequest}, args...)...)
}

// decodeJSON reads a bounded JSON body into v. Unknown fields are ignored.
func (s *Server) decodeJSON(w http.ResponseWriter, r *http.Request, v any) error {
	body := http.MaxBytesReader(w, r.Body, s.limits.JSONBody)
	dec := json.NewDecoder(body)
	if err := dec.Decode(v); err != nil {
		var maxBytes *http.MaxBytesError
		var syntax *json.SyntaxError
		var typ *json.UnmarshalTypeError
		switch {
		case errors.As(err, &maxBytes):
			return err
		case errors.Is(err, io.EOF):
			return badRequest("request body is empty; send a JSON object")
		case errors.As(err, &typ):
			return fmt.Errorf("%w: field %q must be a %s", store.ErrInvalid, typ.Field, typ.Type)
		case errors.As(err, &syntax), errors.Is(err, io.ErrUnexpectedEOF):
			return badRequest("malformed JSON: %v", err)
		default:
			return badRequest("malformed JSON: %v", err)
		}
	}
	return nil
}
