package server

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/freeagent-build/freeagent/controller/api"
	"github.com/freeagent-build/freeagent/controller/blobs"
	"github.com/freeagent-build/freeagent/controller/install"
	"github.com/freeagent-build/freeagent/controller/store"
)

// The install endpoints take no headers: the signed link is the credential,
// so a phone's browser (and iOS's installer) can open them.

// baseURL is the configured public URL, else the one this request used.
// Behind a proxy, configure it: forwarded headers are not trusted.
func (s *Server) baseURL(r *http.Request) string {
	if s.publicURL != "" {
		return s.publicURL
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// installLinks returns a completed build's links, expiring a link
// lifetime from now.
func (s *Server) installLinks(r *http.Request, b api.Build) (install.Links, error) {
	if b.Status != api.StatusCompleted {
		return install.Links{}, fmt.Errorf("%w: build %s is %s; install links exist once it has completed", store.ErrConflict, b.ID, b.Status)
	}
	return s.links.Links(s.baseURL(r), b.ID, s.links.Expiry(time.Now())), nil
}

// signed checks a request's link for object of build id; it answers 403
// itself and reports false when the link does not open it.
func (s *Server) signed(w http.ResponseWriter, r *http.Request, object string) (time.Time, bool) {
	id := r.PathValue("id")
	exp, err := s.links.Verify(id, object, r.URL.Query(), time.Now())
	if err != nil {
		s.fail(w, r, fmt.Errorf("%w: %w", store.ErrForbidden, err))
		return exp, false
	}
	return exp, true
}

// signedBuild checks the link for object and reads its build.
func (s *Server) signedBuild(w http.ResponseWriter, r *http.Request, object string) (api.Build, time.Time, bool) {
	exp, ok := s.signed(w, r, object)
	if !ok {
		return api.Build{}, exp, false
	}
	b, err := s.store.GetBuild(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err)
		return b, exp, false
	}
	return b, exp, true
}

// linkHeaders keeps the signed URL out of referrers, search engines and caches.
func linkHeaders(w http.ResponseWriter) {
	w.Header().Set("Referrer-Policy", "no-referrer")
	w.Header().Set("X-Robots-Tag", "noindex")
	w.Header().Set("Cache-Control", "private, no-store")
}

func (s *Server) installPage(w http.ResponseWriter, r *http.Request) {
	b, exp, ok := s.signedBuild(w, r, install.Page)
	if !ok {
		return
	}
	var page bytes.Buffer
	if err := install.WritePage(&page, b, s.links.Links(s.baseURL(r), b.ID, exp)); err != nil {
		s.fail(w, r, fmt.Errorf("render install page: %w", err))
		return
	}
	linkHeaders(w)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
	w.Write(page.Bytes()) //nolint:errcheck // the client went away
}

func (s *Server) installManifest(w http.ResponseWriter, r *http.Request) {
	b, exp, ok := s.signedBuild(w, r, install.Manifest)
	if !ok {
		return
	}
	ipa, ok := install.Installable(api.PlatformIOS, b.Artifacts)
	if b.Platform != api.PlatformIOS || !ok {
		s.fail(w, r, fmt.Errorf("%w: build %s has no .ipa to install", store.ErrNotFound, b.ID))
		return
	}
	stored, err := s.store.Artifact(r.Context(), b.ID, ipa.Name)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	f, _, err := s.blobs.Open(r.Context(), b.ID, blobs.Artifact(stored.AttemptID, ipa.Name))
	if err != nil {
		s.fail(w, r, fmt.Errorf("open %s of build %s: %w", ipa.Name, b.ID, err))
		return
	}
	defer f.Close()
	app, err := install.ReadAppInfo(f, ipa.Size)
	if err != nil {
		s.fail(w, r, fmt.Errorf("%w: %s cannot be installed over the air: %w", store.ErrConflict, ipa.Name, err))
		return
	}
	var out bytes.Buffer
	if err := install.WriteManifest(&out, s.links.Links(s.baseURL(r), b.ID, exp).Artifact(ipa.Name), app); err != nil {
		s.fail(w, r, err)
		return
	}
	linkHeaders(w)
	w.Header().Set("Content-Type", "application/xml")
	w.Write(out.Bytes()) //nolint:errcheck // the client went away
}

func (s *Server) installFile(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if _, ok := s.signed(w, r, install.ArtifactObject(name)); !ok {
		return
	}
	id := r.PathValue("id")
	if blobs.CleanName(name) != name {
		s.fail(w, r, fmt.Errorf("%w: build %s has no artifact %q", store.ErrNotFound, id, name))
		return
	}
	a, err := s.store.Artifact(r.Context(), id, name)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	linkHeaders(w)
	contentType := "application/octet-stream"
	if strings.HasSuffix(strings.ToLower(name), ".apk") {
		contentType = "application/vnd.android.package-archive" // what makes Android offer to install it
	}
	s.serveFile(w, r, id, blobs.Artifact(a.AttemptID, name), name, contentType, a.SHA256)
}

// qrCode answers GET /api/builds/{id}/qr.png: the install page's link.
func (s *Server) qrCode(w http.ResponseWriter, r *http.Request, ba buildAccess) {
	b, err := s.store.GetBuild(r.Context(), ba.ID)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	links, err := s.installLinks(r, b)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	png, err := install.QRPNG(links.Page())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "image/png")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set(api.HeaderInstallURL, links.Page())
	w.Write(png) //nolint:errcheck // the client went away
}
