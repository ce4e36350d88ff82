package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"strings"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/blobs"
	"github.com/freeagent-build/freeagent/controller/store"
)

// directUploadTTL is how long a direct upload URL works: time for a VM to
// send a large artifact over a slow link. The ticket to complete it lasts
// an hour longer.
const directUploadTTL = 30 * time.Minute

// uploadTicket is what a direct upload's ticket carries, sealed (AES-GCM,
// bound to the build, or for a source to the API key that asked) so the
// controller keeps no state between the calls and a client cannot change
// what it declared: the staging key and, for a multipart upload, its id
// and part size.
type uploadTicket struct {
	Attempt  string    `json:"a,omitempty"` // "" for a source
	Name     string    `json:"n"`
	Size     int64     `json:"s"`
	SHA256   string    `json:"h"`
	Key      string    `json:"k"`
	UploadID string    `json:"u,omitempty"`
	PartSize int64     `json:"p,omitempty"`
	Expires  time.Time `json:"e"`
}

func (t uploadTicket) ref() blobs.UploadRef {
	return blobs.UploadRef{Key: t.Key, UploadID: t.UploadID, PartSize: t.PartSize}
}

// answerDirectUpload answers a start of a direct upload: {"direct":
// false} when the store took none (ok false), else where to send the file
// and the ticket, sealed for binding, that completes it. t carries what
// the client declared; the staging key, upload id, part size and expiry
// are filled here from up.
func (s *Server) answerDirectUpload(w http.ResponseWriter, r *http.Request, binding string, t uploadTicket, up blobs.DirectUpload, ok bool) {
	if !ok {
		writeJSON(w, http.StatusOK, api.DirectUpload{Direct: false})
		return
	}
	expires := time.Now().Add(directUploadTTL)
	t.Key, t.UploadID, t.PartSize, t.Expires = up.Key, up.UploadID, up.PartSize, expires.Add(time.Hour)
	ticket, err := s.sealTicket(binding, t)
	if err != nil {
		s.blobs.AbortDirectUpload(r.Context(), up.UploadRef) //nolint:errcheck // best effort: the collector removes what remains
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.DirectUpload{Direct: true, URL: up.URL, Headers: up.Headers, PartSize: up.PartSize, Parts: up.PartURLs,
		PartHeaders: up.PartHeaders, Ticket: ticket, ExpiresAt: expires})
}

// checkDeclared validates a DirectUploadRequest's size, SHA-256 and part
// SHA-256s against limit and the multipart plan, giving the SHA-256 in
// lower case. A file sent in parts may come without part SHA-256s (a
// client that predates them): the store then signs it no part URLs.
func checkDeclared(req api.DirectUploadRequest, limit int64, what string) (string, error) {
	if req.Size < 0 {
		return "", badRequest("size %d is negative", req.Size)
	}
	if req.Size > limit {
		return "", fmt.Errorf("%w: the %s's %d bytes exceed the limit of %d", store.ErrTooLarge, what, req.Size, limit)
	}
	if b, err := hex.DecodeString(req.SHA256); err != nil || len(b) != 32 {
		return "", badRequest("sha256 %q is not 64 hex digits", req.SHA256)
	}
	if parts := api.Parts(req.Size); len(req.PartSHA256) != 0 && len(req.PartSHA256) != parts {
		return "", badRequest("part_sha256 has %d sums, but a direct upload of %d bytes is sent in %d parts of %d bytes (api.Parts): hash each part as api.UploadSums does",
			len(req.PartSHA256), req.Size, parts, api.PartSize(req.Size))
	}
	for i, h := range req.PartSHA256 {
		if b, err := hex.DecodeString(h); err != nil || len(b) != 32 {
			return "", badRequest("part_sha256[%d] %q is not 64 hex digits", i, h)
		}
	}
	return strings.ToLower(req.SHA256), nil
}

// startDirectUpload answers POST /api/builds/{id}/artifacts/direct: where
// the VM sends its artifact, straight to the object store (one PUT, or
// parts for a large file).
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
	sum, err := checkDeclared(req, s.limits.Artifact, "artifact")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if s.blobs.DirectUploads() {
		if err := s.store.OpenDirectUpload(r.Context(), buildID, attemptID, s.limits.DirectUploadsPerAttempt); err != nil {
			s.fail(w, r, err)
			return
		}
	}
	up, ok, err := s.blobs.StartDirectUpload(r.Context(), buildID, attemptID, req.Size, sum, req.PartSHA256, directUploadTTL)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.answerDirectUpload(w, r, buildID, uploadTicket{Attempt: attemptID, Name: req.Name, Size: req.Size, SHA256: sum}, up, ok)
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
	err = s.blobs.FinishDirectUpload(r.Context(), t.ref(), t.Size, t.SHA256)
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

// sourceTicketAAD binds a source upload's ticket to the key that asked
// for it: another key cannot submit it.
func sourceTicketAAD(keyID string) string { return "source upload\x00" + keyID }

// sealTicket seals t for binding: the build id (artifacts), or
// sourceTicketAAD (sources).
func (s *Server) sealTicket(binding string, t uploadTicket) (string, error) {
	box, err := s.blobs.Derive(ticketPurpose)
	if err != nil {
		return "", err
	}
	b, err := json.Marshal(t)
	if err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(box.Seal(b, []byte(binding))), nil
}

func (s *Server) openTicket(binding, ticket string) (uploadTicket, error) {
	var t uploadTicket
	invalid := fmt.Errorf("%w: the upload ticket is not one this controller gave for this build or key", store.ErrForbidden)
	raw, err := base64.RawURLEncoding.DecodeString(ticket)
	if err != nil {
		return t, invalid
	}
	box, err := s.blobs.Derive(ticketPurpose)
	if err != nil {
		return t, err
	}
	plain, err := box.Open(raw, []byte(binding))
	if err != nil || json.Unmarshal(plain, &t) != nil {
		return t, invalid
	}
	if time.Now().After(t.Expires) {
		return t, fmt.Errorf("%w: the upload ticket expired; start the upload again", store.ErrConflict)
	}
	return t, nil
}

// startSourceUpload answers POST /api/builds/uploads: where the CLI sends
// a source archive before it submits, straight to the object store. With
// the file store the answer is {"direct": false} and the archive comes
// with the submit, as before.
func (s *Server) startSourceUpload(w http.ResponseWriter, r *http.Request, key store.APIKey) {
	var req api.DirectUploadRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	if !s.blobs.DirectUploads() || (req.Size == 0 && req.SHA256 == "") {
		// A declaration without size and SHA-256 only asks the mode.
		writeJSON(w, http.StatusOK, api.DirectUpload{Direct: s.blobs.DirectUploads()})
		return
	}
	if req.Project != "" {
		if err := validProject(`"project"`, req.Project); err != nil {
			s.fail(w, r, err)
			return
		}
	}
	if err := projectAllowed(key, req.Project); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := s.checkFreeSpace(); err != nil {
		s.fail(w, r, err)
		return
	}
	sum, err := checkDeclared(req, s.limits.Source, "source archive")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	up, ok, err := s.blobs.StartSourceUpload(r.Context(), req.Size, sum, req.PartSHA256, directUploadTTL)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.answerDirectUpload(w, r, sourceTicketAAD(key.ID), uploadTicket{Name: "source", Size: req.Size, SHA256: sum}, up, ok)
}

// directSource is a source archive the CLI uploaded to the store itself,
// checked and ready to become a build's source.
type directSource struct {
	ticket uploadTicket
	format string
}

// checkSourceTicket opens a submit's "source_upload" ticket and checks the
// object it names: its size and SHA-256 (FinishDirectUpload removes a
// mismatch), and that it is an archive. A repeat of a submit whose first
// answer was lost finds the object already moved to its build: then the
// ticket alone is returned (format ""), and the submit is a duplicate or,
// with nothing to promote, fails.
func (s *Server) checkSourceTicket(r *http.Request, key store.APIKey, ticket string) (directSource, error) {
	t, err := s.openTicket(sourceTicketAAD(key.ID), ticket)
	if err != nil {
		return directSource{}, err
	}
	if !strings.HasPrefix(t.Key, blobs.SourceUploads) {
		return directSource{}, fmt.Errorf("%w: the ticket is not a source upload's", store.ErrForbidden)
	}
	err = s.blobs.FinishDirectUpload(r.Context(), t.ref(), t.Size, t.SHA256)
	if errors.Is(err, fs.ErrNotExist) {
		return directSource{ticket: t}, nil
	}
	if err != nil {
		return directSource{}, err
	}
	head := make([]byte, 4)
	n, err := s.blobs.Head(r.Context(), t.Key, head)
	if err != nil {
		return directSource{}, fmt.Errorf("read the uploaded source: %w", err)
	}
	format, err := sniffArchive(bufio.NewReader(bytes.NewReader(head[:n])))
	if err != nil {
		s.blobs.AbortDirectUpload(r.Context(), t.ref()) //nolint:errcheck // best effort: the collector removes what remains
		return directSource{}, err
	}
	return directSource{ticket: t, format: format}, nil
}

// fingerprintUpload measures a tar.gz the CLI sent to the store itself
// (key: its staging key), reading it back: its fingerprint and the files
// of its cache keys. The store checked the archive's SHA-256, which says
// nothing of the tree in it, and no service computes a tree's. The
// read-back also bounds what the archive expands to, as for a source
// streamed through the controller. The caller pays for it only for a
// submit with a spec: no other build is reused or has caches.
func (s *Server) fingerprintUpload(ctx context.Context, key string) (sourceTree, error) {
	obj, _, err := s.blobs.Backend().Open(ctx, key)
	if err != nil {
		return sourceTree{}, fmt.Errorf("read the uploaded source back: %w", err)
	}
	defer obj.Close()
	r := &readErrors{r: obj}
	src, err := measureTarGz(r, s.limits.Source, &s.gzips)
	if r.err != nil {
		// Not the archive's fault: measureTarGz took it for one that is no tar.gz.
		return sourceTree{}, fmt.Errorf("read the uploaded source back: %w", r.err)
	}
	return src, err
}

// readErrors keeps the first error of r other than io.EOF.
type readErrors struct {
	r   io.Reader
	err error
}

func (e *readErrors) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil && err != io.EOF && e.err == nil {
		e.err = err
	}
	return n, err
}
