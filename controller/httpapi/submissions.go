package httpapi

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/store"
)

var (
	// androidPackagePattern is Play's package name: dot-separated Java
	// identifiers, at least two.
	androidPackagePattern = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]*(\.[A-Za-z][A-Za-z0-9_]*)+$`)
	trackPattern          = regexp.MustCompile(`^[A-Za-z0-9_:.-]{1,100}$`)
	ascAppIDPattern       = regexp.MustCompile(`^[0-9]{1,30}$`)
)

// maxSubmitKey bounds a key file given with a submission.
const maxSubmitKey = 64 << 10

// newSubmission checks a submission request (a build's project already
// known and allowed) and seals the keys it brings for it alone.
func (s *Server) newSubmission(key store.APIKey, project, buildID string, req api.SubmissionRequest) (store.NewSubmission, error) {
	ns := store.NewSubmission{ID: store.NewID(), Project: project, Platform: req.Platform, BuildID: buildID, Profile: req.Profile, SubmittedBy: key.ID}
	if s.submissions == nil {
		return ns, fmt.Errorf("%w: this controller does not submit to the stores", store.ErrInvalid)
	}
	if err := store.ValidatePlatform(req.Platform); err != nil {
		return ns, err
	}
	if err := s.submissions.Supports(req.Platform); err != nil {
		return ns, err
	}
	if err := validateSubmitProfile(req.Platform, &ns.Profile); err != nil {
		return ns, err
	}
	if req.Secrets == nil {
		ns.CredentialName = cmp.Or(req.CredentialName, defaultCredentialName)
		return ns, validCredentialName(`field "credential_name"`, ns.CredentialName)
	}
	if err := validateSecrets(req.Platform, "secrets", req.Secrets); err != nil {
		return ns, err
	}
	sealed, err := s.submissions.SealSecrets(ns.ID, *req.Secrets)
	ns.CredentialsSealed = sealed
	return ns, err
}

// validateSubmitProfile checks what eas.json's submit profile says (the
// CLI applied its defaults).
func validateSubmitProfile(platform string, p *api.SubmitProfile) error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: field %q "+format, append([]any{store.ErrInvalid, "profile." + field}, args...)...)
	}
	switch platform {
	case api.PlatformAndroid:
		a := p.Android
		switch {
		case a == nil || p.IOS != nil:
			return bad("android", "is required for an Android submission (and \"profile.ios\" must be absent)")
		case !androidPackagePattern.MatchString(a.ApplicationID):
			return bad("android.application_id", "%q is not an Android package name (com.example.app): set applicationId in eas.json's submit profile or android.package in the app config", a.ApplicationID)
		case !trackPattern.MatchString(a.Track):
			return bad("android.track", "%q is not a track: internal, alpha, beta, production or a custom track's name", a.Track)
		case !slices.Contains([]string{api.ReleaseCompleted, api.ReleaseDraft, api.ReleaseHalted, api.ReleaseInProgress}, a.ReleaseStatus):
			return bad("android.release_status", "must be completed, draft, halted or inProgress, got %q", a.ReleaseStatus)
		case a.ReleaseStatus == api.ReleaseInProgress && (a.Rollout == nil || *a.Rollout <= 0 || *a.Rollout >= 1):
			return bad("android.rollout", "is required with releaseStatus inProgress: the share of users, above 0 and below 1 (0.1 is 10%%)")
		case a.ReleaseStatus != api.ReleaseInProgress && a.Rollout != nil:
			return bad("android.rollout", "is only allowed with releaseStatus inProgress")
		}
	case api.PlatformIOS:
		i := p.IOS
		switch {
		case i == nil || p.Android != nil:
			return bad("ios", "is required for an iOS submission (and \"profile.android\" must be absent)")
		case !ascAppIDPattern.MatchString(i.AscAppID):
			return bad("ios.asc_app_id", "%q is not an App Store Connect app id (digits): set ascAppId in eas.json's submit profile", i.AscAppID)
		}
	}
	return nil
}

// validateSecrets checks keys given with a submission or kept for a project.
func validateSecrets(platform, field string, sec *api.SubmitSecrets) error {
	bad := func(sub, format string, args ...any) error {
		return fmt.Errorf("%w: field %q "+format, append([]any{store.ErrInvalid, field + sub}, args...)...)
	}
	if platform == api.PlatformAndroid {
		k := sec.ServiceAccountKey
		var f struct {
			Type        string `json:"type"`
			ClientEmail string `json:"client_email"`
			PrivateKey  string `json:"private_key"`
		}
		switch {
		case len(k) == 0:
			return bad(".service_account_key", "is required: the Google service account's JSON key file (serviceAccountKeyPath in eas.json)")
		case len(k) > maxSubmitKey:
			return bad(".service_account_key", "is larger than %d bytes: it is not a service account key file", maxSubmitKey)
		case json.Unmarshal(k, &f) != nil || f.Type != "service_account" || f.ClientEmail == "" || f.PrivateKey == "":
			return bad(".service_account_key", "is not a Google service account JSON key (type \"service_account\" with client_email and private_key): download a JSON key from the Google Cloud console, IAM, Service accounts, Keys")
		case sec.ASCAPIKey != nil:
			return bad(".asc_api_key", "is for iOS submissions")
		}
		return nil
	}
	k := sec.ASCAPIKey
	switch {
	case k == nil:
		return bad(".asc_api_key", "is required: the App Store Connect API key (ascApiKeyPath, ascApiKeyId and ascApiKeyIssuerId in eas.json); Apple ID password sign-in is not supported")
	case k.IssuerID == "" || k.KeyID == "" || len(k.PrivateKey) == 0 || len(k.PrivateKey) > maxSubmitKey:
		return bad(".asc_api_key", "needs issuer_id, key_id and the .p8 private_key")
	case len(sec.ServiceAccountKey) > 0:
		return bad(".service_account_key", "is for Android submissions")
	}
	return nil
}

// createSubmission queues a submission of a build to its store.
func (s *Server) createSubmission(w http.ResponseWriter, r *http.Request, k store.APIKey) {
	var req api.SubmissionRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	if !store.ValidID(req.BuildID) {
		s.fail(w, r, fmt.Errorf("%w: field \"build_id\" %q is not a build id; see expo-build build:list", store.ErrInvalid, req.BuildID))
		return
	}
	b, err := s.store.GetBuild(r.Context(), req.BuildID)
	if err == nil {
		err = projectAllowed(k, b.Project)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ns, err := s.newSubmission(k, b.Project, b.ID, req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	sub, err := s.store.CreateSubmission(r.Context(), ns)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.submissions.Kick()
	writeJSON(w, http.StatusCreated, sub)
}

// getSubmission answers one submission with its log.
func (s *Server) getSubmission(w http.ResponseWriter, r *http.Request, k store.APIKey) {
	id := r.PathValue("id")
	if !store.ValidID(id) {
		s.fail(w, r, fmt.Errorf("%w: no submission %q", store.ErrNotFound, id))
		return
	}
	sub, err := s.store.GetSubmission(r.Context(), id)
	if err == nil && projectAllowed(k, sub.Project) != nil {
		err = fmt.Errorf("%w: no submission %q", store.ErrNotFound, id) // as if absent: its project is not this key's
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, sub)
}

// buildSubmissions lists a build's submissions.
func (s *Server) buildSubmissions(w http.ResponseWriter, r *http.Request, b buildAccess) {
	list, err := s.store.BuildSubmissions(r.Context(), b.ID)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if list == nil {
		list = []api.Submission{}
	}
	writeJSON(w, http.StatusOK, api.SubmissionList{Submissions: list})
}

// setSubmitCredential keeps a project's key for submitting, sealed; the
// answer identifies it without the secret.
func (s *Server) setSubmitCredential(w http.ResponseWriter, r *http.Request, k store.APIKey) {
	project, platform, name, ok := s.credentialPath(w, r, k)
	if !ok {
		return
	}
	if s.submissions == nil {
		s.fail(w, r, fmt.Errorf("%w: this controller does not submit to the stores", store.ErrInvalid))
		return
	}
	var sec api.SubmitSecrets
	if err := s.decodeJSON(w, r, &sec); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := validateSecrets(platform, "", &sec); err != nil {
		s.fail(w, r, err)
		return
	}
	info := api.SubmitCredentialInfo{Project: project, Platform: platform, Name: name}
	if platform == api.PlatformAndroid {
		var f struct {
			ClientEmail  string `json:"client_email"`
			PrivateKeyID string `json:"private_key_id"`
		}
		_ = json.Unmarshal(sec.ServiceAccountKey, &f) // validated above
		info.ClientEmail, info.KeyID = f.ClientEmail, f.PrivateKeyID
	} else {
		info.IssuerID, info.KeyID = sec.ASCAPIKey.IssuerID, sec.ASCAPIKey.KeyID
	}
	sealed, err := s.submissions.SealCredential(project, platform, name, sec)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out, err := s.store.SetSubmitCredential(r.Context(), store.SealedSubmitCredential{SubmitCredentialInfo: info, Sealed: sealed})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) listSubmitCredentials(w http.ResponseWriter, r *http.Request, k store.APIKey) {
	project, ok := s.project(w, r, k)
	if !ok {
		return
	}
	list, err := s.store.SubmitCredentials(r.Context(), project)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if list == nil {
		list = []api.SubmitCredentialInfo{}
	}
	writeJSON(w, http.StatusOK, api.SubmitCredentialList{Credentials: list})
}

func (s *Server) deleteSubmitCredential(w http.ResponseWriter, r *http.Request, k store.APIKey) {
	project, platform, name, ok := s.credentialPath(w, r, k)
	if !ok {
		return
	}
	if err := s.store.DeleteSubmitCredential(r.Context(), project, platform, name); err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// readAutoSubmit reads a build submit's "auto_submit" file: the submission
// to queue when the build completes.
func readAutoSubmit(part io.Reader, limit int64) (*api.SubmissionRequest, error) {
	raw, err := io.ReadAll(io.LimitReader(part, limit+1))
	if err != nil {
		return nil, multipartErr(err)
	}
	if int64(len(raw)) > limit {
		return nil, fmt.Errorf("%w: file \"auto_submit\" exceeds %d bytes", store.ErrTooLarge, limit)
	}
	var req api.SubmissionRequest
	if err := json.Unmarshal(raw, &req); err != nil {
		return nil, fmt.Errorf("%w: file \"auto_submit\" is not a submission request (JSON): %v", store.ErrInvalid, err)
	}
	if req.BuildID != "" {
		return nil, fmt.Errorf("%w: file \"auto_submit\" submits the build being submitted: leave \"build_id\" out", store.ErrInvalid)
	}
	return &req, nil
}
