package httpapi

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/blobs"
	"github.com/freeagent-build/freeagent/controller/install"
	"github.com/freeagent-build/freeagent/controller/store"
)

// The install endpoints take no headers: the signed link is the credential,
// so a phone's browser (and iOS's installer) can open them.

// errNoPublicURL answers a link request that came through a proxy when no
// --public-url is set. It is a 409, not a 5xx: nothing is broken and
// retrying does not help, the controller's configuration conflicts with
// how it is reached; and proxies replace 5xx bodies with their own pages,
// which would hide the setting to change.
var errNoPublicURL = fmt.Errorf("%w: this request came through a proxy (it carries Forwarded or X-Forwarded-* headers) and the controller has no --public-url, so it cannot tell the address phones reach it at; start it with --public-url https://<the proxy's public address>", store.ErrConflict)

// proxyHeaders are the headers a reverse proxy adds.
var proxyHeaders = []string{"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "X-Forwarded-Port", "X-Real-Ip"}

// baseURL is the configured public URL, else the one this request used,
// only when the request came straight to the controller: behind a proxy the
// Host header is the proxy's upstream name, and forwarded headers are not
// trusted, so it refuses to guess (errNoPublicURL).
func (s *Server) baseURL(r *http.Request) (string, error) {
	if s.publicURL != "" {
		return s.publicURL, nil
	}
	for _, h := range proxyHeaders {
		if _, ok := r.Header[h]; ok {
			return "", errNoPublicURL
		}
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host, nil
}

// installLinks returns a completed build's links, expiring a link
// lifetime from now.
func (s *Server) installLinks(r *http.Request, b api.Build) (install.Links, error) {
	if b.Status != api.StatusCompleted {
		return install.Links{}, fmt.Errorf("%w: build %s is %s; install links exist once it has completed", store.ErrConflict, b.ID, b.Status)
	}
	base, err := s.baseURL(r)
	if err != nil {
		return install.Links{}, err
	}
	return s.links.Links(base, b.ID, s.links.Expiry(time.Now())), nil
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
	base, err := s.baseURL(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var unavailable string
	if b.Platform == api.PlatformIOS {
		if ipa, ok := install.Installable(b.Platform, b.Artifacts); ok {
			if _, err := s.appInfo(r, b.ID, ipa.Name); err != nil {
				unavailable = strings.TrimPrefix(err.Error(), store.ErrConflict.Error()+": ")
			}
		}
	}
	var page bytes.Buffer
	if err := install.WritePage(&page, b, s.links.Links(base, b.ID, exp), unavailable); err != nil {
		s.fail(w, r, fmt.Errorf("render install page: %w", err))
		return
	}
	linkHeaders(w)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
	w.Write(page.Bytes()) //nolint:errcheck // the client went away
}

// appInfo returns what an IPA said about its app when it was recorded, or
// an ErrConflict saying why it cannot be installed over the air.
func (s *Server) appInfo(r *http.Request, buildID, name string) (install.AppInfo, error) {
	stored, err := s.store.Artifact(r.Context(), buildID, name)
	switch {
	case err != nil:
		return install.AppInfo{}, err
	case stored.App != nil:
		return *stored.App, nil
	case stored.AppError != "":
		return install.AppInfo{}, fmt.Errorf("%w: %s cannot be installed over the air: %s", store.ErrConflict, name, stored.AppError)
	default:
		return install.AppInfo{}, fmt.Errorf("%w: %s cannot be installed over the air: it was stored by a controller that did not read its Info.plist at upload; run the build again", store.ErrConflict, name)
	}
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
	base, err := s.baseURL(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	app, err := s.appInfo(r, b.ID, ipa.Name)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var out bytes.Buffer
	if err := install.WriteManifest(&out, s.links.Links(base, b.ID, exp).Artifact(ipa.Name), app); err != nil {
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

// addArtifact records an artifact a VM uploaded (streamed or direct) for
// its live attempt, within the per-build cap, reading an IPA's app
// information once, now.
func (s *Server) addArtifact(ctx context.Context, buildID, attemptID string, a *store.PendingArtifact) error {
	a.Inspect = s.inspector(ctx, buildID, attemptID, a.Name)
	return s.store.AddArtifact(ctx, buildID, attemptID, a, s.limits.ArtifactsPerBuild)
}

// inspector reads what a committed .ipa says about its app; nil for other
// files.
func (s *Server) inspector(ctx context.Context, buildID, attemptID, name string) func() (install.AppInfo, error) {
	if !strings.HasSuffix(strings.ToLower(name), ".ipa") {
		return nil
	}
	return func() (install.AppInfo, error) {
		f, info, err := s.blobs.Open(ctx, buildID, blobs.Artifact(attemptID, name))
		if err != nil {
			return install.AppInfo{}, fmt.Errorf("open %s: %w", name, err)
		}
		defer f.Close()
		return install.ReadAppInfo(f, info.Size)
	}
}
