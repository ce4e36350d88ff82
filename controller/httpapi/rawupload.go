package httpapi

import (
	"fmt"
	"net/http"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/blobs"
	"github.com/freeagent-build/freeagent/controller/store"
)

// putArtifact answers PUT /api/builds/{id}/artifacts/{name}: the VM's
// artifact as the whole request body, with its SHA-256 in
// X-Checksum-Sha256. It is the streamed upload without multipart framing,
// whose parser hands the body over 4 KiB at a time and scans each piece
// for the boundary: that alone halved what an upload through the
// controller reached against a plain copy. POST .../artifacts (multipart)
// stays for VMs that predate this.
func (s *Server) putArtifact(w http.ResponseWriter, r *http.Request, buildID, attemptID string) {
	name := r.PathValue("name")
	if name == "" || blobs.CleanName(name) != name {
		s.fail(w, r, badRequest("the artifact's name %q is not a usable file name; send a plain name such as app-release.apk", name))
		return
	}
	sum := r.Header.Get(api.HeaderChecksum)
	if sum == "" {
		s.fail(w, r, badRequest("the %s header (the artifact's hex SHA-256) is required", api.HeaderChecksum))
		return
	}
	if r.ContentLength > s.limits.Artifact {
		s.fail(w, r, fmt.Errorf("%w: the artifact's %d bytes exceed the limit of %d", store.ErrTooLarge, r.ContentLength, s.limits.Artifact))
		return
	}
	p, err := s.blobs.Create(r.Context(), buildID, blobs.Artifact(attemptID, name))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	defer p.Abort()
	if err := p.Fill(r.Body, s.limits.Artifact); err != nil {
		s.fail(w, r, bodyErr(err))
		return
	}
	if r.ContentLength >= 0 && p.Size() != r.ContentLength {
		s.fail(w, r, badRequest("the body held %d bytes where Content-Length said %d (a truncated upload?)", p.Size(), r.ContentLength))
		return
	}
	s.recordArtifact(w, r, buildID, attemptID, name, p, sum)
}

// recordArtifact finishes a VM's artifact upload through the controller
// (raw or multipart): it checks the declared SHA-256 (empty: none
// declared), sends the file ahead of the transaction, records it for the
// attempt and answers with it.
func (s *Server) recordArtifact(w http.ResponseWriter, r *http.Request, buildID, attemptID, name string, p *blobs.Pending, sum string) {
	if err := p.Verify(sum); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := p.Prepare(r.Context()); err != nil {
		s.fail(w, r, err)
		return
	}
	a := &store.PendingArtifact{Name: name, Size: p.Size(), SHA256: p.SHA256(), Commit: func() error { return p.Commit(r.Context()) }}
	if err := s.addArtifact(r.Context(), buildID, attemptID, a); err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, api.Artifact{Name: a.Name, Size: a.Size, SHA256: a.SHA256, URL: store.ArtifactURL(buildID, a.Name)})
}

// bodyErr classifies an error met while reading a raw body: a size limit
// or a slow client as themselves, anything else as a truncated body.
func bodyErr(err error) error {
	if e := multipartErr(err); e == err {
		return err
	}
	return badRequest("truncated body: %v", err)
}
