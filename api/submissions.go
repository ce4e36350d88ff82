package api

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// SubmissionStatus is the lifecycle state of a submission to a store.
type SubmissionStatus string

// Submission statuses: queued (waiting for the runner, or for its build to
// complete), in progress (the runner is talking to the store), then
// succeeded or failed with the store's own error text.
const (
	SubmissionQueued     SubmissionStatus = "queued"
	SubmissionInProgress SubmissionStatus = "in_progress"
	SubmissionSucceeded  SubmissionStatus = "succeeded"
	SubmissionFailed     SubmissionStatus = "failed"
)

// Terminal reports whether a submission in status s is over.
func (s SubmissionStatus) Terminal() bool {
	return s == SubmissionSucceeded || s == SubmissionFailed
}

// Android release statuses of eas.json's releaseStatus (Play's track
// release status).
const (
	ReleaseCompleted  = "completed"
	ReleaseDraft      = "draft"
	ReleaseHalted     = "halted"
	ReleaseInProgress = "inProgress"
)

// SubmitProfile is an eas.json submit profile resolved on the developer's
// side for one platform: what the store is told. Paths to key files are
// not in it: the keys travel as SubmitSecrets.
type SubmitProfile struct {
	Name    string                `json:"name"` // the eas.json submit profile it came from
	Android *AndroidSubmitProfile `json:"android,omitempty"`
	IOS     *IOSSubmitProfile     `json:"ios,omitempty"`
}

// AndroidSubmitProfile is eas.json's submit.<profile>.android, defaults
// applied (track internal, releaseStatus completed).
type AndroidSubmitProfile struct {
	// ApplicationID is the Play package name (eas.json applicationId, else
	// the app config's android.package).
	ApplicationID           string   `json:"application_id"`
	Track                   string   `json:"track"`
	ReleaseStatus           string   `json:"release_status"`
	Rollout                 *float64 `json:"rollout,omitempty"` // with releaseStatus inProgress: the user fraction, 0 to 1
	ChangesNotSentForReview bool     `json:"changes_not_sent_for_review,omitempty"`
}

// IOSSubmitProfile is eas.json's submit.<profile>.ios, as App Store
// Connect's API key submission uses it.
type IOSSubmitProfile struct {
	AscAppID         string   `json:"asc_app_id"`
	BundleIdentifier string   `json:"bundle_identifier,omitempty"`
	AppleTeamID      string   `json:"apple_team_id,omitempty"`
	Groups           []string `json:"groups,omitempty"`
}

// SubmitSecrets are the keys a submission signs in to the store with,
// given for one submission (from the paths in eas.json); the controller
// seals them for that submission alone and drops them when it ends.
type SubmitSecrets struct {
	// ServiceAccountKey is the Google service account's JSON key file.
	ServiceAccountKey []byte `json:"service_account_key,omitempty"`
	// ASCAPIKey is an App Store Connect API key.
	ASCAPIKey *ASCAPIKey `json:"asc_api_key,omitempty"`
}

// ASCAPIKey is an App Store Connect API key: its issuer, its id and the
// .p8 private key (PEM).
type ASCAPIKey struct {
	IssuerID   string `json:"issuer_id"`
	KeyID      string `json:"key_id"`
	PrivateKey []byte `json:"private_key"`
}

// SubmissionRequest is the body of POST /api/submissions, and the
// auto-submit part of a build submit (field "auto_submit", BuildID empty:
// the build being submitted).
type SubmissionRequest struct {
	Platform string        `json:"platform"`
	BuildID  string        `json:"build_id,omitempty"`
	Profile  SubmitProfile `json:"profile"`
	// Secrets, when set, are used for this submission only; otherwise the
	// project's submit credential CredentialName (default "default").
	Secrets        *SubmitSecrets `json:"secrets,omitempty"`
	CredentialName string         `json:"credential_name,omitempty"`
}

// SubmissionResult is what the store accepted.
type SubmissionResult struct {
	Store       string `json:"store"` // "google_play" or "app_store_connect"
	Track       string `json:"track,omitempty"`
	VersionCode int64  `json:"version_code,omitempty"`
	EditID      string `json:"edit_id,omitempty"`
	// App Store Connect: the build's number, its processing state (VALID:
	// ready for TestFlight) and the TestFlight groups it was added to.
	BuildNumber     string   `json:"build_number,omitempty"`
	ProcessingState string   `json:"processing_state,omitempty"`
	Groups          []string `json:"groups,omitempty"`
	// Resumed: an interrupted try had already committed; nothing was sent again.
	Resumed bool `json:"resumed,omitempty"`
}

// Submission is one submission of a build's archive to a store.
type Submission struct {
	ID             string            `json:"id"`
	Project        string            `json:"project"`
	Platform       string            `json:"platform"`
	BuildID        string            `json:"build_id"`
	Status         SubmissionStatus  `json:"status"`
	Profile        SubmitProfile     `json:"profile"`
	CredentialName string            `json:"credential_name,omitempty"` // "" when keys came with the submission
	Attempts       int               `json:"attempts"`
	ErrorMessage   *string           `json:"error_message"`
	Result         *SubmissionResult `json:"result,omitempty"`
	Log            string            `json:"log,omitempty"` // GET /api/submissions/:id only
	CreatedAt      time.Time         `json:"created_at"`
	StartedAt      *time.Time        `json:"started_at"`
	CompletedAt    *time.Time        `json:"completed_at"`
}

// SubmissionList is a page of submissions, newest first.
type SubmissionList struct {
	Submissions []Submission `json:"submissions"`
}

// SubmitCredentialInfo identifies a project's submit credential without
// its secret: the service account's e-mail and key id, or the App Store
// Connect key's issuer and id.
type SubmitCredentialInfo struct {
	Project     string    `json:"project"`
	Platform    string    `json:"platform"`
	Name        string    `json:"name"`
	ClientEmail string    `json:"client_email,omitempty"`
	KeyID       string    `json:"key_id,omitempty"`
	IssuerID    string    `json:"issuer_id,omitempty"`
	CreatedAt   time.Time `json:"created_at"`
}

// SubmitCredentialList lists a project's submit credentials.
type SubmitCredentialList struct {
	Credentials []SubmitCredentialInfo `json:"credentials"`
}

// SubmitToStore queues a submission of a build to its store (developer);
// a build still running is submitted once it completes.
func (c *Client) SubmitToStore(ctx context.Context, req SubmissionRequest) (Submission, error) {
	var out Submission
	return out, c.call(ctx, http.MethodPost, "/api/submissions", req, &out, nil)
}

// GetSubmission returns one submission with its log.
func (c *Client) GetSubmission(ctx context.Context, id string) (Submission, error) {
	var out Submission
	return out, c.call(ctx, http.MethodGet, "/api/submissions/"+url.PathEscape(id), nil, &out, nil)
}

// ListSubmissions lists a build's submissions, newest first.
func (c *Client) ListSubmissions(ctx context.Context, buildID string) (SubmissionList, error) {
	var out SubmissionList
	return out, c.call(ctx, http.MethodGet, "/api/builds/"+url.PathEscape(buildID)+"/submissions", nil, &out, nil)
}

func submitCredentialPath(project, platform, name string) string {
	return projectPath(project) + "/submit-credentials/" + url.PathEscape(platform) + "/" + url.PathEscape(name)
}

// SetSubmitCredential stores (or replaces) a project's key for submitting
// to a store (developer); the answer identifies it without the secret.
func (c *Client) SetSubmitCredential(ctx context.Context, project, platform, name string, s SubmitSecrets) (SubmitCredentialInfo, error) {
	var out SubmitCredentialInfo
	return out, c.call(ctx, http.MethodPut, submitCredentialPath(project, platform, name), s, &out, nil)
}

// ListSubmitCredentials lists a project's submit credentials (developer).
func (c *Client) ListSubmitCredentials(ctx context.Context, project string) (SubmitCredentialList, error) {
	var out SubmitCredentialList
	return out, c.call(ctx, http.MethodGet, projectPath(project)+"/submit-credentials", nil, &out, nil)
}

// DeleteSubmitCredential deletes a project's submit credential (developer).
func (c *Client) DeleteSubmitCredential(ctx context.Context, project, platform, name string) error {
	return c.call(ctx, http.MethodDelete, submitCredentialPath(project, platform, name), nil, nil, nil)
}
