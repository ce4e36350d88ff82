package appstore

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/install"
	"github.com/freeagent-build/freeagent/internal/bytesize"
	"github.com/freeagent-build/freeagent/internal/config"
)

// Options are a submission's settings, from eas.json's iOS submit profile
// and the submission's own record.
type Options struct {
	// AppID is the app's Apple ID in App Store Connect (ascAppId, digits).
	// "": the app whose bundle identifier is the .ipa's.
	AppID string
	// BundleID is bundleIdentifier: the .ipa's CFBundleIdentifier must be
	// this, and so must the App Store Connect app's ("": the .ipa's).
	BundleID string
	// TeamID is appleTeamId, checked for its form only: with an API key the
	// team is the key's own.
	TeamID string
	// Groups are the TestFlight groups (eas.json's "groups", by name) the
	// build is added to once it is ready.
	Groups []string
	// ProcessingTimeout bounds the wait for App Store Connect to process
	// the upload (zero: DefaultProcessingTimeout).
	ProcessingTimeout time.Duration
	// UploadID is the build upload an earlier attempt of this submission
	// created (as RecordUpload heard it): the attempt resumes it, so a
	// submission interrupted by a restart never uploads twice.
	UploadID string
	// RecordUpload, when set, is told the build upload's id once it exists
	// and before any byte of the .ipa is sent, so the caller can keep it
	// for a resumed attempt (UploadID). Its error stops the submission.
	RecordUpload func(ctx context.Context, uploadID string) error
}

// Result is what a submission left in App Store Connect.
type Result struct {
	AppID, UploadID, BuildID  string
	ShortVersion, BuildNumber string
	// State is the build's processing state: VALID, ready for TestFlight.
	State  string
	Groups []string // the TestFlight groups the build was added to
}

// Submit uploads the .ipa at ipaPath to App Store Connect as a build of
// opts.AppID, waits until App Store Connect has processed it (the build is
// VALID, ready for TestFlight) and adds it to opts.Groups. Progress goes
// to log. A transient failure (api.Transient) may be retried by calling
// Submit again with the UploadID RecordUpload heard.
func (c *Client) Submit(ctx context.Context, key Key, ipaPath string, opts Options, log io.Writer) (Result, error) {
	if log == nil {
		log = io.Discard
	}
	signer, err := key.signer()
	if err != nil {
		return Result{}, err
	}
	if err := errors.Join(checkAppID(opts.AppID), checkTeamID(opts.TeamID)); err != nil {
		return Result{}, err
	}
	ipa, err := openIPA(ipaPath)
	if err != nil {
		return Result{}, err
	}
	defer ipa.f.Close()
	if opts.BundleID != "" && opts.BundleID != ipa.info.BundleID {
		return Result{}, fmt.Errorf("the .ipa is %s but the submit profile's bundleIdentifier is %s: submit the build of %s, or correct bundleIdentifier", ipa.info.BundleID, opts.BundleID, opts.BundleID)
	}
	s := &session{c: c, key: key, signer: signer, log: log}
	res := Result{ShortVersion: ipa.info.ShortVersion, BuildNumber: ipa.info.BuildNumber}
	if res.AppID, err = s.app(ctx, opts.AppID, ipa.info.BundleID); err != nil {
		return res, err
	}
	up, err := s.upload(ctx, res.AppID, ipa, opts.UploadID)
	if err != nil {
		return res, err
	}
	res.UploadID = up.ID
	if opts.RecordUpload != nil && up.ID != opts.UploadID {
		if err := opts.RecordUpload(ctx, up.ID); err != nil {
			return res, fmt.Errorf("record the build upload %s: %w", up.ID, err)
		}
	}
	if up.Attributes.State.State == uploadAwaiting {
		if err := s.sendFile(ctx, up.ID, ipa); err != nil {
			return res, err
		}
	}
	wait, cancel := context.WithTimeoutCause(ctx, config.OrDefault(opts.ProcessingTimeout, DefaultProcessingTimeout), errProcessingTimeout)
	defer cancel()
	if res.BuildID, err = s.awaitUpload(wait, up.ID); err != nil {
		return res, processingTimeout(ctx, wait, err, "the build upload", up.ID)
	}
	if res.State, err = s.awaitBuild(wait, res.BuildID); err != nil {
		return res, processingTimeout(ctx, wait, err, "the build", res.BuildID)
	}
	s.logf("build %s (%s, %s) is ready for TestFlight", res.BuildID, res.ShortVersion, res.BuildNumber)
	if res.Groups, err = s.addToGroups(ctx, res.AppID, res.BuildID, opts.Groups); err != nil {
		return res, err
	}
	return res, nil
}

// errProcessingTimeout is the cause of the processing wait's end. It is a
// deadline, so api.Transient calls it transient: submitting again with
// the upload id follows the same upload further.
var errProcessingTimeout = fmt.Errorf("processing timeout: %w", context.DeadlineExceeded)

// processingTimeout says so when the processing wait, not the caller,
// ended err.
func processingTimeout(ctx, wait context.Context, err error, what, id string) error {
	if ctx.Err() == nil && errors.Is(context.Cause(wait), errProcessingTimeout) {
		return fmt.Errorf("App Store Connect was still processing %s %s when the processing timeout passed; "+
			"submitting again resumes following it (or raise the processing timeout): %w", what, id, errProcessingTimeout)
	}
	return err
}

// ipaFile is the open .ipa and what its Info.plist says.
type ipaFile struct {
	f    *os.File
	name string
	size int64
	info install.AppInfo
}

func openIPA(path string) (ipaFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return ipaFile{}, fmt.Errorf("open the .ipa: %w", err)
	}
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() || st.Size() == 0 {
		f.Close()
		return ipaFile{}, fmt.Errorf("the .ipa %s is not a non-empty file", filepath.Base(path))
	}
	info, err := install.ReadAppInfo(f, st.Size())
	if err != nil {
		f.Close()
		return ipaFile{}, fmt.Errorf("the .ipa %s cannot be submitted: %w", filepath.Base(path), err)
	}
	if info.ShortVersion == "" || info.BuildNumber == "" {
		f.Close()
		return ipaFile{}, fmt.Errorf("the .ipa's Info.plist lacks CFBundleShortVersionString or CFBundleVersion, which App Store Connect takes an upload by: set expo.version and expo.ios.buildNumber and build again")
	}
	return ipaFile{f: f, name: filepath.Base(path), size: st.Size(), info: info}, nil
}

// app finds the App Store Connect app: by its id, checking that its bundle
// identifier is the .ipa's, or by the .ipa's bundle identifier.
func (s *session) app(ctx context.Context, appID, bundleID string) (string, error) {
	if appID == "" {
		var apps many[app]
		if err := s.call(ctx, "find the app of bundle identifier "+bundleID, http.MethodGet,
			query("/v1/apps", "filter[bundleId]", bundleID, "limit", "2"), nil, &apps); err != nil {
			return "", err
		}
		for _, a := range apps.Data {
			if a.Attributes.BundleID == bundleID {
				s.logf("app %s (%s) is %s", a.ID, a.Attributes.Name, bundleID)
				return a.ID, nil
			}
		}
		return "", fmt.Errorf("App Store Connect has no app with the bundle identifier %s that this API key's team can see: create the app in App Store Connect (Apps → New App) or set ascAppId in the submit profile", bundleID)
	}
	var a one[app]
	err := s.call(ctx, "read the app "+appID, http.MethodGet, "/v1/apps/"+url.PathEscape(appID), nil, &a)
	if e := asError(err); e != nil && e.Status == http.StatusNotFound {
		e.Fix = fmt.Sprintf("ascAppId %s is not an app this API key's team can see: set ascAppId to the app's Apple ID (App Store Connect → the app → App Information), and check the key's team", appID)
	}
	if err != nil {
		return "", err
	}
	if got := a.Data.Attributes.BundleID; got != bundleID {
		return "", fmt.Errorf("ascAppId %s is the app %s in App Store Connect, but the .ipa is %s: set ascAppId to the app of %s", appID, got, bundleID, bundleID)
	}
	return appID, nil
}

// upload is the build upload for the .ipa's version: the one named by
// resumeID, else an unfinished one App Store Connect already has for the
// same version (an earlier attempt that ended before it could record the
// id), else a new one.
func (s *session) upload(ctx context.Context, appID string, ipa ipaFile, resumeID string) (buildUpload, error) {
	v := ipa.info
	if resumeID != "" {
		var up one[buildUpload]
		err := s.call(ctx, "read the build upload "+resumeID, http.MethodGet, "/v1/buildUploads/"+url.PathEscape(resumeID), nil, &up)
		if e := asError(err); e != nil && e.Status == http.StatusNotFound {
			e.Fix = "the build upload an earlier attempt of this submission made is gone (deleted in App Store Connect?): submit again as a new submission"
		}
		if err != nil {
			return buildUpload{}, err
		}
		a := up.Data.Attributes
		if a.ShortVersion != v.ShortVersion || a.BuildNumber != v.BuildNumber {
			return buildUpload{}, fmt.Errorf("the build upload %s being resumed is version %s (%s), but the .ipa is %s (%s): submit the .ipa as a new submission", resumeID, a.ShortVersion, a.BuildNumber, v.ShortVersion, v.BuildNumber)
		}
		if a.State.State == uploadFailed {
			return buildUpload{}, &ProcessingError{What: "the build upload " + resumeID, State: uploadFailed, Errors: a.State.Errors}
		}
		s.logf("resuming build upload %s (%s)", resumeID, a.State.State)
		return up.Data, nil
	}
	const op = "create the build upload"
	var created buildUpload
	err := s.retry(ctx, op, func(ctx context.Context) error {
		// Looked for first on every try: a create whose answer was lost
		// must not become two uploads.
		var existing many[buildUpload]
		if err := s.callOnce(ctx, "list the app's build uploads", http.MethodGet, query("/v1/apps/"+url.PathEscape(appID)+"/buildUploads",
			"filter[cfBundleShortVersionString]", v.ShortVersion, "filter[cfBundleVersion]", v.BuildNumber,
			"filter[platform]", "IOS", "filter[state]", uploadAwaiting), nil, &existing); err != nil {
			return err
		}
		for _, u := range existing.Data {
			a := u.Attributes
			if a.ShortVersion == v.ShortVersion && a.BuildNumber == v.BuildNumber && a.State.State == uploadAwaiting {
				s.logf("continuing the unfinished build upload %s of %s (%s)", u.ID, v.ShortVersion, v.BuildNumber)
				created = u
				return nil
			}
		}
		var req buildUploadCreate
		req.Data.Type = "buildUploads"
		req.Data.Attributes.ShortVersion = v.ShortVersion
		req.Data.Attributes.BuildNumber = v.BuildNumber
		req.Data.Attributes.Platform = "IOS"
		req.Data.Relationships.App.Data = &linkage{Type: "apps", ID: appID}
		body, err := jsonBody(req)
		if err != nil {
			return err
		}
		var up one[buildUpload]
		if err := s.callOnce(ctx, op, http.MethodPost, "/v1/buildUploads", body, &up); err != nil {
			return err
		}
		created = up.Data
		s.logf("created build upload %s for %s %s (%s)", created.ID, v.BundleID, v.ShortVersion, v.BuildNumber)
		return nil
	})
	if e := asError(err); e != nil && e.Status == http.StatusConflict {
		e.Fix = fmt.Sprintf("App Store Connect already has build %s of version %s: raise the build number (expo.ios.buildNumber, or \"autoIncrement\" in eas.json's build profile), build again and submit the new build", v.BuildNumber, v.ShortVersion)
	}
	return created, err
}

// sendFile uploads the .ipa into the build upload: the build upload file
// (found, or created), each upload operation's bytes, then the file marked
// uploaded with its SHA-256.
func (s *session) sendFile(ctx context.Context, uploadID string, ipa ipaFile) error {
	file, err := s.uploadFile(ctx, uploadID, ipa)
	if err != nil {
		return err
	}
	switch file.Attributes.DeliveryState.State {
	case fileAwaiting:
	case fileFailed:
		return &ProcessingError{What: "the .ipa's upload", State: fileFailed, Errors: file.Attributes.DeliveryState.Errors}
	default:
		s.logf("the .ipa is already uploaded (%s)", file.Attributes.DeliveryState.State)
		return nil
	}
	ops := file.Attributes.UploadOperations
	if err := s.checkOperations(ops, ipa.size); err != nil {
		return err
	}
	sum, err := fileSHA256(ipa.f, ipa.size)
	if err != nil {
		return err
	}
	for i, op := range ops {
		if err := s.retry(ctx, fmt.Sprintf("upload part %d of %d", i+1, len(ops)), func(ctx context.Context) error {
			return s.putPart(ctx, ipa.f, op, i+1)
		}); err != nil {
			return err
		}
		s.logf("sent part %d of %d (%s)", i+1, len(ops), bytesize.IEC(op.Length))
	}
	var req buildUploadFileUpdate
	req.Data.Type = "buildUploadFiles"
	req.Data.ID = file.ID
	req.Data.Attributes.Uploaded = true
	req.Data.Attributes.Checksums.File = checksum{Hash: sum, Algorithm: "SHA_256"}
	if err := s.call(ctx, "commit the .ipa's upload", http.MethodPatch, "/v1/buildUploadFiles/"+url.PathEscape(file.ID), req, nil); err != nil {
		return err
	}
	s.logf("uploaded %s (%s); App Store Connect is processing it", ipa.name, bytesize.IEC(ipa.size))
	return nil
}

// uploadFile is the build upload's .ipa file record: the one an earlier
// attempt created, else a new one.
func (s *session) uploadFile(ctx context.Context, uploadID string, ipa ipaFile) (buildUploadFile, error) {
	const op = "create the .ipa's build upload file"
	var file buildUploadFile
	err := s.retry(ctx, op, func(ctx context.Context) error {
		var files many[buildUploadFile]
		if err := s.callOnce(ctx, "list the build upload's files", http.MethodGet,
			"/v1/buildUploads/"+url.PathEscape(uploadID)+"/buildUploadFiles", nil, &files); err != nil {
			return err
		}
		for _, f := range files.Data {
			if f.Attributes.AssetType != "ASSET" {
				continue
			}
			if f.Attributes.FileSize != ipa.size {
				return fmt.Errorf("the build upload %s already holds an .ipa of %d bytes, not this one of %d: submit this .ipa as a new submission with a higher build number", uploadID, f.Attributes.FileSize, ipa.size)
			}
			file = f
			return nil
		}
		var req buildUploadFileCreate
		req.Data.Type = "buildUploadFiles"
		req.Data.Attributes.AssetType = "ASSET"
		req.Data.Attributes.FileName = ipa.name
		req.Data.Attributes.FileSize = ipa.size
		req.Data.Attributes.UTI = "com.apple.ipa"
		req.Data.Relationships.BuildUpload.Data = &linkage{Type: "buildUploads", ID: uploadID}
		body, err := jsonBody(req)
		if err != nil {
			return err
		}
		var created one[buildUploadFile]
		if err := s.callOnce(ctx, op, http.MethodPost, "/v1/buildUploadFiles", body, &created); err != nil {
			return err
		}
		file = created.Data
		return nil
	})
	return file, err
}

// checkOperations refuses upload operations that do not cover the file
// exactly once, or would send it somewhere other than over TLS (when the
// API itself is reached over TLS) or by another method than PUT/POST.
func (s *session) checkOperations(ops []uploadOperation, size int64) error {
	if len(ops) == 0 {
		return errors.New("App Store Connect gave no upload operations for the .ipa; submit again later")
	}
	sorted := slices.Clone(ops)
	slices.SortFunc(sorted, func(a, b uploadOperation) int { return cmp.Compare(a.Offset, b.Offset) })
	var next int64
	tls := strings.HasPrefix(s.c.baseURL(), "https:")
	for _, op := range sorted {
		u, err := url.Parse(op.URL)
		switch {
		case op.Offset != next || op.Length <= 0 || op.Offset+op.Length > size:
			return fmt.Errorf("App Store Connect's upload operations do not cover the .ipa's %d bytes exactly (part at %d, %d bytes); submit again later", size, op.Offset, op.Length)
		case err != nil || u.Host == "" || (u.Scheme != "https" && (tls || u.Scheme != "http")):
			return fmt.Errorf("App Store Connect gave an upload URL that is not https (part %d); refused", op.PartNumber)
		case op.Method != http.MethodPut && op.Method != http.MethodPost:
			return fmt.Errorf("App Store Connect gave an upload method %q (part %d) the client does not send; refused", op.Method, op.PartNumber)
		}
		next = op.Offset + op.Length
	}
	if next != size {
		return fmt.Errorf("App Store Connect's upload operations cover %d of the .ipa's %d bytes; submit again later", next, size)
	}
	return nil
}

// maxPartAnswer bounds what of an upload URL's answer is read.
const maxPartAnswer = 4 << 10

// putPart sends one upload operation's bytes. The upload URLs are signed
// by App Store Connect: no token goes with them.
func (s *session) putPart(ctx context.Context, f *os.File, op uploadOperation, n int) error {
	ctx, cancel := context.WithTimeout(ctx, config.OrDefault(s.c.PartTimeout, DefaultPartTimeout))
	defer cancel()
	what := fmt.Sprintf("upload part %d", n)
	req, err := http.NewRequestWithContext(ctx, op.Method, op.URL, io.NewSectionReader(f, op.Offset, op.Length))
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	req.ContentLength = op.Length
	for _, h := range op.RequestHeaders {
		if !strings.EqualFold(h.Name, "Content-Length") { // req.ContentLength says it
			req.Header.Set(h.Name, h.Value)
		}
	}
	resp, err := s.c.httpClient().Do(req)
	if err != nil {
		return fmt.Errorf("%s: the upload server did not take it: %w", what, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxPartAnswer))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		e := newError(what, resp.StatusCode, resp.Header, b, s.c.now())
		if op.Expiration != nil && s.c.now().After(*op.Expiration) {
			e.Fix = "the upload URL expired; submit again as a new submission with a higher build number"
		}
		return e
	}
	return nil
}

func fileSHA256(f *os.File, size int64) (string, error) {
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(f, 0, size)); err != nil {
		return "", fmt.Errorf("read the .ipa: %w", err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// awaitUpload follows the build upload until App Store Connect has made
// a build of it, and returns the build's id.
func (s *session) awaitUpload(ctx context.Context, uploadID string) (string, error) {
	last := ""
	for {
		var up one[buildUpload]
		if err := s.call(ctx, "read the build upload "+uploadID, http.MethodGet,
			query("/v1/buildUploads/"+url.PathEscape(uploadID), "include", "build"), nil, &up); err != nil {
			return "", err
		}
		st := up.Data.Attributes.State
		if st.State != last {
			s.logf("build upload %s: %s", uploadID, st.State)
			last = st.State
		}
		for _, w := range st.Warnings {
			s.logf("warning %s: %s", w.Code, w.Description)
		}
		switch st.State {
		case uploadFailed:
			return "", &ProcessingError{What: "the build upload", State: st.State, Errors: st.Errors}
		case uploadComplete:
			if b := up.Data.Relationships.Build.Data; b != nil && b.ID != "" {
				return b.ID, nil
			}
		}
		if err := api.Sleep(ctx, config.OrDefault(s.c.PollInterval, DefaultPollInterval)); err != nil {
			return "", err
		}
	}
}

// awaitBuild follows the build's processing until it ends, and returns
// VALID or a ProcessingError.
func (s *session) awaitBuild(ctx context.Context, buildID string) (string, error) {
	last := ""
	for {
		var b one[build]
		if err := s.call(ctx, "read the build "+buildID, http.MethodGet, "/v1/builds/"+url.PathEscape(buildID), nil, &b); err != nil {
			return "", err
		}
		st := b.Data.Attributes.ProcessingState
		if st != last {
			s.logf("build %s: %s", buildID, st)
			last = st
		}
		switch st {
		case buildValid:
			return st, nil
		case buildFailed, buildInvalid:
			return "", &ProcessingError{What: "the build", State: st}
		}
		if err := api.Sleep(ctx, config.OrDefault(s.c.PollInterval, DefaultPollInterval)); err != nil {
			return "", err
		}
	}
}

// addToGroups adds the build to the app's TestFlight groups named.
func (s *session) addToGroups(ctx context.Context, appID, buildID string, names []string) ([]string, error) {
	if len(names) == 0 {
		return nil, nil
	}
	var groups many[betaGroup]
	if err := s.call(ctx, "list the app's TestFlight groups", http.MethodGet,
		query("/v1/betaGroups", "filter[app]", appID, "limit", "200"), nil, &groups); err != nil {
		return nil, err
	}
	var added []string
	for _, name := range names {
		i := slices.IndexFunc(groups.Data, func(g betaGroup) bool { return g.Attributes.Name == name })
		if i < 0 {
			var have []string
			for _, g := range groups.Data {
				have = append(have, fmt.Sprintf("%q", g.Attributes.Name))
			}
			return added, fmt.Errorf("the app has no TestFlight group %q (it has %s): create the group in App Store Connect → TestFlight, or correct \"groups\" in the submit profile", name, strings.Join(have, ", "))
		}
		req := toMany{Data: []linkage{{Type: "builds", ID: buildID}}}
		if err := s.call(ctx, fmt.Sprintf("add the build to the TestFlight group %q", name), http.MethodPost,
			"/v1/betaGroups/"+url.PathEscape(groups.Data[i].ID)+"/relationships/builds", req, nil); err != nil {
			return added, err
		}
		s.logf("added build %s to the TestFlight group %q", buildID, name)
		added = append(added, name)
	}
	return added, nil
}
