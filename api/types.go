// Package api holds the wire types of the controller's HTTP API and a typed
// client for it. The agent, the CLI, the in-VM bootstrap and the controller's
// own tests all speak through this package, so the contract lives in one place.
package api

import (
	"encoding/json"
	"time"
)

// Header names of the five credentials (docs/design.md, "Credentials").
const (
	HeaderAPIKey         = "X-API-Key"
	HeaderWorkerToken    = "X-Worker-Token"
	HeaderBuildToken     = "X-Build-Token"
	HeaderOTP            = "X-OTP-Token"
	HeaderBuildID        = "X-Build-Id"
	HeaderVMToken        = "X-VM-Token"
	HeaderIdempotencyKey = "Idempotency-Key"
	HeaderChecksum       = "X-Checksum-Sha256"
	HeaderLogLength      = "X-Log-Length"
	HeaderBuildStatus    = "X-Build-Status"
	// HeaderInstallURL carries, beside a QR code image, the link it encodes.
	HeaderInstallURL = "X-Install-Url"
)

// Roles of API keys.
const (
	RoleAdmin     = "admin"
	RoleDeveloper = "developer"
	RoleWorker    = "worker"
)

// Platforms a build can target.
const (
	PlatformIOS     = "ios"
	PlatformAndroid = "android"
)

// BuildStatus is the lifecycle state of a build:
// pending → assigned → building → completed | failed | cancelled.
type BuildStatus string

const (
	StatusPending   BuildStatus = "pending"
	StatusAssigned  BuildStatus = "assigned"
	StatusBuilding  BuildStatus = "building"
	StatusCompleted BuildStatus = "completed"
	StatusFailed    BuildStatus = "failed"
	StatusCancelled BuildStatus = "cancelled"
)

// Terminal reports whether no further transition can happen.
func (s BuildStatus) Terminal() bool {
	return s == StatusCompleted || s == StatusFailed || s == StatusCancelled
}

// CodeInsufficientStorage (HTTP 507): the controller's disk is below its
// free-space floor (--min-free-disk); it takes no new builds until files
// are deleted.
const CodeInsufficientStorage = "insufficient_storage"

// Machine-readable error codes carried in ErrorResponse.Code and in a failed
// build's error_code.
const (
	CodeBadRequest   = "bad_request"
	CodeInvalidField = "invalid_field"
	CodeUnauthorized = "unauthorized"
	CodeForbidden    = "forbidden"
	CodeNotFound     = "not_found"
	CodeConflict     = "conflict"
	CodeGone         = "gone"         // a once-per-attempt file (certificates, credentials, secrets) already fetched; an expired artifact, source or log
	CodeRateLimited  = "rate_limited" // 429: retry after the Retry-After header's seconds
	CodeLeaseLost    = "lease_lost"
	CodeTooLarge     = "too_large"
	CodeChecksum     = "checksum_mismatch"
	CodeOffsetAhead  = "offset_beyond_length"
	CodeInternal     = "internal"
	CodeMaxAttempts  = "max_attempts"
	CodeTimeout      = "timeout"
	CodeCancelled    = "cancelled"
	CodeBuildFailed  = "build_failed"
	// CodeReleased in a worker's failed result hands the build back (a
	// drain): it is requeued at once without consuming an attempt.
	CodeReleased = "released"
)

// ErrorResponse is the body of every 4xx/5xx answer.
type ErrorResponse struct {
	Error string `json:"error"`
	Code  string `json:"code"`
	// Length is set on 416 answers to a log append: the log's current length.
	Length *int64 `json:"length,omitempty"`
	// Budget is set on 429 answers: the request budget spent, "worker"
	// (the worker protocol, per worker), "api_key" (any other request, per
	// key) or "address" (failed authentications, per client address).
	Budget string `json:"budget,omitempty"`
}

// Capabilities describe what a worker host can build.
type Capabilities struct {
	Platforms           []string          `json:"platforms"`
	MaxConcurrentBuilds int               `json:"max_concurrent_builds"`
	CPUCores            int               `json:"cpu_cores,omitempty"`
	MemoryGB            int               `json:"memory_gb,omitempty"`
	XcodeVersion        string            `json:"xcode_version,omitempty"`
	TartVersion         string            `json:"tart_version,omitempty"`
	Labels              map[string]string `json:"labels,omitempty"`
	// Pool is the worker pool the owner put the worker in (`freeagent run
	// --pool`; "" is "default"). A project lists the pools its builds may
	// use; whether a pool is trusted with credentials is an admin's word
	// (PUT /api/pools/{name}), never the worker's.
	Pool string `json:"pool,omitempty"`
	// VMDriver is how the worker isolates builds: "tart" (a fresh VM per
	// build) or "local" (a plain process on the host). Credentialed builds
	// never go to a local-driver worker unless its pool allows it.
	VMDriver string `json:"vm_driver,omitempty"`
	// MacOSVersion is the host's macOS version, when it is a Mac.
	MacOSVersion string `json:"macos_version,omitempty"`
	// Image names what builds run in: the Tart VM template or OCI image
	// (`freeagent run --template`), or "local" for the local driver. An
	// eas.json image naming it selects this worker (see Requirements).
	Image string `json:"image,omitempty"`
	// Tools are the build tools builds find, by eas.json key (node, yarn,
	// pnpm, bun, cocoapods, bundler, fastlane, ndk), each with every
	// version installed, newest first: the template's as
	// scripts/build-vm-template.sh probed them, or the host's for the
	// local driver. CPUCores, MemoryGB and XcodeVersion are what a build
	// gets too (the VM's size, the template's Xcode).
	Tools map[string][]string `json:"tools,omitempty"`
}

// Offer is what one online worker offers builds (GET /api/farm/offers):
// its capabilities without its identity.
type Offer struct {
	Platforms    []string            `json:"platforms"`
	CPUCores     int                 `json:"cpu_cores,omitempty"`
	MemoryGB     int                 `json:"memory_gb,omitempty"`
	XcodeVersion string              `json:"xcode_version,omitempty"`
	Image        string              `json:"image,omitempty"`
	Tools        map[string][]string `json:"tools,omitempty"`
	// Workers counts the online workers that offer exactly this.
	Workers int `json:"workers"`
}

// FarmOffers answers GET /api/farm/offers[?project=P]: what the online
// workers offer (those of the pools project P may use), so expo-build
// refuses a resourceClass, image or tool pin no worker can serve before
// it uploads anything.
type FarmOffers struct {
	Offers []Offer `json:"offers"`
}

// Capabilities is the offer as the capabilities Requirements are
// checked against.
func (o Offer) Capabilities() Capabilities {
	return Capabilities{Platforms: o.Platforms, CPUCores: o.CPUCores, MemoryGB: o.MemoryGB, XcodeVersion: o.XcodeVersion,
		Image: o.Image, Tools: o.Tools}
}

// DefaultPool is the pool of a worker that names none.
const DefaultPool = "default"

// VMDriverLocal is the driver that runs builds as plain host processes.
const VMDriverLocal = "local"

// Pool is what an admin says about a pool of workers (GET /api/pools,
// PUT /api/pools/{name}).
type Pool struct {
	Name string `json:"name"`
	// Trusted pools run builds that carry signing credentials or sensitive
	// or secret variables; others never get them.
	Trusted bool `json:"trusted"`
	// AllowLocal lets credentialed builds run on the pool's local-driver
	// workers (no VM between the build and the host). Default: never.
	AllowLocal bool `json:"allow_local"`
	// OnlineWorkers counts the pool's workers in contact now (read only).
	OnlineWorkers int `json:"online_workers"`
	// Workers are the workers registered in the pool, in the answer to
	// PUT /api/pools/{name}: trusting a pool shows which of them it trusts
	// (PoolAdmitted) and which it does not.
	Workers []Worker `json:"workers,omitempty"`
}

// QueuedBuild is a pending build in claim order and why it waits.
type QueuedBuild struct {
	ID          string    `json:"id"`
	Platform    string    `json:"platform"`
	Profile     string    `json:"profile"`
	Project     string    `json:"project"`
	Priority    int       `json:"priority"`
	Position    int       `json:"position"` // on the whole farm's queue; 1 is claimed next
	Attempts    int       `json:"attempts"`
	SubmittedAt time.Time `json:"submitted_at"`
	// Reason says why it waits, e.g. `no trusted worker for project "x"
	// online` for a build with credentials that no online worker may run.
	Reason string `json:"reason"`
}

// Queue answers GET /api/queue: the pending builds the key may see, a page
// at a time (next_cursor), with the farm's total.
type Queue struct {
	Builds     []QueuedBuild `json:"builds"`
	Pending    int           `json:"pending"`
	NextCursor string        `json:"next_cursor,omitempty"`
}

// PoolList answers GET /api/pools.
type PoolList struct {
	Pools []Pool `json:"pools"`
}

// ProjectPools is the body and answer of GET/PUT
// /api/projects/{project}/pools: the pools the project's builds may use;
// empty: any pool.
type ProjectPools struct {
	Project string   `json:"project"`
	Pools   []string `json:"pools"`
}

// RegisterRequest is the body of POST /api/workers/register.
type RegisterRequest struct {
	ID           string       `json:"id,omitempty"`
	Name         string       `json:"name"`
	Capabilities Capabilities `json:"capabilities"`
}

// RegisterResponse answers a registration. Every registration starts a new
// worker instance; leases of the previous instance are released.
type RegisterResponse struct {
	ID                       string    `json:"id"`
	AccessToken              string    `json:"access_token"`
	TokenExpiresAt           time.Time `json:"token_expires_at"`
	Status                   string    `json:"status"` // "registered" | "re-registered"
	PollWaitSeconds          int       `json:"poll_wait_seconds"`
	HeartbeatIntervalSeconds int       `json:"heartbeat_interval_seconds"`
	LeaseTTLSeconds          int       `json:"lease_ttl_seconds"`
}

// TokenGrant is carried by every worker response: the token the worker should
// use next. A client keeps the grant with the latest expiry, so answers that
// arrive out of order never move it back to an older token.
type TokenGrant struct {
	AccessToken    string    `json:"access_token"`
	TokenExpiresAt time.Time `json:"token_expires_at"`
}

// Job is one build attempt handed to a worker. It stays "assigned" until the
// worker's first heartbeat for it; until then the same worker instance's next
// poll delivers it again (with a fresh lease token and OTP), so a lost poll
// response never strands a build. Agents therefore heartbeat a new job before
// polling again.
type Job struct {
	ID                  string    `json:"id"`
	AttemptID           string    `json:"attempt_id"`
	LeaseToken          string    `json:"lease_token"`
	LeaseExpiresAt      time.Time `json:"lease_expires_at"`
	Platform            string    `json:"platform"`
	Profile             string    `json:"profile"`
	Priority            int       `json:"priority"`
	SourceURL           string    `json:"source_url"`
	CertsURL            *string   `json:"certs_url"`
	BaseImage           *string   `json:"base_image"`
	OTP                 string    `json:"otp"`
	BuildTimeoutSeconds int       `json:"build_timeout_seconds"`
	// Project is the build's project ("" for none) and Caches its spec's
	// dependency caches: the worker hands the build the archives it holds
	// for them, filed under the project (see docs/build-spec.md, "Warm
	// builds"). Older controllers send neither: the build runs cold.
	Project string       `json:"project,omitempty"`
	Caches  []CacheEntry `json:"caches,omitzero"`
	// CacheDomain is the controller's word on whose builds may share
	// these caches (the project's, its environment's with or without
	// secrets): Caches' keys are bound to it, and the worker files the
	// archives of each domain apart. Older controllers send none.
	CacheDomain string `json:"cache_domain,omitempty"`
}

// PollResponse answers GET /api/workers/poll.
type PollResponse struct {
	Job *Job `json:"job"`
	TokenGrant
	QueueDepth int `json:"queue_depth"`
}

// HeartbeatRequest renews the lease of one build attempt.
type HeartbeatRequest struct {
	BuildID    string `json:"build_id"`
	AttemptID  string `json:"attempt_id"`
	LeaseToken string `json:"lease_token"`
	Phase      string `json:"phase,omitempty"`
	Progress   *int   `json:"progress,omitempty"`
	// VM is the attempt's VM once it is ready (every heartbeat after that
	// repeats it; the controller keeps the first); nil before, and from
	// workers that predate it.
	VM *AttemptVM `json:"vm,omitempty"`
}

// AttemptVM is the VM an attempt runs on, as its worker reports it: a warm
// spare (Spare hit), a fresh VM while the worker keeps spares (miss: none
// was ready, or it did not answer), or a fresh VM on a worker that keeps
// none (""); and how long the VM phase took, from the claim to the VM
// ready for the bootstrap.
type AttemptVM struct {
	Spare        string  `json:"spare,omitempty"`
	PhaseSeconds float64 `json:"phase_seconds"`
}

// AttemptVM.Spare values.
const (
	SpareHit  = "hit"
	SpareMiss = "miss"
)

// WarmSpare says whether the VM was a warm spare.
func (v AttemptVM) WarmSpare() bool { return v.Spare == SpareHit }

// Describe says it for people (the build page, `expo-build build:view`):
// "a warm spare; the VM phase took 0.8s".
func (v AttemptVM) Describe() string {
	kind := "a fresh VM"
	switch v.Spare {
	case SpareHit:
		kind = "a warm spare"
	case SpareMiss:
		kind = "a fresh VM (no warm spare was ready)"
	}
	took := time.Duration(v.PhaseSeconds * float64(time.Second)).Round(100 * time.Millisecond)
	return kind + "; the VM phase took " + took.String()
}

// MaxVMPhase bounds AttemptVM.PhaseSeconds: no build waits a day for its VM.
const MaxVMPhase = 24 * time.Hour

// HeartbeatResponse answers a heartbeat.
type HeartbeatResponse struct {
	LeaseExpiresAt  time.Time `json:"lease_expires_at"`
	CancelRequested bool      `json:"cancel_requested"`
	TokenGrant
}

// CancelWatchResponse answers GET /api/workers/builds/{id}/cancel, the
// worker's long poll that learns of a cancel as soon as it is requested
// (rather than at its next heartbeat). It answers at once when a cancel is
// pending or the build has ended, else when one arrives or the wait ends.
type CancelWatchResponse struct {
	CancelRequested bool        `json:"cancel_requested"`
	Status          BuildStatus `json:"status"`
	TokenGrant
}

// ResultResponse answers POST /api/workers/upload. A repeated upload for the
// same attempt returns the first answer unchanged.
type ResultResponse struct {
	Success   bool        `json:"success"`
	BuildID   string      `json:"build_id"`
	Status    BuildStatus `json:"status"`
	Requeued  bool        `json:"requeued"`
	Artifact  *Artifact   `json:"artifact,omitempty"`
	Duplicate bool        `json:"duplicate,omitempty"`
}

// UnregisterResponse answers POST /api/workers/unregister.
type UnregisterResponse struct {
	Success          bool `json:"success"`
	BuildsReassigned int  `json:"builds_reassigned"`
}

// SubmitResponse answers POST /api/builds and POST /api/builds/:id/retry.
type SubmitResponse struct {
	ID            string      `json:"id"`
	Status        BuildStatus `json:"status"`
	AccessToken   string      `json:"access_token"`
	SubmittedAt   time.Time   `json:"submitted_at"`
	QueuePosition *int        `json:"queue_position"`
	// AccessTokenExpiresAt is when the build token stops working (it dies
	// sooner if the submitting key is revoked).
	AccessTokenExpiresAt time.Time `json:"access_token_expires_at"`
	// Versions are the versions the build is made with, as the controller
	// stored them (the build version it decided for the remote source).
	Versions *AppVersions `json:"versions,omitempty"`
}

// Limits answers GET /api/limits (developer and admin keys): what the
// controller accepts, so a client refuses an oversized project before it
// uploads a byte instead of after.
type Limits struct {
	// MaxSourceBytes bounds a submitted project archive, both as sent and
	// as it expands (the total of the files in it): the controller's
	// --max-source-bytes.
	MaxSourceBytes int64 `json:"max_source_bytes"`
}

// Artifact is one file a build produced.
type Artifact struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
	URL    string `json:"url,omitempty"`
}

// DirectUploadRequest declares a file to send straight to the controller's
// object store: its name, size and hex SHA-256, and for a file sent in
// parts each part's hex SHA-256 (UploadSums computes them). The VM asks
// this for an artifact (POST /api/builds/{id}/artifacts/direct, VM token);
// the CLI for a source archive before it submits (POST
// /api/builds/uploads, developer key, with the build's Project when it has
// one). A request with neither Size nor SHA256 only asks the mode: Direct
// tells whether a declaration would be answered with URLs, so a client
// that streams its archive as it packs it learns whether to pack it to a
// file first.
type DirectUploadRequest struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
	// PartSHA256 holds, for a file of more than MultipartThreshold bytes,
	// the hex SHA-256 of each of its Parts(Size) parts of PartSize(Size)
	// bytes (the last one shorter), in order; nothing for a smaller file.
	// Each part's URL then takes only those bytes. Another number of sums
	// is refused (400); a file sent in parts declared without them (a
	// client that predates them) is answered Direct false, and its bytes
	// go through the controller.
	PartSHA256 []string `json:"part_sha256,omitempty"`
	Project    string   `json:"project,omitempty"`
}

// DirectUpload answers a DirectUploadRequest; it is the one negotiation of
// every upload (CLI, VM). With Direct false the store takes no direct
// uploads (the file store, or a file too large): send the bytes through
// the controller as before; so too when the endpoint answers 404 or 405
// (a controller that predates it). Otherwise send exactly the declared
// bytes before ExpiresAt:
//   - with URL, one PUT of the whole file with Headers (the store refuses
//     other bytes);
//   - with Parts, a multipart upload: PUT bytes [i*PartSize, (i+1)*PartSize)
//     of the file to Parts[i] with PartHeaders[i] (the part's checksum:
//     the store refuses other bytes), each on its own (a failed part is
//     sent again to the same URL);
//
// then name Ticket: DirectUploadComplete{Ticket} to
// /api/builds/{id}/artifacts/direct/complete for an artifact, the submit's
// "source_upload" field for a source. The controller then checks the
// stored object's size and SHA-256 (computed by the store) and records it;
// a mismatch is refused (422) and the object removed.
type DirectUpload struct {
	Direct   bool              `json:"direct"`
	URL      string            `json:"url,omitempty"`
	Headers  map[string]string `json:"headers,omitempty"`
	PartSize int64             `json:"part_size,omitempty"`
	Parts    []string          `json:"parts,omitempty"`
	// PartHeaders are the headers to send with each part, as Parts;
	// none from a controller that predates them.
	PartHeaders []map[string]string `json:"part_headers,omitempty"`
	Ticket      string              `json:"ticket,omitempty"`
	ExpiresAt   time.Time           `json:"expires_at,omitzero"`
}

// DirectUploadComplete finishes a direct upload.
type DirectUploadComplete struct {
	Ticket string `json:"ticket"`
}

// Build is the developer-facing view of a build.
type Build struct {
	ID       string      `json:"id"`
	Status   BuildStatus `json:"status"`
	Platform string      `json:"platform"`
	Profile  string      `json:"profile"`
	// Project is the project the build belongs to (its spec's project,
	// the app's slug by default); "" for a build of no project.
	Project         string     `json:"project"`
	Priority        int        `json:"priority"`
	Attempts        int        `json:"attempts"`
	MaxAttempts     int        `json:"max_attempts"`
	WorkerID        *string    `json:"worker_id"`
	QueuePosition   *int       `json:"queue_position"`
	Phase           string     `json:"phase,omitempty"`
	Progress        *int       `json:"progress,omitempty"`
	CancelRequested bool       `json:"cancel_requested"`
	RetryOf         *string    `json:"retry_of,omitempty"`
	RunAfter        *time.Time `json:"run_after,omitempty"`
	SubmittedAt     time.Time  `json:"submitted_at"`
	StartedAt       *time.Time `json:"started_at"`
	CompletedAt     *time.Time `json:"completed_at"`
	ErrorMessage    *string    `json:"error_message"`
	ErrorCode       *string    `json:"error_code"`
	LogLength       int64      `json:"log_length"`
	Artifacts       []Artifact `json:"artifacts"`
	AttemptHistory  []Attempt  `json:"attempt_history,omitempty"`
	// Spec is the resolved build the CLI sent (nil for a raw API submit).
	Spec *BuildSpec `json:"spec,omitempty"`
	// SourceFingerprint (GET /api/builds/:id) is the source fingerprint
	// the controller computed from the archive it received, the only one
	// `--reuse` matches; "" when it computed none (a zip, an archive it
	// could not read, a build stored before 0.2). SourceFingerprintMismatch:
	// the spec declared another (Spec.SourceFingerprint); such a build is
	// never reused.
	SourceFingerprint         string `json:"source_fingerprint,omitempty"`
	SourceFingerprintMismatch bool   `json:"source_fingerprint_mismatch,omitempty"`
	// AppVersion and BuildVersion (versionCode or buildNumber) are the
	// versions the build is made with: its spec's Versions.
	AppVersion   string `json:"app_version,omitempty"`
	BuildVersion string `json:"build_version,omitempty"`
	// InstallURL (completed builds, GET /api/builds/:id only) opens the
	// install page without any header until InstallURLExpiresAt; it is
	// what GET /api/builds/:id/qr.png encodes.
	InstallURL          *string    `json:"install_url,omitempty"`
	InstallURLExpiresAt *time.Time `json:"install_url_expires_at,omitempty"`
	// ArtifactsExpireAt (ended builds) is when the controller deletes the
	// build's artifacts: --retain-artifacts after the build ended; absent
	// when they are kept forever. Once they are deleted ArtifactsExpired
	// is true: the build and its artifact list stay, and downloads answer
	// 410 Gone saying the artifacts expired.
	ArtifactsExpireAt *time.Time `json:"artifacts_expire_at,omitempty"`
	ArtifactsExpired  bool       `json:"artifacts_expired,omitempty"`
}

// Attempt is one execution of a build on a worker.
type Attempt struct {
	ID           string     `json:"id"`
	Number       int        `json:"number"`
	WorkerID     string     `json:"worker_id"`
	Status       string     `json:"status"`
	StartedAt    time.Time  `json:"started_at"`
	EndedAt      *time.Time `json:"ended_at"`
	ErrorMessage *string    `json:"error_message"`
	ErrorCode    *string    `json:"error_code"`
	// VM is the VM it ran on (HeartbeatRequest.VM); nil until its worker
	// reported it ready.
	VM *AttemptVM `json:"vm,omitempty"`
}

// BuildList answers GET /api/builds. NextCursor is empty on the last page.
type BuildList struct {
	Builds     []Build `json:"builds"`
	NextCursor string  `json:"next_cursor,omitempty"`
}

// VMAuthResponse answers POST /api/vm/auth.
type VMAuthResponse struct {
	VMToken   string    `json:"vm_token"`
	BuildID   string    `json:"build_id"`
	ExpiresAt time.Time `json:"expires_at"`
}

// CertsResponse answers GET /api/builds/:id/certs-secure. Byte fields are
// base64 in JSON (encoding/json's []byte encoding).
type CertsResponse struct {
	P12                  []byte   `json:"p12"`
	P12Password          string   `json:"p12Password"`
	KeychainPassword     string   `json:"keychainPassword"`
	ProvisioningProfiles [][]byte `json:"provisioningProfiles"`
}

// LogAppendResponse answers POST /api/builds/:id/logs.
type LogAppendResponse struct {
	Length int64 `json:"length"`
}

// CancelResponse answers POST /api/builds/:id/cancel.
type CancelResponse struct {
	ID              string      `json:"id"`
	Status          BuildStatus `json:"status"`
	CancelRequested bool        `json:"cancel_requested"`
}

// Health answers GET /health and GET /health/ready.
type Health struct {
	Status     string `json:"status"`
	Database   string `json:"database,omitempty"`
	Migrations string `json:"migrations,omitempty"`
}

// Event is one entry of the audit log. EventHash is the hex SHA-256 of the
// canonical JSON of the other fields (keys sorted, no spaces, payload keys
// sorted, timestamp with microseconds), chained through PreviousHash ("" for
// the first event).
type Event struct {
	ID                 string          `json:"id"`
	Sequence           int64           `json:"sequence"`
	Timestamp          time.Time       `json:"timestamp"`
	EventType          string          `json:"event_type"`
	EntityType         string          `json:"entity_type"`
	EntityID           string          `json:"entity_id"`
	Payload            json.RawMessage `json:"payload"`
	SourceControllerID string          `json:"source_controller_id"`
	PreviousHash       string          `json:"previous_hash"`
	EventHash          string          `json:"event_hash"`
}

// EventList answers GET /api/events. NextSince is the since value of the next page.
type EventList struct {
	Events    []Event `json:"events"`
	NextSince int64   `json:"next_since"`
}

// EventVerification answers GET /api/events/verify.
type EventVerification struct {
	Valid               bool   `json:"valid"`
	FirstBrokenSequence *int64 `json:"first_broken_sequence"`
	Checked             int64  `json:"checked"`
	Reason              string `json:"reason,omitempty"`
}

// Worker is the admin view of a registered worker.
type Worker struct {
	ID              string       `json:"id"`
	Name            string       `json:"name"`
	Status          string       `json:"status"`
	Paused          bool         `json:"paused"`
	Capabilities    Capabilities `json:"capabilities"`
	RegisteredAt    time.Time    `json:"registered_at"`
	LastSeenAt      time.Time    `json:"last_seen_at"`
	BuildsCompleted int64        `json:"builds_completed"`
	BuildsFailed    int64        `json:"builds_failed"`
	ActiveBuilds    []string     `json:"active_builds"`
	// KeyID is the API key the worker registered with: only it may
	// register the id again or use the worker's tokens.
	KeyID string `json:"key_id,omitempty"`
	// NeedsAttention is set when the worker handed back too many builds
	// after fetching their credentials (AttentionReason says how many, in
	// what window); POST /api/workers/{id}/acknowledge clears it.
	NeedsAttention  bool   `json:"needs_attention"`
	AttentionReason string `json:"attention_reason,omitempty"`
	// OwnerPaused: the Mac's owner untied "Accept Builds" in the menu bar.
	// HostPauseReason: the owner's rules hold builds back now ("on
	// battery", "you are using this Mac"; see docs/polite-guest.md). The
	// worker reports both (PUT /api/workers/pause). Paused is the admin's.
	// The three are separate: none clears another.
	OwnerPaused     bool   `json:"owner_paused"`
	HostPauseReason string `json:"host_pause_reason,omitempty"`
	// PauseKind and PauseReason sum the three up for people: the first of
	// admin, owner and host that holds the worker, and why; empty when it
	// takes builds.
	PauseKind   string `json:"pause_kind,omitempty"`
	PauseReason string `json:"pause_reason,omitempty"`
	// Cache is the worker's last report of its dependency caches (size,
	// hits, misses; its keys are not listed), nil before its first.
	Cache *WorkerCache `json:"cache,omitempty"`
	// Spare is the worker's warm spare as it last reported it (PUT
	// /api/workers/pause); nil when it keeps none (spares off, a driver
	// without them, an agent that predates them).
	Spare *WorkerSpare `json:"spare,omitempty"`
	// PoolAdmitted: the worker's key may place it in its pool while the
	// pool is trusted (an admin key, a key bound to the pool, or any key
	// while no worker key is bound to a pool). A trusted pool runs
	// credentialed builds only on its admitted workers.
	PoolAdmitted bool `json:"pool_admitted"`
}

// HitRate is the share of builds that found a warm cache, 0 before any.
func (c WorkerCache) HitRate() float64 {
	if c.Hits+c.Misses == 0 {
		return 0
	}
	return float64(c.Hits) / float64(c.Hits+c.Misses)
}

// Pause kinds (Worker.PauseKind).
const (
	PauseAdmin = "admin"
	PauseOwner = "owner"
	PauseHost  = "host"
)

// Summarize fills PauseKind and PauseReason from the three pauses.
func (w *Worker) Summarize() {
	switch {
	case w.Paused:
		w.PauseKind, w.PauseReason = PauseAdmin, "paused by an admin"
	case w.OwnerPaused:
		w.PauseKind, w.PauseReason = PauseOwner, "paused by the Mac's owner"
	case w.HostPauseReason != "":
		w.PauseKind, w.PauseReason = PauseHost, w.HostPauseReason
	default:
		w.PauseKind, w.PauseReason = "", ""
	}
}

// WorkerPauseReport is what a worker says of its own pauses
// (PUT /api/workers/pause, worker token): whether its owner paused it, and
// why the host holds builds back ("" when it does not). A paused worker
// does not poll, so it repeats the report at least every
// WorkerPauseReportEvery to stay online.
type WorkerPauseReport struct {
	OwnerPaused bool   `json:"owner_paused"`
	HostReason  string `json:"host_reason"`
	// Spare is the worker's warm spare, reported with its pauses (which
	// decide it) whenever it changes; nil when the worker keeps none.
	Spare *WorkerSpare `json:"spare,omitempty"`
}

// WorkerSpare is a worker's warm spare (docs/design.md, "Warm spares"):
// its state, why there is none (State none or failed), since when, and
// how many builds since the agent started ran on a spare (hits) or booted
// a fresh VM (misses).
type WorkerSpare struct {
	State  string    `json:"state"`
	Reason string    `json:"reason,omitempty"`
	Since  time.Time `json:"since,omitzero"`
	Hits   int64     `json:"hits"`
	Misses int64     `json:"misses"`
}

// The states of a warm spare (WorkerSpare.State).
const (
	SpareNone      = "none"      // none kept now; Reason says why (paused, two builds run, …)
	SpareBooting   = "booting"   // cloned and booting; its launcher has not said it waits yet
	SpareReady     = "ready"     // logged in, its launcher waits for a build
	SpareSuspended = "suspended" // ready and suspended: no CPU, no VM slot
	SpareFailed    = "failed"    // none could be made; Reason says why and what to do
)

// MaxSpareReason bounds WorkerSpare.Reason, in bytes.
const MaxSpareReason = 500

// WorkerPauseResponse answers a WorkerPauseReport: the worker as admins
// see it, and the token to use next (a paused worker does not poll, so
// this is where its token is renewed).
type WorkerPauseResponse struct {
	Worker Worker `json:"worker"`
	TokenGrant
}

// MaxHostPauseReason bounds WorkerPauseReport.HostReason, in bytes.
const MaxHostPauseReason = 200

// WorkerPauseReportEvery is how often a paused worker repeats its report:
// well inside the controller's offline threshold (5 minutes).
const WorkerPauseReportEvery = time.Minute

// WorkerCache is what a worker reports of its dependency caches
// (PUT /api/workers/cache, worker token): the keys it holds, newest first
// and at most MaxWorkerCacheKeys, its size on disk and how many builds
// found a warm cache (hits) or none (misses), as its cache directory
// counts them (across restarts of the agent).
type WorkerCache struct {
	Keys   []string `json:"keys"`
	Bytes  int64    `json:"bytes"`
	Hits   int64    `json:"hits"`
	Misses int64    `json:"misses"`
}

// MaxWorkerCacheKeys bounds WorkerCache.Keys.
const MaxWorkerCacheKeys = 200

// WorkerList answers GET /api/workers.
type WorkerList struct {
	Workers []Worker `json:"workers"`
}

// Controller is one registered controller replica.
type Controller struct {
	ID              string    `json:"id"`
	Name            string    `json:"name"`
	URL             string    `json:"url"`
	Version         string    `json:"version"`
	StartedAt       time.Time `json:"started_at"`
	LastHeartbeatAt time.Time `json:"last_heartbeat_at"`
	ExpiresAt       time.Time `json:"expires_at"`
}

// ControllerList answers GET /api/controllers.
type ControllerList struct {
	Controllers []Controller `json:"controllers"`
}

// Webhook request headers (docs/design.md, "Operations and audit"). The signature is
// "sha256=" + hex HMAC-SHA256(secret, timestamp + "." + body).
const (
	HeaderWebhookEvent     = "X-FreeAgent-Event"
	HeaderWebhookDelivery  = "X-FreeAgent-Delivery"
	HeaderWebhookTimestamp = "X-FreeAgent-Timestamp"
	HeaderWebhookSignature = "X-FreeAgent-Signature"
)

// WebhookRequest creates a webhook endpoint (POST /api/webhooks). Events
// are exact event types ("build.completed"), prefixes ("build.*") or "*".
type WebhookRequest struct {
	URL         string   `json:"url"`
	Events      []string `json:"events"`
	Description string   `json:"description,omitempty"`
	// Projects limits the endpoint to these projects' builds and project
	// events; empty: every event, farm-wide ones (workers) included.
	Projects []string `json:"projects,omitempty"`
}

// Webhook is an endpoint. Secret is set only in the answer that created it.
type Webhook struct {
	ID          string    `json:"id"`
	URL         string    `json:"url"`
	Events      []string  `json:"events"`
	Description string    `json:"description"`
	Projects    []string  `json:"projects"` // empty: every project
	CreatedAt   time.Time `json:"created_at"`
	Secret      string    `json:"secret,omitempty"`
}

// WebhookList answers GET /api/webhooks.
type WebhookList struct {
	Webhooks []Webhook `json:"webhooks"`
}

// WebhookDelivery is one event sent (or to be sent) to one endpoint. Its
// body is the event (Event) as JSON. Status is pending, delivered or dead.
type WebhookDelivery struct {
	ID               string           `json:"id"`
	WebhookID        string           `json:"webhook_id"`
	EventID          string           `json:"event_id"`
	EventSequence    int64            `json:"event_sequence"`
	EventType        string           `json:"event_type"`
	Status           string           `json:"status"`
	Attempts         int              `json:"attempts"`
	NextAttemptAt    *time.Time       `json:"next_attempt_at"`
	LastResponseCode *int             `json:"last_response_code"`
	LastError        *string          `json:"last_error"`
	CreatedAt        time.Time        `json:"created_at"`
	DeliveredAt      *time.Time       `json:"delivered_at"`
	Log              []WebhookAttempt `json:"log"`
}

// WebhookAttempt is one try of a delivery.
type WebhookAttempt struct {
	Number       int       `json:"number"`
	At           time.Time `json:"at"`
	ResponseCode *int      `json:"response_code"`
	Error        *string   `json:"error"`
	DurationMS   int       `json:"duration_ms"`
}

// WebhookDeliveryList answers GET /api/webhooks/:id/deliveries, newest first.
type WebhookDeliveryList struct {
	Deliveries []WebhookDelivery `json:"deliveries"`
}
