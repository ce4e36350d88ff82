package server

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"strings"
	"time"

	"github.com/freeagent-build/freeagent/controller/api"
	"github.com/freeagent-build/freeagent/controller/blobs"
	"github.com/freeagent-build/freeagent/controller/store"
)

// directUploadTTL is how long a direct upload URL works: time for a VM to
// send a large artifact over a slow link. The ticket to complete it lasts
// an hour longer.
const directUploadTTL = 30 * time.Minute

// uploadTicket is what a direct upload's ticket carries, sealed (AES-GCM,
// bound to the build) so the controller keeps no state between the two
// calls and a VM cannot change what it declared.
type uploadTicket struct {
	Attempt string    `json:"a"`
	Name    string    `json:"n"`
	Size    int64     `json:"s"`
	SHA256  string    `json:"h"`
	Key     string    `json:"k"`
	Expires time.Time `json:"e"`
}

// startDirectUpload answers POST /api/builds/{id}/artifacts/direct: a URL
// the VM PUTs its artifact to, straight to the object store.
func (s *Server) startDirectUpload(w http.ResponseWriter, r *http.Request, buildID, attemptID string) {
	var req api.DirectUploadRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	if req.Name == "" || blobs.CleanName(req.Name) != req.Name {
		s.fail(w, r, badRequest("the artifact's name %q is not a usable file name; send a plain name such as app-release.apk", req.Name))
		return
	}
	if req.Size < 0 {
		s.fail(w, r, badRequest("size %d is negative", req.Size))
		return
	}
	if req.Size > s.limits.Artifact {
		s.fail(w, r, fmt.Errorf("%w: the artifact's %d bytes exceed the limit of %d", store.ErrTooLarge, req.Size, s.limits.Artifact))
		return
	}
	if b, err := hex.DecodeString(req.SHA256); err != nil || len(b) != 32 {
		s.fail(w, r, badRequest("sha256 %q is not 64 hex digits", req.SHA256))
		return
	}
	sum := strings.ToLower(req.SHA256)
	up, ok, err := s.blobs.StartDirectUpload(r.Context(), buildID, attemptID, req.Size, sum, directUploadTTL)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if !ok {
		writeJSON(w, http.StatusOK, api.DirectUpload{Direct: false})
		return
	}
	expires := time.Now().Add(directUploadTTL)
	ticket, err := s.sealTicket(buildID, uploadTicket{Attempt: attemptID, Name: req.Name, Size: req.Size, SHA256: sum, Key: up.Key,
		Expires: expires.Add(time.Hour)})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.DirectUpload{Direct: true, URL: up.URL, Headers: up.Headers, Ticket: ticket, ExpiresAt: expires})
}

// completeDirectUpload answers POST .../artifacts/direct/complete: the
// object the VM PUT is checked against what it declared and becomes the
// build's artifact, inside the transaction that verifies the attempt.
func (s *Server) completeDirectUpload(w http.ResponseWriter, r *http.Request, buildID, attemptID string) {
	var req api.DirectUploadComplete
	if err := s.decodeJSON(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	t, err := s.openTicket(buildID, req.Ticket)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if t.Attempt != attemptID {
		s.fail(w, r, fmt.Errorf("%w: the ticket belongs to another attempt of build %s", store.ErrForbidden, buildID))
		return
	}
	err = s.blobs.FinishDirectUpload(r.Context(), t.Key, t.Size, t.SHA256)
	if errors.Is(err, fs.ErrNotExist) {
		// A repeat whose first answer was lost finds the artifact recorded.
		if a, aerr := s.store.AttemptArtifact(r.Context(), buildID, attemptID, t.Name); aerr == nil && a.SHA256 == t.SHA256 && a.Size == t.Size {
			writeJSON(w, http.StatusCreated, a)
			return
		}
		s.fail(w, r, fmt.Errorf("%w: nothing was uploaded for this ticket: PUT the file to its URL first", store.ErrConflict))
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	a := &store.PendingArtifact{Name: t.Name, Size: t.Size, SHA256: t.SHA256,
		Commit: func() error {
			return s.blobs.PromoteUpload(r.Context(), t.Key, buildID, blobs.Artifact(attemptID, t.Name))
		}}
	if err := s.addArtifact(r.Context(), buildID, attemptID, a); err != nil {
		s.blobs.Backend().Delete(r.Context(), t.Key) //nolint:errcheck // best effort: the attempt is over
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, api.Artifact{Name: a.Name, Size: a.Size, SHA256: a.SHA256, URL: store.ArtifactURL(buildID, a.Name)})
}

const ticketPurpose = "direct upload tickets"

func (s *Server) sealTicket(buildID string, t uploadTicket) (string, error) {
	box, err := s.blobs.Derive(ticketPurpose)
	if err != nil {
		return "", err
	}
	b, err := json.Marshal(t)
	if err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(box.Seal(b, []byte(buildID))), nil
}

func (s *Server) openTicket(buildID, ticket string) (uploadTicket, error) {
	var t uploadTicket
	invalid := fmt.Errorf("%w: the upload ticket is not one this controller gave for build %s", store.ErrForbidden, buildID)
	raw, err := base64.RawURLEncoding.DecodeString(ticket)
	if err != nil {
		return t, invalid
	}
	box, err := s.blobs.Derive(ticketPurpose)
	if err != nil {
		return t, err
	}
	plain, err := box.Open(raw, []byte(buildID))
	if err != nil || json.Unmarshal(plain, &t) != nil {
		return t, invalid
	}
	if time.Now().After(t.Expires) {
		return t, fmt.Errorf("%w: the upload ticket expired; start the upload again", store.ErrConflict)
	}
	return t, nil
}
