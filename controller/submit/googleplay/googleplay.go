// Package googleplay submits Android builds to Google Play through the
// Android Publisher API (Google's maintained Go client), signed in as a
// service account: an edit, the bundle or APK upload (resumable for large
// files), the track's release, then the commit.
package googleplay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"
	"google.golang.org/api/androidpublisher/v3"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/option"

	"github.com/freeagent-build/freeagent/api"
)

// Options point the client at Play and bound it.
type Options struct {
	// Endpoint is the API's root URL; "" is Google's.
	Endpoint string
	// TokenURL is where the service account's signed JWT is exchanged for
	// an access token; "" is Google's. The key file's token_uri is not
	// followed: a key file must not send the controller elsewhere.
	TokenURL string
	// HTTPClient carries every request; nil: http.DefaultClient.
	HTTPClient *http.Client
	// CallTimeout bounds each call but the upload (which the caller's
	// context bounds); 0: DefaultCallTimeout.
	CallTimeout time.Duration
	// ChunkSize is the resumable upload's chunk; 0: the library's (16 MiB).
	// A file larger than one chunk is sent resumably.
	ChunkSize int
	// Retry repeats the calls that failed transiently (5xx, 429, network).
	Retry api.RetryPolicy
}

// DefaultCallTimeout bounds a call to Play that sends no archive.
const DefaultCallTimeout = 2 * time.Minute

// Release is what to publish and where, as eas.json's Android submit
// profile says.
type Release struct {
	PackageName             string
	Track                   string
	ReleaseStatus           string   // completed, draft, halted, inProgress
	Rollout                 *float64 // with inProgress
	ChangesNotSentForReview bool
	// VersionCode is the archive's, when the build knows it: a version code
	// already in a track is refused before the upload. 0: Play decides.
	VersionCode int64
}

// State is what an interrupted submission resumes from.
type State struct {
	EditID string `json:"edit_id,omitempty"`
	// VersionCode is the uploaded archive's, once Play took it.
	VersionCode int64 `json:"version_code,omitempty"`
}

// Result is what Play accepted.
type Result struct {
	EditID      string
	VersionCode int64
	// Resumed: an interrupted try had already committed this release.
	Resumed bool
}

// Client submits to Google Play.
type Client struct{ opts Options }

// New returns a client.
func New(o Options) *Client { return &Client{opts: o} }

// Submit sends the archive at path (.aab or .apk) and releases it. key is
// the service account's JSON key file. state is where an earlier try got
// to; save persists it (the edit id, before anything is uploaded into it)
// so a resumed try never uploads twice to the same edit.
func (c *Client) Submit(ctx context.Context, key []byte, path string, rel Release, state State, save func(context.Context, State) error, log io.Writer) (Result, error) {
	ext := strings.ToLower(filepath.Ext(path))
	if ext != ".aab" && ext != ".apk" {
		return Result{}, fmt.Errorf("%s is not an Android App Bundle (.aab) or APK (.apk): Google Play takes only those", filepath.Base(path))
	}
	svc, account, err := c.service(ctx, key)
	if err != nil {
		return Result{}, err
	}
	if rel.VersionCode == 0 {
		rel.VersionCode = state.VersionCode
	}
	p := &play{c: c, svc: svc, rel: rel, account: account, log: log}
	fmt.Fprintf(log, "Signing in to Google Play as %s for %s\n", account, rel.PackageName)

	uploaded := false
	if state.EditID != "" {
		live, has, err := p.resumeEdit(ctx, state.EditID)
		if err != nil {
			return Result{}, err
		}
		if live {
			fmt.Fprintf(log, "Resuming edit %s (the bundle is %s)\n", state.EditID, map[bool]string{true: "already uploaded", false: "not uploaded yet"}[has])
			uploaded = has
		} else {
			fmt.Fprintf(log, "Edit %s of an interrupted try is gone (committed or expired)\n", state.EditID)
		}
		if !live {
			if done, err := p.alreadyReleased(ctx); err != nil || done {
				return Result{EditID: state.EditID, VersionCode: rel.VersionCode, Resumed: done}, err
			}
			state.EditID = ""
		}
	}
	if state.EditID == "" {
		var e *androidpublisher.AppEdit
		if err := p.call(ctx, "open an edit", func(ctx context.Context) (err error) {
			e, err = svc.Edits.Insert(rel.PackageName, &androidpublisher.AppEdit{}).Context(ctx).Do()
			return err
		}); err != nil {
			return Result{}, err
		}
		state.EditID = e.Id
		// Recorded before anything goes into the edit: a try that is
		// interrupted from here on resumes this edit.
		if err := save(ctx, state); err != nil {
			return Result{}, fmt.Errorf("record the edit before uploading into it: %w", err)
		}
		fmt.Fprintf(log, "Opened edit %s\n", e.Id)
		if err := p.checkVersionCode(ctx, e.Id); err != nil {
			return Result{}, err
		}
	}
	vc := p.rel.VersionCode
	if !uploaded {
		if vc, err = p.upload(ctx, state.EditID, path, ext); err != nil {
			return Result{}, err
		}
		state.VersionCode = vc
		if err := save(ctx, state); err != nil {
			return Result{}, fmt.Errorf("record the upload: %w", err)
		}
	}
	r := &androidpublisher.TrackRelease{VersionCodes: []int64{vc}, Status: rel.ReleaseStatus}
	if rel.Rollout != nil {
		r.UserFraction = *rel.Rollout
	}
	if err := p.call(ctx, "update track "+rel.Track, func(ctx context.Context) error {
		_, err := svc.Edits.Tracks.Update(rel.PackageName, state.EditID, rel.Track,
			&androidpublisher.Track{Track: rel.Track, Releases: []*androidpublisher.TrackRelease{r}}).Context(ctx).Do()
		return err
	}); err != nil {
		return Result{}, err
	}
	fmt.Fprintf(log, "Track %s: version code %d, release status %s\n", rel.Track, vc, rel.ReleaseStatus)
	if err := p.call(ctx, "commit the edit", func(ctx context.Context) error {
		_, err := svc.Edits.Commit(rel.PackageName, state.EditID).ChangesNotSentForReview(rel.ChangesNotSentForReview).Context(ctx).Do()
		return err
	}); err != nil {
		return Result{}, err
	}
	fmt.Fprintf(log, "Committed edit %s: version code %d is in track %s of %s\n", state.EditID, vc, rel.Track, rel.PackageName)
	return Result{EditID: state.EditID, VersionCode: vc}, nil
}

// service signs in with the service account's key.
func (c *Client) service(ctx context.Context, key []byte) (*androidpublisher.Service, string, error) {
	conf, err := google.JWTConfigFromJSON(key, androidpublisher.AndroidpublisherScope)
	if err != nil || conf.Email == "" {
		if err == nil {
			err = errors.New("it names no client_email")
		}
		return nil, "", fmt.Errorf("the Google service account key is not a service account's JSON key file (%v): download a JSON key of the service account from the Google Cloud console (IAM, Service accounts, Keys)", err)
	}
	conf.TokenURL = google.JWTTokenURL
	if c.opts.TokenURL != "" {
		conf.TokenURL = c.opts.TokenURL
	}
	base := c.opts.HTTPClient
	if base == nil {
		base = http.DefaultClient
	}
	hc := conf.Client(context.WithValue(ctx, oauth2.HTTPClient, base))
	opts := []option.ClientOption{option.WithHTTPClient(hc)}
	if c.opts.Endpoint != "" {
		opts = append(opts, option.WithEndpoint(c.opts.Endpoint))
	}
	svc, err := androidpublisher.NewService(ctx, opts...)
	if err != nil {
		return nil, "", fmt.Errorf("set up the Android Publisher client: %w", err)
	}
	return svc, conf.Email, nil
}

type play struct {
	c       *Client
	svc     *androidpublisher.Service
	rel     Release
	account string
	log     io.Writer
}

// call runs one API call under the retry policy, each try within
// CallTimeout, and explains its failure.
func (p *play) call(ctx context.Context, what string, fn func(context.Context) error) error {
	if err := p.try(ctx, what, true, fn); err != nil {
		return p.explain(what, err)
	}
	return nil
}

// try is call without the explanation; bounded: each try within CallTimeout.
func (p *play) try(ctx context.Context, what string, bounded bool, fn func(context.Context) error) error {
	policy := p.c.opts.Retry
	policy.Retryable = transient
	policy.OnRetry = func(err error, attempt int, wait time.Duration) {
		fmt.Fprintf(p.log, "Google Play (%s) failed (%v); try %d again in %s\n", what, err, attempt+1, wait.Round(time.Millisecond))
	}
	timeout := p.c.opts.CallTimeout
	if timeout <= 0 {
		timeout = DefaultCallTimeout
	}
	return api.Retry(ctx, policy, func(ctx context.Context) error {
		if bounded {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, timeout)
			defer cancel()
		}
		return fn(ctx)
	})
}

// resumeEdit tells whether an interrupted try's edit can still be used and
// whether the archive is already in it.
func (p *play) resumeEdit(ctx context.Context, id string) (live, uploaded bool, err error) {
	const what = "read the edit of the interrupted try"
	err = p.try(ctx, what, true, func(ctx context.Context) error {
		_, err := p.svc.Edits.Get(p.rel.PackageName, id).Context(ctx).Do()
		return err
	})
	var ge *googleapi.Error
	if errors.As(err, &ge) && (ge.Code == http.StatusNotFound || ge.Code == http.StatusBadRequest) {
		return false, false, nil
	}
	if err != nil {
		return false, false, p.explain(what, err)
	}
	uploaded, err = p.inEdit(ctx, id)
	return true, uploaded, err
}

// inEdit reports whether the archive is uploaded into the edit: its
// version code, or, when that is unknown, any (the runner puts one archive
// in each edit it opens).
func (p *play) inEdit(ctx context.Context, id string) (bool, error) {
	var codes []int64
	err := p.call(ctx, "list the edit's bundles", func(ctx context.Context) error {
		codes = codes[:0]
		b, err := p.svc.Edits.Bundles.List(p.rel.PackageName, id).Context(ctx).Do()
		if err != nil {
			return err
		}
		for _, x := range b.Bundles {
			codes = append(codes, x.VersionCode)
		}
		a, err := p.svc.Edits.Apks.List(p.rel.PackageName, id).Context(ctx).Do()
		var ge *googleapi.Error
		if errors.As(err, &ge) && ge.Code == http.StatusNotFound {
			return nil // a server without APK listing
		}
		if err != nil {
			return err
		}
		for _, x := range a.Apks {
			codes = append(codes, x.VersionCode)
		}
		return nil
	})
	if err != nil {
		return false, err
	}
	if p.rel.VersionCode == 0 && len(codes) > 0 {
		p.rel.VersionCode = codes[0]
	}
	return slices.Contains(codes, p.rel.VersionCode), nil
}

// tracksWith returns the tracks of edit id that hold the release's version code.
func (p *play) tracksWith(ctx context.Context, id string) ([]string, error) {
	var found []string
	err := p.call(ctx, "read the tracks", func(ctx context.Context) error {
		found = found[:0]
		l, err := p.svc.Edits.Tracks.List(p.rel.PackageName, id).Context(ctx).Do()
		if err != nil {
			return err
		}
		for _, t := range l.Tracks {
			for _, r := range t.Releases {
				if slices.Contains(r.VersionCodes, p.rel.VersionCode) {
					found = append(found, t.Track)
				}
			}
		}
		return nil
	})
	return found, err
}

// checkVersionCode refuses, before the upload, a version code already in
// a track: Play would refuse the upload.
func (p *play) checkVersionCode(ctx context.Context, id string) error {
	if p.rel.VersionCode == 0 {
		return nil
	}
	tracks, err := p.tracksWith(ctx, id)
	if err != nil || len(tracks) == 0 {
		return err
	}
	return fmt.Errorf("Google Play: Version code %d has already been used (it is in track %s of %s): Play takes each version code once; raise versionCode (autoIncrement in eas.json's build profile, or expo-build build:version:set with the remote version source) and build again",
		p.rel.VersionCode, strings.Join(tracks, ", "), p.rel.PackageName)
}

// alreadyReleased tells, when an interrupted try's edit is gone, whether
// that try committed: the version code is in the target track.
func (p *play) alreadyReleased(ctx context.Context) (bool, error) {
	if p.rel.VersionCode == 0 {
		return false, nil
	}
	var e *androidpublisher.AppEdit
	if err := p.call(ctx, "open an edit to read the tracks", func(ctx context.Context) (err error) {
		e, err = p.svc.Edits.Insert(p.rel.PackageName, &androidpublisher.AppEdit{}).Context(ctx).Do()
		return err
	}); err != nil {
		return false, err
	}
	tracks, err := p.tracksWith(ctx, e.Id)
	if err != nil {
		return false, err
	}
	// A read-only edit is dropped; Play expires it anyway.
	_ = p.svc.Edits.Delete(p.rel.PackageName, e.Id).Context(ctx).Do()
	if slices.Contains(tracks, p.rel.Track) {
		fmt.Fprintf(p.log, "Version code %d is already in track %s: the interrupted try committed it; nothing is sent again\n", p.rel.VersionCode, p.rel.Track)
		return true, nil
	}
	return false, nil
}

// upload sends the archive into the edit and returns its version code.
// Before a repeat after a failure, the edit is asked whether the archive
// arrived after all, so it never goes into the edit twice.
func (p *play) upload(ctx context.Context, editID, path, ext string) (int64, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, fmt.Errorf("read the archive: %w", err)
	}
	fmt.Fprintf(p.log, "Uploading %s (%d bytes)\n", filepath.Base(path), fi.Size())
	opts := []googleapi.MediaOption{googleapi.ContentType("application/octet-stream")}
	if p.c.opts.ChunkSize > 0 {
		opts = append(opts, googleapi.ChunkSize(p.c.opts.ChunkSize))
	}
	var vc int64
	tries := 0
	const what = "upload the archive"
	err = p.try(ctx, what, false, func(ctx context.Context) error {
		tries++
		if tries > 1 {
			there, err := p.inEdit(ctx, editID)
			if err != nil || there {
				vc = p.rel.VersionCode
				return err
			}
		}
		f, err := os.Open(path)
		if err != nil {
			return fmt.Errorf("read the archive: %w", err)
		}
		defer f.Close()
		if ext == ".apk" {
			a, err := p.svc.Edits.Apks.Upload(p.rel.PackageName, editID).Media(f, opts...).Context(ctx).Do()
			if err == nil {
				vc = a.VersionCode
			}
			return err
		}
		b, err := p.svc.Edits.Bundles.Upload(p.rel.PackageName, editID).Media(f, opts...).Context(ctx).Do()
		if err == nil {
			vc = b.VersionCode
		}
		return err
	})
	if err != nil {
		return 0, p.explain(what, err)
	}
	fmt.Fprintf(p.log, "Uploaded: version code %d\n", vc)
	return vc, nil
}

// transient reports whether a failed Play call may succeed if repeated.
// The token exchange's refusal reaches here inside a *url.Error, which
// api.Transient would take for network trouble: it is looked at first.
func transient(err error) bool {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		return re.Response != nil && (re.Response.StatusCode >= 500 || re.Response.StatusCode == http.StatusTooManyRequests)
	}
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		return ge.Code >= 500 || ge.Code == http.StatusTooManyRequests || ge.Code == http.StatusRequestTimeout
	}
	return api.Transient(err)
}

// explain turns a failed call into the store's words, the problem and the fix.
func (p *play) explain(what string, err error) error {
	if errors.Is(err, context.Canceled) {
		return err
	}
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		desc := strings.TrimSpace(re.ErrorCode + ": " + re.ErrorDescription)
		if re.ErrorCode == "" {
			desc = strings.TrimSpace(string(re.Body))
		}
		if re.Response != nil && re.Response.StatusCode >= 500 {
			return fmt.Errorf("Google's sign-in answered %d (%s) to every try: Google is having trouble; submit again later", re.Response.StatusCode, desc)
		}
		return fmt.Errorf("Google refused the service account key of %s (%s): the key was deleted or is not this account's; create a new JSON key in the Google Cloud console and set it with `expo-build credentials set --platform android --service-account-key FILE` (or serviceAccountKeyPath in eas.json's submit profile)", p.account, desc)
	}
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		msg := ge.Message
		if msg == "" {
			msg = http.StatusText(ge.Code)
		}
		store := fmt.Sprintf("Google Play (%s, %d): %s", what, ge.Code, msg)
		switch {
		case ge.Code == http.StatusUnauthorized:
			return fmt.Errorf("%s: the service account's access token was refused; check that the Google Play Android Developer API is enabled for the key's Cloud project", store)
		case ge.Code == http.StatusNotFound && strings.HasPrefix(msg, "Package not found"):
			return fmt.Errorf("%s: there is no app %s in the Play Console; create it and upload its first release by hand (Play requires that once), or fix applicationId in eas.json's submit profile", store, p.rel.PackageName)
		case ge.Code == http.StatusForbidden && strings.Contains(msg, "does not have permission"):
			return fmt.Errorf("%s: the service account %s may not release %s; in the Play Console, Users and permissions, invite it with the Release permissions for this app", store, p.account, p.rel.PackageName)
		case strings.Contains(msg, "has already been used"):
			return fmt.Errorf("%s: Play takes each version code once; raise versionCode (autoIncrement in eas.json, or expo-build build:version:set) and build again", store)
		case ge.Code >= 500 || ge.Code == http.StatusTooManyRequests:
			return fmt.Errorf("%s, to every try: Google Play is having trouble; submit again later", store)
		case what == "upload the archive" && ge.Code < 500:
			return fmt.Errorf("%s: Google Play refused the archive; fix what it names and build again", store)
		case strings.HasPrefix(what, "update track"):
			return fmt.Errorf("%s: check track, releaseStatus and rollout in eas.json's submit profile", store)
		}
		return errors.New(store)
	}
	if errors.Is(err, context.DeadlineExceeded) || isTimeout(err) {
		return fmt.Errorf("Google Play did not answer (%s) in time, on every try: submit again later, or check this controller's connection to Google", what)
	}
	return fmt.Errorf("Google Play (%s): %w", what, err)
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// VersionCode parses a build's versionCode ("" or unreadable: 0, unknown).
func VersionCode(s string) int64 {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0
	}
	return n
}
