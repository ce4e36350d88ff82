package httpapi

import (
	"archive/zip"
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/blobs"
	"github.com/freeagent-build/freeagent/controller/store"
	"github.com/freeagent-build/freeagent/internal/cachekey"
)

// maxSpec bounds the "spec" field of a submit.
const maxSpec = 64 << 10

// submit queues a build from a streamed multipart body: fields platform,
// profile?, priority?, timeout_seconds?, base_image?, spec? (api.BuildSpec
// JSON); file source (tar.gz or zip); file certs? (zip with one .p12,
// password.txt and profiles); file credentials? (api.BuildCredentials JSON).
func (s *Server) submit(w http.ResponseWriter, r *http.Request, key store.APIKey) {
	if err := s.checkFreeSpace(); err != nil {
		s.fail(w, r, err)
		return
	}
	form, err := newForm(w, r, s.limits.Source+s.limits.Certs+s.limits.Credentials+maxSpec+s.limits.JSONBody, `a "source" file`)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	nb := store.NewBuild{ID: store.NewID(), SubmittedBy: key.ID, IdempotencyKey: r.Header.Get(api.HeaderIdempotencyKey), Priority: 2}
	var source, certs, sealedCreds *blobs.Pending
	var direct *directSource // a source sent to the store itself ("source_upload")
	var spec *api.BuildSpec
	var src sourceTree // what the controller read of the source
	var creds *api.BuildCredentials
	var autoSubmit *api.SubmissionRequest
	committed := false
	defer func() {
		for _, p := range []*blobs.Pending{source, certs, sealedCreds} {
			if p != nil {
				p.Abort()
			}
		}
		if !committed {
			s.blobs.RemoveBuild(context.WithoutCancel(r.Context()), nb.ID) //nolint:errcheck // best effort: nothing else refers to this fresh id
			if direct != nil && direct.format != "" {
				s.blobs.AbortDirectUpload(context.WithoutCancel(r.Context()), direct.ticket.ref()) //nolint:errcheck // best effort: the collector removes what remains
			}
		}
	}()
	fail := func(err error) { s.fail(w, r, err) }
	for {
		part, err := form.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			fail(err)
			return
		}
		switch name := part.FormName(); {
		case name == "source_upload" && part.FileName() == "":
			if source != nil || direct != nil {
				fail(badRequest("more than one source: send a \"source\" file or a \"source_upload\" ticket"))
				return
			}
			ticket, err := readField(part)
			if err != nil {
				fail(err)
				return
			}
			ds, err := s.checkSourceTicket(r, key, strings.TrimSpace(ticket))
			if err != nil {
				fail(err)
				return
			}
			direct = &ds
		case name == "source" && part.FileName() != "":
			if source != nil || direct != nil {
				fail(badRequest("more than one source: send a \"source\" file or a \"source_upload\" ticket"))
				return
			}
			br := bufio.NewReaderSize(part, 16) // for the sniff; larger reads bypass the buffer
			if nb.SourceFormat, err = sniffArchive(br); err != nil {
				fail(err)
				return
			}
			if source, err = s.blobs.Create(r.Context(), nb.ID, blobs.Source); err != nil {
				fail(err)
				return
			}
			if src, err = s.fillSource(source, br, nb.SourceFormat); err != nil {
				fail(err)
				return
			}
		case name == "certs" && part.FileName() != "":
			if certs != nil {
				fail(badRequest("more than one \"certs\" file"))
				return
			}
			raw, err := io.ReadAll(io.LimitReader(part, s.limits.Certs+1))
			if err != nil {
				fail(multipartErr(err))
				return
			}
			if int64(len(raw)) > s.limits.Certs {
				fail(fmt.Errorf("%w: the certs zip exceeds %d bytes", store.ErrTooLarge, s.limits.Certs))
				return
			}
			if _, err := parseCerts(raw); err != nil {
				fail(err)
				return
			}
			if certs, err = s.blobs.PrepareSeal(r.Context(), nb.ID, blobs.Certs, raw); err != nil {
				fail(err)
				return
			}
		case name == "credentials" && part.FileName() != "":
			if creds != nil {
				fail(badRequest("more than one \"credentials\" file"))
				return
			}
			if creds, err = readCredentials(part, s.limits.Credentials); err != nil {
				fail(err)
				return
			}
		case name == "auto_submit" && part.FileName() != "":
			if autoSubmit != nil {
				fail(badRequest("more than one \"auto_submit\" file"))
				return
			}
			if autoSubmit, err = readAutoSubmit(part, s.limits.JSONBody); err != nil {
				fail(err)
				return
			}
		case name == "spec" && part.FileName() == "":
			if spec != nil {
				fail(badRequest("more than one \"spec\" field"))
				return
			}
			if spec, err = readSpec(part); err != nil {
				fail(err)
				return
			}
		case part.FileName() == "":
			v, err := readField(part)
			if err != nil {
				fail(err)
				return
			}
			if err := applySubmitField(&nb, name, v); err != nil {
				fail(err)
				return
			}
		}
	}
	if nb.Platform == "" {
		fail(fmt.Errorf("%w: field \"platform\" is required (\"ios\" or \"android\")", store.ErrInvalid))
		return
	}
	switch {
	case direct != nil:
		// Checked when its ticket was read; the ticket is bound to this
		// key, and the project is checked below like any other.
		if direct.format == "" && nb.IdempotencyKey == "" {
			fail(fmt.Errorf("%w: nothing was uploaded for the \"source_upload\" ticket, or it was used already: upload the source again", store.ErrConflict))
			return
		}
	case source == nil:
		fail(fmt.Errorf("%w: file \"source\" (the project as .tar.gz or .zip) or a \"source_upload\" ticket is required", store.ErrInvalid))
		return
	default:
		if err := source.Verify(r.Header.Get(api.HeaderChecksum)); err != nil {
			fail(err)
			return
		}
	}
	if spec != nil {
		if err := checkSpec(spec, nb.Platform); err != nil {
			fail(err)
			return
		}
		p := spec.BuildProject()
		if nb.Project != "" && nb.Project != p {
			fail(fmt.Errorf("%w: field \"project\" (%q) differs from the spec's project (%q); send one of them", store.ErrInvalid, nb.Project, p))
			return
		}
		nb.Project = p
		if nb.Profile == "" {
			nb.Profile = spec.ProfileName
		}
	}
	// Before anything of the project is read (its farm keystore).
	if err := projectAllowed(key, nb.Project); err != nil {
		fail(err)
		return
	}
	if autoSubmit != nil {
		if autoSubmit.Platform != nb.Platform {
			fail(fmt.Errorf("%w: file \"auto_submit\" submits an %s build, but this build is %s", store.ErrInvalid, autoSubmit.Platform, nb.Platform))
			return
		}
		ns, err := s.newSubmission(key, nb.Project, nb.ID, *autoSubmit)
		if err != nil {
			fail(fmt.Errorf("--auto-submit: %w", err))
			return
		}
		nb.AutoSubmit = &ns
	}
	if certs != nil && creds != nil {
		fail(fmt.Errorf("%w: both a \"certs\" zip and a \"credentials\" file were sent; send the iOS targets' credentials in one of them (expo-build sends \"credentials\")", store.ErrInvalid))
		return
	}
	if creds, err = s.submitCredentials(r, nb.Platform, spec, creds); err != nil {
		fail(err)
		return
	}
	if creds != nil {
		if sealedCreds, err = s.sealCredentials(r.Context(), nb.ID, creds); err != nil {
			fail(err)
			return
		}
	}
	nb.HasCerts, nb.HasCredentials = certs != nil, creds != nil
	if direct != nil {
		nb.SourceSize, nb.SourceSHA256, nb.SourceFormat = direct.ticket.Size, direct.ticket.SHA256, direct.format
		switch {
		case direct.format == "":
			// A repeat, found by its Idempotency-Key as a duplicate; if
			// it is not one, Commit below refuses it.
			nb.SourceFormat = "tar.gz"
		case direct.format == "tar.gz" && spec != nil:
			if src, err = s.fingerprintUpload(r.Context(), direct.ticket.Key); err != nil {
				fail(err)
				return
			}
		}
	} else {
		nb.SourceSize, nb.SourceSHA256 = source.Size(), source.SHA256()
	}
	nb.SourceFingerprint = src.fingerprint
	if spec != nil {
		if err := farmCaches(spec, src); err != nil {
			fail(err)
			return
		}
		if nb.Spec, err = json.Marshal(spec); err != nil {
			fail(fmt.Errorf("encode the build spec: %w", err))
			return
		}
	}
	if err := preparePending(r.Context(), source, certs, sealedCreds); err != nil {
		fail(err)
		return
	}
	nb.Commit = func() error {
		if direct != nil {
			if direct.format == "" {
				return fmt.Errorf("%w: nothing was uploaded for the \"source_upload\" ticket, or it was used already: upload the source again", store.ErrConflict)
			}
			if err := s.blobs.PromoteUpload(r.Context(), direct.ticket.Key, nb.ID, blobs.Source); err != nil {
				return err
			}
		}
		for _, p := range []*blobs.Pending{source, certs, sealedCreds} {
			if p != nil {
				if err := p.Commit(r.Context()); err != nil {
					return err
				}
			}
		}
		return nil
	}
	sub, err := s.store.Submit(r.Context(), nb)
	if err != nil {
		fail(err)
		return
	}
	committed = !sub.Duplicate
	if committed && sub.Build.SourceFingerprintMismatch && s.log != nil {
		s.log.WithFields(logrus.Fields{"build": sub.Build.ID, "key": key.ID, "project": nb.Project,
			"declared_source_fingerprint": spec.SourceFingerprint, "source_fingerprint": nb.SourceFingerprint}).
			Warn("submit: the spec declares a source fingerprint that is not its source's; the build will never be reused")
	}
	status := http.StatusCreated
	if sub.Duplicate {
		status = http.StatusOK
	}
	writeJSON(w, status, submitResponse(sub))
}

// submitResponse answers a submit or a retry.
func submitResponse(sub store.Submitted) api.SubmitResponse {
	out := api.SubmitResponse{ID: sub.Build.ID, Status: sub.Build.Status, AccessToken: sub.Token,
		AccessTokenExpiresAt: sub.TokenExpiresAt, SubmittedAt: sub.Build.SubmittedAt, QueuePosition: sub.Build.QueuePosition}
	if sub.Build.Spec != nil {
		out.Versions = sub.Build.Spec.Versions
	}
	return out
}

func applySubmitField(nb *store.NewBuild, name, v string) error {
	v = strings.TrimSpace(v)
	switch name {
	case "platform":
		nb.Platform = strings.ToLower(v)
		return store.ValidatePlatform(nb.Platform)
	case "profile":
		nb.Profile = v
	case "base_image":
		nb.BaseImage = v
	case "project":
		if v != "" {
			if err := validProject(`field "project"`, v); err != nil {
				return err
			}
		}
		nb.Project = v
	case "priority":
		p, err := strconv.Atoi(v)
		if err != nil || p < 0 || p > 3 {
			return fmt.Errorf("%w: field \"priority\" must be 0 (highest) to 3, got %q", store.ErrInvalid, v)
		}
		nb.Priority = p
	case "timeout_seconds":
		t, err := strconv.Atoi(v)
		if err != nil || t < 60 || t > 24*3600 {
			return fmt.Errorf("%w: field \"timeout_seconds\" must be between 60 and 86400, got %q", store.ErrInvalid, v)
		}
		nb.Timeout = time.Duration(t) * time.Second
	}
	return nil // unknown fields are ignored
}

// fillSource stores a submitted archive within the source limit, which
// bounds a tar.gz both as sent and as it expands, and returns what it
// learnt of a tar.gz from the bytes as they are stored (nothing for a zip,
// or a stream that is no tar.gz).
func (s *Server) fillSource(p *blobs.Pending, r io.Reader, format string) (sourceTree, error) {
	var err error
	var src sourceTree
	if format != "tar.gz" {
		err = p.Fill(r, s.limits.Source)
	} else {
		g := guardExpansion(r, s.limits.Source, &s.gzips)
		err = p.Fill(g, s.limits.Source)
		var merr error
		if src, merr = g.finish(); merr != nil {
			return sourceTree{}, merr // the expanded size is the cause even when Fill saw it as a failed read
		}
	}
	if err != nil {
		return sourceTree{}, sourceTooLarge(multipartErr(err), s.limits.Source)
	}
	return src, nil
}

// farmCaches replaces the caches spec declares with the ones the farm
// computes from the source it received (cachekey, expo-build's
// definition): a key always names the files the build has, so no spec
// files a cache under a key of files it lacks. A source the controller
// could not read (a zip) gets no caches; so does one with more key files
// than it indexes. checkSpec checked the paths.
func farmCaches(spec *api.BuildSpec, src sourceTree) error {
	if src.caches == nil {
		spec.Caches = nil
		return nil
	}
	caches, err := cachekey.Entries(*spec, src.caches)
	switch {
	case errors.Is(err, cachekey.ErrTooManyFiles):
		caches = nil
	case err != nil:
		return fmt.Errorf("%w: field \"spec\": %v", store.ErrInvalid, err)
	}
	spec.Caches = caches
	return nil
}

// sniffArchive tells a gzip (tar.gz) from a zip by their magic numbers.
func sniffArchive(br *bufio.Reader) (string, error) {
	head, err := br.Peek(4)
	switch {
	case len(head) >= 2 && head[0] == 0x1f && head[1] == 0x8b:
		return "tar.gz", nil
	case len(head) == 4 && bytes.Equal(head, []byte("PK\x03\x04")):
		return "zip", nil
	case err != nil && len(head) == 0:
		return "", fmt.Errorf("%w: file \"source\" is empty", store.ErrInvalid)
	}
	return "", fmt.Errorf("%w: file \"source\" is neither a .tar.gz nor a .zip archive", store.ErrInvalid)
}

// A certificates zip is a handful of small files. These bound what parsing
// one may cost, whatever its headers claim: the entries it may list, and
// the bytes actually decompressed from all of them together.
const (
	maxCertsEntries      = 50
	maxCertsUncompressed = 10 << 20
)

// parseCerts validates a certificates zip: exactly one .p12, a password.txt,
// any number of .mobileprovision profiles. It runs on every submit, retry and
// fetch, within maxCertsEntries and maxCertsUncompressed: a zip bomb is an
// ErrInvalid, never a large allocation.
func parseCerts(raw []byte) (api.CertsResponse, error) {
	var out api.CertsResponse
	// zip.NewReader keeps a record for every central directory header it
	// finds, however many the archive's end record announces; each one
	// starts with this signature, so counting them first bounds that too.
	if n := bytes.Count(raw, []byte("PK\x01\x02")); n > maxCertsEntries {
		return out, fmt.Errorf("%w: the certs zip lists %d entries; at most %d are accepted (it needs one .p12, password.txt and the .mobileprovision profiles)", store.ErrInvalid, n, maxCertsEntries)
	}
	zr, err := zip.NewReader(bytes.NewReader(raw), int64(len(raw)))
	if err != nil {
		return out, fmt.Errorf("%w: file \"certs\" is not a zip archive: %v", store.ErrInvalid, err)
	}
	if len(zr.File) > maxCertsEntries {
		return out, fmt.Errorf("%w: the certs zip lists %d entries; at most %d are accepted (it needs one .p12, password.txt and the .mobileprovision profiles)", store.ErrInvalid, len(zr.File), maxCertsEntries)
	}
	budget := int64(maxCertsUncompressed) // bytes still allowed to be decompressed
	var havePassword bool
	for _, f := range zr.File {
		if f.FileInfo().IsDir() {
			continue
		}
		base := path.Base(strings.ReplaceAll(f.Name, "\\", "/"))
		if strings.HasPrefix(base, ".") || strings.HasPrefix(f.Name, "__MACOSX/") {
			continue
		}
		lower := strings.ToLower(base)
		if !strings.HasSuffix(lower, ".p12") && lower != "password.txt" && !strings.HasSuffix(lower, ".mobileprovision") {
			continue // never decompressed
		}
		if f.UncompressedSize64 > uint64(budget) {
			return out, fmt.Errorf("%w: the certs zip holds more than %d MiB once uncompressed (at %s)", store.ErrInvalid, maxCertsUncompressed>>20, base)
		}
		b, err := readZipEntry(f, budget)
		if err != nil {
			return out, fmt.Errorf("%w: cannot read %s in the certs zip: %v", store.ErrInvalid, base, err)
		}
		budget -= int64(len(b))
		switch {
		case strings.HasSuffix(lower, ".p12"):
			if out.P12 != nil {
				return out, fmt.Errorf("%w: the certs zip holds more than one .p12 file; keep exactly one", store.ErrInvalid)
			}
			out.P12 = b
		case lower == "password.txt":
			out.P12Password, havePassword = strings.TrimRight(string(b), "\r\n"), true
		default:
			out.ProvisioningProfiles = append(out.ProvisioningProfiles, b)
		}
	}
	if out.P12 == nil {
		return out, fmt.Errorf("%w: the certs zip has no .p12 file (it needs one .p12, password.txt and the .mobileprovision profiles)", store.ErrInvalid)
	}
	if !havePassword {
		return out, fmt.Errorf("%w: the certs zip has no password.txt holding the .p12's password", store.ErrInvalid)
	}
	if out.ProvisioningProfiles == nil {
		out.ProvisioningProfiles = [][]byte{}
	}
	return out, nil
}

// readZipEntry decompresses one entry, failing once it yields more than
// limit bytes (its header may understate its size). The buffer grows with
// what is actually read, never with what the header claims.
func readZipEntry(f *zip.File, limit int64) ([]byte, error) {
	rc, err := f.Open()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	var buf bytes.Buffer
	n, err := buf.ReadFrom(io.LimitReader(rc, limit+1))
	if err != nil {
		return nil, err
	}
	if n > limit {
		return nil, fmt.Errorf("it decompresses to more than the %d MiB a certs zip may hold", maxCertsUncompressed>>20)
	}
	return buf.Bytes(), nil
}

func (s *Server) listBuilds(w http.ResponseWriter, r *http.Request, k store.APIKey) {
	q := r.URL.Query()
	limit := 0
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 200 {
			s.fail(w, r, fmt.Errorf("%w: parameter \"limit\" must be between 1 and 200", store.ErrInvalid))
			return
		}
		limit = n
	}
	list, err := s.store.ListBuilds(r.Context(), store.ListFilter{Status: q.Get("status"), Platform: q.Get("platform"),
		WorkerID: q.Get("worker_id"), Project: q.Get("project"), Scope: scope(k), Cursor: q.Get("cursor"), Limit: limit,
		WithSpec: q.Get("include") == "spec"})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, list)
}

func (s *Server) getBuild(w http.ResponseWriter, r *http.Request, b buildAccess) {
	build, err := s.store.GetBuild(r.Context(), b.ID)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.addInstallLink(r, &build)
	writeJSON(w, http.StatusOK, build)
}

// addInstallLink gives a completed build its install page's link, when
// install links are on.
func (s *Server) addInstallLink(r *http.Request, build *api.Build) {
	if s.links == nil || build.Status != api.StatusCompleted {
		return
	}
	// Behind a proxy without --public-url there is no link to give (the
	// QR code endpoint says why).
	if l, err := s.installLinks(r, *build); err == nil {
		u, exp := l.Page(), l.Expires
		build.InstallURL, build.InstallURLExpiresAt = &u, &exp
	}
}

func (s *Server) cancel(w http.ResponseWriter, r *http.Request, b buildAccess) {
	resp, err := s.store.Cancel(r.Context(), b.ID)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if resp.Status.Terminal() {
		s.kick()
	}
	writeJSON(w, http.StatusOK, resp)
}

// retry queues a new build with the same source, settings, spec and (while
// they still exist) certificates and credentials. Both are deleted when a
// build ends, so retrying a signed iOS build needs the certificates again as
// a multipart "certs" file; a remote Android keystore is copied from the
// farm again.
//
// A build token reads and cancels its build but creates no build: a retry
// needs a developer (or admin) API key.
func (s *Server) retry(w http.ResponseWriter, r *http.Request, b buildAccess) {
	sub, err := s.RetryBuild(w, r, b.ID, b.KeyID())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, submitResponse(sub))
}

// RetryBuild queues the retry of build id for the developer or admin key
// keyID; "" (a build token) is refused.
func (s *Server) RetryBuild(w http.ResponseWriter, r *http.Request, id, keyID string) (store.Submitted, error) {
	if keyID == "" {
		return store.Submitted{}, fmt.Errorf("%w: a build token cannot create builds; retry with a developer API key (%s)", store.ErrForbidden, api.HeaderAPIKey)
	}
	src, err := s.store.RetrySource(r.Context(), id)
	if err != nil {
		return store.Submitted{}, err
	}
	if !src.Status.Terminal() {
		return store.Submitted{}, fmt.Errorf("%w: build %s is still %s; cancel it first or wait for it to end", store.ErrConflict, id, src.Status)
	}
	if src.SourceDeleted {
		return store.Submitted{}, fmt.Errorf("%w: the source of build %s was deleted (the controller keeps a source for --retain-sources after its build ends); submit the project again", store.ErrGone, id)
	}
	if err := s.checkFreeSpace(); err != nil {
		return store.Submitted{}, err
	}
	nb := store.NewBuild{ID: store.NewID(), Platform: src.Platform, Profile: src.Profile, Project: src.Project, Priority: src.Priority,
		SubmittedBy: keyID, RetryOf: id, SourceSize: src.SourceSize, SourceSHA256: src.SourceSHA256,
		SourceFormat: src.SourceFormat, SourceFingerprint: src.SourceFingerprint, BaseImage: src.BaseImage, Timeout: src.Timeout,
		HasCerts: src.HadCerts, HasCredentials: src.HadCredentials, Spec: src.Spec}
	committed := false
	var pendings []*blobs.Pending
	defer func() {
		for _, p := range pendings {
			p.Abort()
		}
		if !committed {
			s.blobs.RemoveBuild(context.WithoutCancel(r.Context()), nb.ID) //nolint:errcheck
		}
	}()
	source, err := s.blobs.CopySource(r.Context(), id, nb.ID)
	if err != nil {
		return store.Submitted{}, err
	}
	pendings = append(pendings, source)
	if src.HadCerts {
		certs, err := s.retryCerts(w, r, id, nb.ID, src.CertsDeleted)
		if err != nil {
			return store.Submitted{}, err
		}
		pendings = append(pendings, certs)
	}
	if src.HadCredentials {
		creds, err := s.retryCredentials(r, id, nb.ID, src)
		if err != nil {
			return store.Submitted{}, err
		}
		pendings = append(pendings, creds)
	}
	if err := preparePending(r.Context(), pendings...); err != nil {
		return store.Submitted{}, err
	}
	nb.Commit = func() error {
		for _, p := range pendings {
			if err := p.Commit(r.Context()); err != nil {
				return err
			}
		}
		return nil
	}
	sub, err := s.store.Submit(r.Context(), nb)
	if err != nil {
		return sub, err
	}
	committed = true
	return sub, nil
}

// retryCerts takes the certificates for a retry from the request's "certs"
// file, or from the original build while it still holds them.
func (s *Server) retryCerts(w http.ResponseWriter, r *http.Request, from, to string, deleted bool) (*blobs.Pending, error) {
	if strings.HasPrefix(r.Header.Get("Content-Type"), "multipart/form-data") {
		r.Body = http.MaxBytesReader(w, r.Body, s.limits.Certs+s.limits.JSONBody)
		if err := r.ParseMultipartForm(s.limits.Certs); err != nil {
			return nil, multipartErr(err)
		}
		defer r.MultipartForm.RemoveAll() //nolint:errcheck
		if f, _, err := r.FormFile("certs"); err == nil {
			defer f.Close()
			raw, err := io.ReadAll(io.LimitReader(f, s.limits.Certs))
			if err != nil {
				return nil, multipartErr(err)
			}
			if _, err := parseCerts(raw); err != nil {
				return nil, err
			}
			return s.blobs.PrepareSeal(r.Context(), to, blobs.Certs, raw)
		}
	}
	if !deleted {
		p, err := s.blobs.CopySealed(r.Context(), from, to, blobs.Certs)
		// The file may be gone a moment before the record says so.
		if !errors.Is(err, os.ErrNotExist) {
			return p, err
		}
	}
	return nil, fmt.Errorf("%w: the signing certificates of build %s were deleted when it ended; send them again as the multipart file \"certs\" (expo-build retry --p12 …)", store.ErrConflict, from)
}

// retryCredentials copies the credentials of build from for its retry to:
// from the original while it still holds them, else from the farm when they
// came from there.
func (s *Server) retryCredentials(r *http.Request, from, to string, src store.RetrySource) (*blobs.Pending, error) {
	if !src.CertsDeleted {
		p, err := s.blobs.CopySealed(r.Context(), from, to, blobs.Credentials)
		// The file may be gone a moment before the record says so.
		if !errors.Is(err, os.ErrNotExist) {
			return p, err
		}
	}
	var spec api.BuildSpec
	if src.Spec != nil {
		if err := json.Unmarshal(src.Spec, &spec); err != nil {
			return nil, fmt.Errorf("read the spec of build %s: %w", from, err)
		}
	}
	if spec.Credentials.Source != api.CredentialsRemote || spec.Credentials.Android == nil {
		return nil, fmt.Errorf("%w: the credentials of build %s were deleted when it ended; build again (expo-build build) to send them", store.ErrConflict, from)
	}
	ks, err := s.farmKeystore(r, spec.BuildProject(), spec.Credentials.Android)
	if err != nil {
		return nil, err
	}
	return s.sealCredentials(r.Context(), to, &api.BuildCredentials{Android: ks})
}

func (s *Server) downloadArtifact(w http.ResponseWriter, r *http.Request, b buildAccess) {
	s.ServeArtifact(w, r, b.ID, r.PathValue("name"))
}

// ServeArtifact streams artifact name of build id (Range, ETag).
func (s *Server) ServeArtifact(w http.ResponseWriter, r *http.Request, id, name string) {
	if blobs.CleanName(name) != name {
		s.fail(w, r, fmt.Errorf("%w: build %s has no artifact %q", store.ErrNotFound, id, name))
		return
	}
	a, err := s.store.Artifact(r.Context(), id, name)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.serveFile(w, r, id, blobs.Artifact(a.AttemptID, name), name, "application/octet-stream", a.SHA256)
}

// directTTL is how long a direct download URL works: long enough to start
// the transfer (the service checks it when the request arrives), short
// enough that a leaked link is soon useless. A resumed download asks the
// controller again and gets a fresh one.
const directTTL = 5 * time.Minute

// serveFile streams a stored build file with Range, ETag (its SHA-256) and
// X-Checksum-Sha256 support; when the store hands out direct URLs (S3), a
// GET is answered with a 307 to one instead, carrying the same checksum
// headers, and the client's Range goes with it.
func (s *Server) serveFile(w http.ResponseWriter, r *http.Request, buildID string, file blobs.File, downloadName, contentType, sha256hex string) {
	disposition := fmt.Sprintf("attachment; filename=%q", downloadName)
	if r.Method == http.MethodGet {
		u, err := s.blobs.DirectURL(r.Context(), buildID, file, directTTL, contentType, disposition)
		if err != nil {
			s.fail(w, r, fmt.Errorf("sign a download of %s of build %s: %w", file, buildID, err))
			return
		}
		if u != "" {
			w.Header().Set("ETag", `"`+sha256hex+`"`)
			w.Header().Set(api.HeaderChecksum, sha256hex)
			w.Header().Set("Cache-Control", "no-store") // the URL expires; never cache the redirect
			http.Redirect(w, r, u, http.StatusTemporaryRedirect)
			return
		}
	}
	f, info, err := s.blobs.Open(r.Context(), buildID, file)
	if err != nil {
		s.fail(w, r, fmt.Errorf("open %s of build %s: %w", file, buildID, err))
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("ETag", `"`+sha256hex+`"`)
	w.Header().Set(api.HeaderChecksum, sha256hex)
	w.Header().Set("Content-Disposition", disposition)
	http.ServeContent(w, r, "", info.ModTime, f)
}

// checkFreeSpace refuses new builds (507) while the file store's disk is
// below --min-free-disk, instead of filling it.
func (s *Server) checkFreeSpace() error { return s.blobs.CheckFloor(s.minFree, "--min-free-disk") }

// preparePending makes the files written for a request durable in the
// store before the transaction that commits and records them (nil ones
// are skipped): that transaction then lasts a rename, or a copy inside the
// object store, never an upload.
func preparePending(ctx context.Context, ps ...*blobs.Pending) error {
	for _, p := range ps {
		if p != nil {
			if err := p.Prepare(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}
