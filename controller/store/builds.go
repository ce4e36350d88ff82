package store

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/install"
)

// NewBuild describes a submitted build whose files are already written to
// temporary files; Commit moves them into place inside the transaction.
type NewBuild struct {
	ID       string // from NewID, chosen before the files were written
	Platform string
	Profile  string
	// Project is the project the build belongs to; "" for none.
	Project        string
	Priority       int
	SubmittedBy    string // API key id
	IdempotencyKey string
	RetryOf        string
	SourceSize     int64
	SourceSHA256   string
	SourceFormat   string // tar.gz | zip
	// SourceFingerprint is the source's fingerprint as the controller
	// computed it from the archive (sourcefp); "" when it computed none.
	// Submit records whether the spec declared another.
	SourceFingerprint string
	HasCerts          bool
	// HasCredentials: a sealed credentials file (api.BuildCredentials).
	HasCredentials bool
	// Spec is the api.BuildSpec as JSON; nil for a raw submit.
	Spec      []byte
	BaseImage string
	Timeout   time.Duration // 0 → the default
	// AutoSubmit, when set, is queued with the build: it runs once the
	// build completes (and fails if it does not).
	AutoSubmit *NewSubmission
	Commit     func() error
}

// ValidatePlatform checks a platform name.
func ValidatePlatform(p string) error {
	if p != api.PlatformIOS && p != api.PlatformAndroid {
		return fmt.Errorf("%w: field \"platform\" must be \"ios\" or \"android\", got %q", ErrInvalid, p)
	}
	return nil
}

// Submitted is the result of Submit.
type Submitted struct {
	Build          api.Build
	Token          string
	TokenExpiresAt time.Time // the build token's end (BuildTokenTTL after the submit)
	Duplicate      bool      // an earlier submit with the same Idempotency-Key; no new build was made
}

// Submit queues a build. With an idempotency key, a repeat returns the first
// build (with a fresh build token, since only hashes are kept: a retried
// submit is one whose first answer was lost) and Commit is not called.
func (s *Store) Submit(ctx context.Context, nb NewBuild) (Submitted, error) {
	if err := ValidatePlatform(nb.Platform); err != nil {
		return Submitted{}, err
	}
	if nb.Priority < 0 || nb.Priority > 3 {
		return Submitted{}, fmt.Errorf("%w: field \"priority\" must be 0 (highest) to 3", ErrInvalid)
	}
	if nb.Project != "" {
		if err := ValidateProject("project", nb.Project); err != nil {
			return Submitted{}, err
		}
	}
	for field, v := range map[string]string{"profile": nb.Profile, "base_image": nb.BaseImage, "Idempotency-Key": nb.IdempotencyKey} {
		if err := checkText(field, v); err != nil {
			return Submitted{}, err
		}
	}
	if len(nb.Profile) > 100 {
		return Submitted{}, fmt.Errorf("%w: field \"profile\" is longer than 100 characters", ErrInvalid)
	}
	if len(nb.IdempotencyKey) > 200 {
		return Submitted{}, fmt.Errorf("%w: Idempotency-Key is longer than 200 characters", ErrInvalid)
	}
	spec, err := decodeSpec(nb.Spec)
	if err != nil {
		return Submitted{}, err
	}
	cacheKeys, err := specCacheKeys(spec)
	if err != nil {
		return Submitted{}, err
	}
	// A remote-source build version is decided below, unless the spec
	// already carries one (a retry keeps its build's).
	var takeVersion *api.AppVersions
	if spec != nil {
		if err := checkRemoteVersions(nb.Project, nb.Platform, spec.Versions); err != nil {
			return Submitted{}, err
		}
		if spec.Versions.Remote() && spec.Versions.BuildVersion == "" {
			takeVersion = spec.Versions
		}
	}
	timeout := nb.Timeout
	if timeout <= 0 {
		timeout = s.cfg.DefaultTimeout
	}
	mismatch := sourceMismatch(spec, nb.SourceFingerprint)
	token, hash := newSecret(prefixBuildToken)
	var out Submitted
	err = s.withTx(ctx, func(t *txn) error {
		// A new build has no artifacts or attempts yet: the insert itself
		// answers with what the submitter sees, queue position included
		// (the subquery sees the queue as it was before this row).
		var pos int
		b := api.Build{Status: api.StatusPending, Platform: nb.Platform, Profile: nb.Profile, Project: nb.Project, Priority: nb.Priority,
			MaxAttempts: s.cfg.MaxAttempts, Artifacts: []api.Artifact{}}
		err := t.QueryRow(ctx, `
			INSERT INTO builds (id, status, platform, profile, priority, token_hash, submitted_by, idempotency_key, retry_of,
				source_size, source_sha256, source_format, has_certs, base_image, timeout_seconds, max_attempts, has_credentials, spec,
				token_expires_at, project, cache_keys, source_fingerprint, source_fingerprint_mismatch)
			VALUES ($1, 'pending', $2, $3, $4, $5, NULLIF($6, ''), NULLIF($7, ''), NULLIF($8, ''), $9, $10, $11, $12, NULLIF($13, ''), $14, $15, $16, $17,
				now() + $18::interval, $19, $20, NULLIF($21, ''), $22)
			ON CONFLICT (submitted_by, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
			RETURNING id, submitted_at, retry_of, (SELECT count(*) + 1 FROM builds p WHERE p.status = 'pending'
				AND (p.priority, p.submitted_at, p.id) < (builds.priority, builds.submitted_at, builds.id)), token_expires_at`,
			nb.ID, nb.Platform, nb.Profile, nb.Priority, hash, nb.SubmittedBy, nb.IdempotencyKey, nb.RetryOf,
			nb.SourceSize, nb.SourceSHA256, nb.SourceFormat, nb.HasCerts, nb.BaseImage, int(timeout.Seconds()), s.cfg.MaxAttempts,
			nb.HasCredentials, specParam(nb.Spec), s.cfg.BuildTokenTTL, nb.Project, cacheKeys, nb.SourceFingerprint, mismatch,
		).Scan(&b.ID, &b.SubmittedAt, &b.RetryOf, &pos, &out.TokenExpiresAt)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			out.Duplicate = true
			var id string
			// Only a repeat into the same project: a key unbound from a
			// project must not win its build back (and a token to read
			// it) by repeating an old key into a project it still has.
			err = t.QueryRow(ctx, `UPDATE builds SET token_hash = $3, token_expires_at = now() + $4::interval
				WHERE submitted_by = $1 AND idempotency_key = $2 AND project = $5 RETURNING id, token_expires_at`,
				nb.SubmittedBy, nb.IdempotencyKey, hash, s.cfg.BuildTokenTTL, nb.Project).Scan(&id, &out.TokenExpiresAt)
			if errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("%w: Idempotency-Key %q was used by this key for a build of another project; send a new key for this submit", ErrConflict, nb.IdempotencyKey)
			}
			if err != nil {
				return fmt.Errorf("find build for Idempotency-Key: %w", err)
			}
			out.Build, err = getBuild(ctx, t, id)
			return err
		case err != nil:
			return fmt.Errorf("insert build: %w", err)
		}
		if takeVersion != nil {
			if err := takeBuildVersion(ctx, t, nb.Project, nb.Platform, takeVersion); err != nil {
				return err
			}
			if _, err := t.Exec(ctx, `UPDATE builds SET spec = jsonb_set(spec, '{versions,build_version}', to_jsonb($2::text)) WHERE id = $1`,
				b.ID, takeVersion.BuildVersion); err != nil {
				return fmt.Errorf("record the build version: %w", err)
			}
		}
		if err := nb.Commit(); err != nil {
			return fmt.Errorf("store build files: %w", err)
		}
		b.QueuePosition = &pos
		b.Spec = spec
		b.SourceFingerprint, b.SourceFingerprintMismatch = nb.SourceFingerprint, mismatch
		if spec != nil { // as buildColumns reads them
			b.AppVersion = spec.App.Version
			if v := spec.Versions; v != nil {
				b.AppVersion, b.BuildVersion = cmp.Or(v.AppVersion, spec.App.Version), v.BuildVersion
			}
		}
		out.Build = b
		detail := versionDetail(map[string]any{"priority": nb.Priority, "profile": nb.Profile, "retry_of": nb.RetryOf, "project": nb.Project}, b.AppVersion, b.BuildVersion)
		if mismatch {
			detail["source_fingerprint_mismatch"] = true
			detail["declared_source_fingerprint"], detail["source_fingerprint"] = spec.SourceFingerprint, nb.SourceFingerprint
		}
		t.emit(Change{Kind: "build", ID: b.ID, Status: string(api.StatusPending), Platform: nb.Platform, Event: "build.submitted", Detail: detail})
		if nb.AutoSubmit != nil {
			if err := validateNewSubmission(*nb.AutoSubmit); err != nil {
				return err
			}
			if _, err := t.insertSubmission(ctx, *nb.AutoSubmit); err != nil {
				return err
			}
		}
		return nil
	})
	out.Token = token
	return out, err
}

const buildColumns = `b.id, b.status, b.platform, b.profile, b.priority, b.attempts, b.max_attempts, b.worker_id, b.phase,
	b.progress, b.cancel_requested, b.retry_of, b.run_after, b.submitted_at, b.started_at, b.completed_at,
	b.error_message, b.error_code, b.log_length, b.artifacts_deleted_at, b.project, ` + versionColumns

// versionColumns are a build's app version and build version, read from
// the spec of b (builds, or a CTE returning their spec): Versions, else, in
// a spec from an older CLI, the app config's version.
const versionColumns = `COALESCE(b.spec->'versions'->>'app_version', b.spec->'app'->>'version', ''),
	COALESCE(b.spec->'versions'->>'build_version', '')`

// versionDetail adds a build's versions to an event's detail (what
// webhooks deliver).
func versionDetail(detail map[string]any, appVersion, buildVersion string) map[string]any {
	if appVersion != "" {
		detail["app_version"] = appVersion
	}
	if buildVersion != "" {
		detail["build_version"] = buildVersion
	}
	return detail
}

type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

const positionColumn = `CASE WHEN b.status = 'pending' THEN (SELECT count(*) + 1 FROM builds p WHERE p.status = 'pending'
	AND (p.priority, p.submitted_at, p.id) < (b.priority, b.submitted_at, b.id)) END`

// sourceMismatch reports a spec that declares a source fingerprint other
// than the one the controller computed (computed: "" for none): such a
// build is never reused.
func sourceMismatch(spec *api.BuildSpec, computed string) bool {
	return spec != nil && spec.SourceFingerprint != "" && spec.SourceFingerprint != computed
}

// specParam is the spec column's value: SQL NULL for no spec.
func specParam(spec []byte) any {
	if spec == nil {
		return nil
	}
	return string(spec)
}

// decodeSpec reads a stored spec; nil for none.
func decodeSpec(raw []byte) (*api.BuildSpec, error) {
	if raw == nil {
		return nil, nil
	}
	var spec api.BuildSpec
	if err := json.Unmarshal(raw, &spec); err != nil {
		return nil, fmt.Errorf("read the stored build spec: %w", err)
	}
	return &spec, nil
}

// maxBuildCaches bounds the caches a spec may name (a package manager's
// store, Pods, Gradle and eas.json cache.paths need a handful).
const maxBuildCaches = 16

// specCacheKeys returns the keys of a spec's caches, for builds.cache_keys:
// what cache-aware placement matches against the keys workers hold.
func specCacheKeys(spec *api.BuildSpec) ([]string, error) {
	keys := []string{}
	if spec == nil {
		return keys, nil
	}
	if len(spec.Caches) > maxBuildCaches {
		return nil, fmt.Errorf("%w: field \"spec\": caches has %d entries, at most %d are accepted", ErrInvalid, len(spec.Caches), maxBuildCaches)
	}
	for i, c := range spec.Caches {
		if !sha256Hex.MatchString(c.Key) {
			return nil, fmt.Errorf("%w: field \"spec\": caches[%d].key must be 64 lowercase hex digits (a SHA-256), got %q", ErrInvalid, i, c.Key)
		}
		if !slices.Contains(keys, c.Key) {
			keys = append(keys, c.Key)
		}
	}
	return keys, nil
}

// getBuild reads a build with its queue position, spec, artifacts and attempts.
func getBuild(ctx context.Context, q querier, id string) (api.Build, error) {
	var pos *int
	var spec []byte
	var fingerprint *string
	var mismatch bool
	b, err := scanBuildWithPosition(q.QueryRow(ctx, `SELECT `+buildColumns+`, `+positionColumn+`, b.spec, b.source_fingerprint, b.source_fingerprint_mismatch
		FROM builds b WHERE b.id = $1`, id), &pos, &spec, &fingerprint, &mismatch)
	if errors.Is(err, pgx.ErrNoRows) {
		return b, fmt.Errorf("%w: no build %q", ErrNotFound, id)
	}
	if err != nil {
		return b, fmt.Errorf("read build: %w", err)
	}
	b.QueuePosition = pos
	if fingerprint != nil {
		b.SourceFingerprint = *fingerprint
	}
	b.SourceFingerprintMismatch = mismatch
	if b.Spec, err = decodeSpec(spec); err != nil {
		return b, err
	}
	if err := attachArtifacts(ctx, q, []*api.Build{&b}); err != nil {
		return b, err
	}
	b.AttemptHistory, err = listAttempts(ctx, q, id)
	return b, err
}

// GetBuild returns one build with its artifacts, attempt history and queue
// position, read from one snapshot.
func (s *Store) GetBuild(ctx context.Context, id string) (api.Build, error) {
	var b api.Build
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly, IsoLevel: pgx.RepeatableRead}, func(tx pgx.Tx) error {
		var err error
		b, err = getBuild(ctx, tx, id)
		return err
	})
	s.stampExpiry(&b)
	return b, err
}

// scanBuildWithPosition scans buildColumns and positionColumn, then any
// extra columns into extra.
func scanBuildWithPosition(row pgx.Row, pos **int, extra ...any) (api.Build, error) {
	var b api.Build
	var runAfter time.Time
	var progress *int16
	var p *int64
	err := row.Scan(append([]any{&b.ID, &b.Status, &b.Platform, &b.Profile, &b.Priority, &b.Attempts, &b.MaxAttempts, &b.WorkerID, &b.Phase,
		&progress, &b.CancelRequested, &b.RetryOf, &runAfter, &b.SubmittedAt, &b.StartedAt, &b.CompletedAt,
		&b.ErrorMessage, &b.ErrorCode, &b.LogLength, &b.ArtifactsExpireAt, &b.Project, &b.AppVersion, &b.BuildVersion, &p}, extra...)...)
	if err != nil {
		return b, err
	}
	b.ArtifactsExpired = b.ArtifactsExpireAt != nil // artifacts_deleted_at; see stampExpiry
	if progress != nil {
		v := int(*progress)
		b.Progress = &v
	}
	if b.Status == api.StatusPending && runAfter.After(time.Now()) {
		b.RunAfter = &runAfter
	}
	if p != nil {
		v := int(*p)
		*pos = &v
	}
	b.Artifacts = []api.Artifact{}
	return b, nil
}

// visibleArtifact is the condition under which artifact row a of build b
// is shown: it was made by the attempt that ended the build, or stored
// before artifacts belonged to attempts (an empty attempt_id). A live attempt's
// artifacts appear when it ends the build; another attempt's never do.
const visibleArtifact = `(a.attempt_id = '' OR (a.attempt_id = b.attempt_id AND b.status IN ('completed', 'failed', 'cancelled')))`

// attachArtifacts fills in the artifacts of builds (one, or a page of
// them) with one query.
func attachArtifacts(ctx context.Context, q querier, builds []*api.Build) error {
	if len(builds) == 0 {
		return nil
	}
	ids := make([]string, len(builds))
	for i, b := range builds {
		ids[i] = b.ID
	}
	// A build that was running across the upgrade may hold a name twice
	// (an old row and its attempt's): the attempt's wins.
	rows, err := q.Query(ctx, `SELECT DISTINCT ON (a.build_id, a.name) a.build_id, a.name, a.size, a.sha256 FROM artifacts a JOIN builds b ON b.id = a.build_id
		WHERE a.build_id = ANY($1) AND `+visibleArtifact+` ORDER BY a.build_id, a.name, a.attempt_id = ''`, ids)
	if err != nil {
		return fmt.Errorf("list artifacts: %w", err)
	}
	byBuild := map[string][]api.Artifact{}
	var id string
	var a api.Artifact
	_, err = pgx.ForEachRow(rows, []any{&id, &a.Name, &a.Size, &a.SHA256}, func() error {
		a.URL = ArtifactURL(id, a.Name)
		byBuild[id] = append(byBuild[id], a)
		return nil
	})
	if err != nil {
		return fmt.Errorf("list artifacts: %w", err)
	}
	for i := range builds {
		builds[i].Artifacts = byBuild[builds[i].ID]
		if builds[i].Artifacts == nil {
			builds[i].Artifacts = []api.Artifact{}
		}
	}
	return nil
}

// StoredArtifact is an artifact the build shows, with the attempt that made
// it: the file is blobs.Artifact(AttemptID, Name).
type StoredArtifact struct {
	api.Artifact
	AttemptID string
	// App is what the artifact says about its app, read once when it was
	// recorded (an .ipa's Info.plist); nil when it was not read. AppError
	// says why an .ipa could not be read, so it cannot be installed.
	App      *install.AppInfo
	AppError string
}

// Artifact returns an artifact the build shows. Once the collector deleted
// the build's artifacts (--retain-artifacts) it gives ErrGone, saying when.
func (s *Store) Artifact(ctx context.Context, buildID, name string) (StoredArtifact, error) {
	a := StoredArtifact{Artifact: api.Artifact{Name: name, URL: ArtifactURL(buildID, name)}}
	var (
		deleted  *time.Time
		bundleID *string
		app      install.AppInfo
	)
	err := s.pool.QueryRow(ctx, `SELECT a.size, a.sha256, a.attempt_id, b.artifacts_deleted_at, a.app_bundle_id, a.app_version, a.app_title, a.app_error
		FROM artifacts a JOIN builds b ON b.id = a.build_id
		WHERE a.build_id = $1 AND a.name = $2 AND `+visibleArtifact+` ORDER BY a.attempt_id = '' LIMIT 1`, buildID, name).
		Scan(&a.Size, &a.SHA256, &a.AttemptID, &deleted, &bundleID, &app.Version, &app.Title, &a.AppError)
	if bundleID != nil {
		app.BundleID = *bundleID
		a.App = &app
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return a, fmt.Errorf("%w: build %s has no artifact %q", ErrNotFound, buildID, name)
	}
	if err != nil {
		return a, fmt.Errorf("read artifact: %w", err)
	}
	if deleted != nil {
		return a, fmt.Errorf("%w: the artifacts of build %s expired and were deleted on %s (the controller keeps artifacts for --retain-artifacts after a build ends); run the build again",
			ErrGone, buildID, deleted.UTC().Format(time.RFC3339))
	}
	return a, nil
}

// AttemptArtifact returns an artifact attempt attemptID recorded, shown or
// not: the answer to a repeated upload whose first answer was lost.
func (s *Store) AttemptArtifact(ctx context.Context, buildID, attemptID, name string) (api.Artifact, error) {
	a := api.Artifact{Name: name, URL: ArtifactURL(buildID, name)}
	err := s.pool.QueryRow(ctx, `SELECT size, sha256 FROM artifacts WHERE build_id = $1 AND attempt_id = $2 AND name = $3`,
		buildID, attemptID, name).Scan(&a.Size, &a.SHA256)
	if errors.Is(err, pgx.ErrNoRows) {
		return a, fmt.Errorf("%w: attempt %s of build %s has no artifact %q", ErrNotFound, attemptID, buildID, name)
	}
	return a, err
}

func listAttempts(ctx context.Context, q querier, buildID string) ([]api.Attempt, error) {
	rows, err := q.Query(ctx, `SELECT id, number, worker_id, status, started_at, ended_at, error_message, error_code, vm_spare, vm_phase_ms
		FROM build_attempts WHERE build_id = $1 ORDER BY number`, buildID)
	if err != nil {
		return nil, fmt.Errorf("list attempts: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (api.Attempt, error) {
		var a api.Attempt
		var vmSpare *string
		var vmPhaseMS *int64
		err := r.Scan(&a.ID, &a.Number, &a.WorkerID, &a.Status, &a.StartedAt, &a.EndedAt, &a.ErrorMessage, &a.ErrorCode, &vmSpare, &vmPhaseMS)
		if vmSpare != nil && vmPhaseMS != nil {
			a.VM = &api.AttemptVM{Spare: *vmSpare, PhaseSeconds: float64(*vmPhaseMS) / 1000}
		}
		return a, err
	})
}

// ListFilter selects builds for ListBuilds.
type ListFilter struct {
	Status   string
	Platform string
	WorkerID string
	// Project keeps one project's builds; "" every project in Scope.
	Project string
	// Scope keeps the builds the caller may see (store.KeyScope).
	Scope  Scope
	Cursor string
	Limit  int
	// WithSpec returns each build's spec too (what `expo-build build:list`
	// filters on and prints as EAS does); without it a page stays small.
	WithSpec bool
}

// ListBuilds returns builds newest first, a page at a time.
func (s *Store) ListBuilds(ctx context.Context, f ListFilter) (api.BuildList, error) {
	rows, next, err := s.listBuilds(ctx, f)
	if err != nil {
		return api.BuildList{}, err
	}
	out := api.BuildList{Builds: make([]api.Build, len(rows)), NextCursor: next}
	for i, r := range rows {
		out.Builds[i] = r.Build
	}
	return out, nil
}

// listBuilds reads a page of builds with their spec's list columns.
func (s *Store) listBuilds(ctx context.Context, f ListFilter) ([]BuildRow, string, error) {
	if f.Status != "" && !validStatus(f.Status) {
		return nil, "", fmt.Errorf("%w: status filter %q is not one of pending, assigned, building, completed, failed, cancelled", ErrInvalid, f.Status)
	}
	if f.Platform != "" {
		if err := ValidatePlatform(f.Platform); err != nil {
			return nil, "", err
		}
	}
	if err := checkText("worker_id", f.WorkerID); err != nil {
		return nil, "", err
	}
	if f.Project != "" {
		if err := ValidateProject("project filter", f.Project); err != nil {
			return nil, "", err
		}
	}
	if f.Limit <= 0 || f.Limit > 200 {
		f.Limit = 50
	}
	var curTime *time.Time
	var curID *string
	if f.Cursor != "" {
		t, id, err := decodeCursor(f.Cursor)
		if err != nil {
			return nil, "", err
		}
		curTime, curID = &t, &id
	}
	rows, err := s.pool.Query(ctx, `SELECT `+buildColumns+`, `+positionColumn+`, `+specColumns+`, CASE WHEN $9 THEN b.spec END FROM builds b
		WHERE ($1 = '' OR b.status = $1) AND ($2 = '' OR b.platform = $2) AND ($3 = '' OR b.worker_id = $3)
			AND ($4::timestamptz IS NULL OR (b.submitted_at, b.id) < ($4, $5))
			AND ($7 = '' OR b.project = $7) AND ($8::text[] IS NULL OR b.project = ANY($8))
		ORDER BY b.submitted_at DESC, b.id DESC LIMIT $6`,
		f.Status, f.Platform, f.WorkerID, curTime, curID, f.Limit+1, f.Project, f.Scope.filter(), f.WithSpec)
	if err != nil {
		return nil, "", fmt.Errorf("list builds: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (BuildRow, error) {
		var row BuildRow
		var pos *int
		var spec []byte
		b, err := scanBuildWithPosition(r, &pos, &row.AppName, &row.AppSlug, &row.ProfileName,
			&row.Message, &row.GitCommit, &row.Submitter, &spec)
		if err != nil {
			return row, err
		}
		b.QueuePosition = pos
		b.Spec, err = decodeSpec(spec)
		row.Build = b
		return row, err
	})
	if err != nil {
		return nil, "", fmt.Errorf("list builds: %w", err)
	}
	for i := range list {
		s.stampExpiry(&list[i].Build)
	}
	var next string
	if len(list) > f.Limit {
		last := list[f.Limit-1]
		list = list[:f.Limit]
		next = encodeCursor(last.SubmittedAt, last.ID)
	}
	builds := make([]*api.Build, len(list))
	for i := range list {
		builds[i] = &list[i].Build
	}
	if err := attachArtifacts(ctx, s.pool, builds); err != nil {
		return nil, "", err
	}
	if list == nil {
		list = []BuildRow{}
	}
	return list, next, nil
}

func validStatus(s string) bool {
	switch api.BuildStatus(s) {
	case api.StatusPending, api.StatusAssigned, api.StatusBuilding, api.StatusCompleted, api.StatusFailed, api.StatusCancelled:
		return true
	}
	return false
}

func encodeCursor(t time.Time, id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(t.UTC().Format(time.RFC3339Nano) + "|" + id))
}

func decodeCursor(c string) (time.Time, string, error) {
	bad := fmt.Errorf("%w: cursor %q is not one this server issued; use next_cursor from the previous page", ErrInvalid, c)
	raw, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return time.Time{}, "", bad
	}
	ts, id, ok := strings.Cut(string(raw), "|")
	if !ok || !ValidID(id) {
		return time.Time{}, "", bad
	}
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return time.Time{}, "", bad
	}
	return t, id, nil
}

// AuthenticateBuildToken says which build a build token belongs to. A
// token works until BuildTokenTTL after its submit, and only while the key
// that submitted the build may still see it: revoking the key, or taking
// the build's project from it (unbind, rebind elsewhere), ends the token, as
// KeyScope decides for the key itself.
func (s *Store) AuthenticateBuildToken(ctx context.Context, token string) (buildID string, err error) {
	var expired, keyLive bool
	var project string
	var k APIKey
	var role *string
	err = s.pool.QueryRow(ctx, `SELECT b.id, b.project, b.token_expires_at <= now(), k.id IS NOT NULL AND k.revoked_at IS NULL,
			k.role, `+keyBindings+`, `+bindingsInUse+`
		FROM builds b LEFT JOIN api_keys k ON k.id = b.submitted_by WHERE b.token_hash = $1`,
		HashSecret(token)).Scan(&buildID, &project, &expired, &keyLive, &role, &k.Projects, &k.Pools, &k.ProjectsInUse, &k.PoolsInUse)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return "", ErrUnauthorized
	case err != nil:
		return "", fmt.Errorf("authenticate build token: %w", err)
	case expired:
		return "", fmt.Errorf("%w: the build token has expired; use a developer API key", ErrUnauthorized)
	case !keyLive:
		return "", fmt.Errorf("%w: the API key that submitted this build was revoked, and its build tokens with it", ErrUnauthorized)
	}
	k.Role = *role
	if sc, err := KeyScope(k); err != nil || !sc.Allows(project) {
		return "", fmt.Errorf("%w: the API key that submitted this build may no longer use its project %q, and its build tokens lost it too; use a key of that project", ErrUnauthorized, project)
	}
	return buildID, nil
}

// Cancel cancels a pending build at once, or asks the worker of a running one
// to stop: the change wakes the worker's cancel watch (CancelState), and its
// next heartbeat says so too. Cancelling a cancelled build is a no-op; a
// completed or failed one gives ErrConflict. A cancel recorded before the
// worker reports a success wins: the build ends cancelled (see finish).
func (s *Store) Cancel(ctx context.Context, id string) (api.CancelResponse, error) {
	resp := api.CancelResponse{ID: id}
	err := s.withTx(ctx, func(t *txn) error {
		var platform string
		err := t.QueryRow(ctx, `SELECT status, platform, cancel_requested FROM builds WHERE id = $1 FOR UPDATE`, id).
			Scan(&resp.Status, &platform, &resp.CancelRequested)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%w: no build %q", ErrNotFound, id)
		}
		if err != nil {
			return fmt.Errorf("cancel build: %w", err)
		}
		switch resp.Status {
		case api.StatusCancelled:
			return nil
		case api.StatusCompleted, api.StatusFailed:
			return fmt.Errorf("%w: build %s already %s; nothing to cancel", ErrConflict, id, resp.Status)
		case api.StatusPending:
			_, err = t.Exec(ctx, `UPDATE builds SET status = 'cancelled', cancel_requested = true, completed_at = now(),
				phase = 'cancelled', error_code = 'cancelled', error_message = 'cancelled before it started' WHERE id = $1`, id)
			resp.Status, resp.CancelRequested = api.StatusCancelled, true
			t.emit(Change{Kind: "build", ID: id, Status: string(api.StatusCancelled), Platform: platform})
		default:
			_, err = t.Exec(ctx, `UPDATE builds SET cancel_requested = true WHERE id = $1`, id)
			resp.CancelRequested = true
			t.emit(Change{Kind: "build", ID: id, Status: string(resp.Status), Platform: platform, Event: "build.cancel_requested"})
		}
		if err != nil {
			return fmt.Errorf("cancel build: %w", err)
		}
		return nil
	})
	return resp, err
}

// CancelState says whether a cancel is pending for build id, which worker w
// holds; another worker's build is ErrNotFound.
func (s *Store) CancelState(ctx context.Context, w WorkerAuth, id string) (api.CancelWatchResponse, error) {
	var out api.CancelWatchResponse
	err := s.pool.QueryRow(ctx, `SELECT status, cancel_requested FROM builds WHERE id = $1 AND worker_id = $2`, id, w.WorkerID).
		Scan(&out.Status, &out.CancelRequested)
	if errors.Is(err, pgx.ErrNoRows) {
		return out, fmt.Errorf("%w: build %q is not this worker's", ErrNotFound, id)
	}
	if err != nil {
		return out, fmt.Errorf("read the cancel state of build %s: %w", id, err)
	}
	return out, nil
}

// RetrySource describes the build a retry copies.
type RetrySource struct {
	Platform, Profile, SourceFormat, SourceSHA256, BaseImage string
	Project                                                  string
	SourceFingerprint                                        string // the controller's; "" for none
	SubmittedBy                                              string
	Priority                                                 int
	SourceSize                                               int64
	// CertsDeleted: the build's certificates and credentials are gone.
	HadCerts, HadCredentials, CertsDeleted bool
	Spec                                   []byte // JSON; nil when none
	Timeout                                time.Duration
	Status                                 api.BuildStatus

	// SourceDeleted: the collector deleted the source (--retain-sources).
	SourceDeleted bool
}

// RetrySource reads what a retry of build id needs.
func (s *Store) RetrySource(ctx context.Context, id string) (RetrySource, error) {
	var r RetrySource
	var timeoutSec int
	var base *string
	err := s.pool.QueryRow(ctx, `SELECT platform, profile, source_format, source_sha256, base_image, COALESCE(submitted_by, ''),
		priority, source_size, has_certs, has_credentials, certs_deleted_at IS NOT NULL, spec, timeout_seconds, status,
		source_deleted_at IS NOT NULL, project, COALESCE(source_fingerprint, '') FROM builds WHERE id = $1`, id).
		Scan(&r.Platform, &r.Profile, &r.SourceFormat, &r.SourceSHA256, &base, &r.SubmittedBy, &r.Priority, &r.SourceSize,
			&r.HadCerts, &r.HadCredentials, &r.CertsDeleted, &r.Spec, &timeoutSec, &r.Status, &r.SourceDeleted, &r.Project,
			&r.SourceFingerprint)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, fmt.Errorf("%w: no build %q", ErrNotFound, id)
	}
	if base != nil {
		r.BaseImage = *base
	}
	r.Timeout = time.Duration(timeoutSec) * time.Second
	return r, err
}

// stampExpiry sets when an ended build's artifacts expire (its deletion
// time once the collector deleted them, read by scanBuildWithPosition).
func (s *Store) stampExpiry(b *api.Build) {
	if b.ArtifactsExpired || b.CompletedAt == nil || !b.Status.Terminal() || s.cfg.RetainArtifacts <= 0 {
		return
	}
	t := b.CompletedAt.Add(s.cfg.RetainArtifacts)
	b.ArtifactsExpireAt = &t
}
