package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/freeagent-build/freeagent/api"
)

// WorkerAuth is an authenticated worker instance and the token it should use next.
type WorkerAuth struct {
	WorkerID     string
	InstanceID   string
	Capabilities api.Capabilities
	Grant        api.TokenGrant
	// Key is the API key the request came with: the one that registered
	// the worker (or, for a worker registered before keys were bound, any
	// worker key). Its MaxCapacity caps the builds its workers hold.
	Key APIKey
}

// MaxConcurrent is the number of builds the instance may hold at once.
func (w WorkerAuth) MaxConcurrent() int {
	if w.Capabilities.MaxConcurrentBuilds < 1 {
		return 1
	}
	return w.Capabilities.MaxConcurrentBuilds
}

// Platforms are the platforms the worker builds; both when it named none.
func (w WorkerAuth) Platforms() []string {
	if len(w.Capabilities.Platforms) == 0 {
		return []string{api.PlatformIOS, api.PlatformAndroid}
	}
	return w.Capabilities.Platforms
}

// Registration is the result of Register.
type Registration struct {
	WorkerID       string
	Reregistered   bool
	Grant          api.TokenGrant
	ReleasedBuilds int
}

// ValidateRegistration checks a registration request and normalises it.
func ValidateRegistration(req *api.RegisterRequest) error {
	req.Name = strings.TrimSpace(req.Name)
	if req.Name == "" {
		return fmt.Errorf("%w: field \"name\" is required (a human name for this worker, e.g. the Mac's name)", ErrInvalid)
	}
	if err := checkText("name", req.Name); err != nil {
		return err
	}
	c := req.Capabilities
	for field, v := range map[string]string{"capabilities.xcode_version": c.XcodeVersion, "capabilities.tart_version": c.TartVersion} {
		if err := checkText(field, v); err != nil {
			return err
		}
	}
	for k, v := range c.Labels {
		if err := errors.Join(checkText("capabilities.labels", k), checkText("capabilities.labels", v)); err != nil {
			return fmt.Errorf("%w: field \"capabilities.labels\" must be UTF-8 text without NUL characters", ErrInvalid)
		}
	}
	if len(req.Name) > 200 {
		return fmt.Errorf("%w: field \"name\" is longer than 200 characters", ErrInvalid)
	}
	if req.ID != "" && !validWorkerID(req.ID) {
		return fmt.Errorf("%w: field \"id\" must be 1-64 characters of a-z, A-Z, 0-9, '-' or '_'", ErrInvalid)
	}
	for _, p := range req.Capabilities.Platforms {
		if p != api.PlatformIOS && p != api.PlatformAndroid {
			return fmt.Errorf("%w: field \"capabilities.platforms\" has %q; use \"ios\" and/or \"android\"", ErrInvalid, p)
		}
	}
	if c := req.Capabilities.MaxConcurrentBuilds; c < 0 || c > 64 {
		return fmt.Errorf("%w: field \"capabilities.max_concurrent_builds\" must be between 1 and 64", ErrInvalid)
	}
	// A worker from before pools names its driver only as a label.
	if req.Capabilities.VMDriver == "" {
		req.Capabilities.VMDriver = req.Capabilities.Labels["vm_driver"]
	}
	if req.Capabilities.Pool == "" {
		req.Capabilities.Pool = api.DefaultPool
	}
	if err := ValidatePool("capabilities.pool", req.Capabilities.Pool); err != nil {
		return err
	}
	for field, v := range map[string]string{"capabilities.vm_driver": req.Capabilities.VMDriver, "capabilities.macos_version": req.Capabilities.MacOSVersion} {
		if len(v) > 100 || checkText(field, v) != nil {
			return fmt.Errorf("%w: field %q must be UTF-8 text of at most 100 bytes", ErrInvalid, field)
		}
	}
	if v := req.Capabilities.Image; len(v) > 300 || checkText("capabilities.image", v) != nil {
		return fmt.Errorf("%w: field \"capabilities.image\" must be UTF-8 text of at most 300 bytes", ErrInvalid)
	}
	return checkTools(req.Capabilities.Tools)
}

// Bounds of a worker's capabilities.tools.
const (
	maxTools        = 16
	maxToolVersions = 32
)

var (
	toolNameRe    = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,31}$`)
	toolVersionRe = regexp.MustCompile(`^[0-9A-Za-z][0-9A-Za-z.+_-]{0,63}$`)
)

// checkTools bounds what a worker says of its tools: they are shown to
// developers and matched in every claim.
func checkTools(tools map[string][]string) error {
	if len(tools) > maxTools {
		return fmt.Errorf("%w: field \"capabilities.tools\" names %d tools, at most %d are accepted", ErrInvalid, len(tools), maxTools)
	}
	for name, versions := range tools {
		if !toolNameRe.MatchString(name) {
			return fmt.Errorf("%w: field \"capabilities.tools\": %q is not a tool name (lowercase letters, digits, - and _)", ErrInvalid, name)
		}
		if len(versions) > maxToolVersions {
			return fmt.Errorf("%w: field \"capabilities.tools.%s\" lists %d versions, at most %d are accepted", ErrInvalid, name, len(versions), maxToolVersions)
		}
		for _, v := range versions {
			if !toolVersionRe.MatchString(v) {
				return fmt.Errorf("%w: field \"capabilities.tools.%s\": %q is not a version (e.g. 20.19.4)", ErrInvalid, name, v)
			}
		}
	}
	return nil
}

// checkPool says whether key may register a worker in pool: a key bound to
// pools only in those; an unbound worker key in an untrusted pool, or in
// any pool while no worker key is bound (a one-owner farm). An admin key
// anywhere. Trust is the admin's word: a Mac owner cannot declare their way
// into a trusted pool.
func (t *txn) checkPool(ctx context.Context, key APIKey, pool string) error {
	switch {
	case key.Role == "admin":
		return nil
	case len(key.Pools) > 0:
		if !slices.Contains(key.Pools, pool) {
			return fmt.Errorf("%w: this worker key may register workers only in pools %s, not %q; run the worker with --pool %s, or have an admin bind the key (freeagent-controller keys bind %s --pool %s)",
				ErrForbidden, strings.Join(key.Pools, ", "), pool, key.Pools[0], key.ID, pool)
		}
		return nil
	case !key.PoolsInUse:
		return nil
	}
	var trusted bool
	err := t.QueryRow(ctx, `SELECT trusted FROM pools WHERE name = $1`, pool).Scan(&trusted)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("read pool %s: %w", pool, err)
	}
	if trusted {
		return fmt.Errorf("%w: pool %q is trusted with signing credentials and this worker key is bound to no pool; have an admin bind it (freeagent-controller keys bind %s --pool %s), or run the worker in an untrusted pool", ErrForbidden, pool, key.ID, pool)
	}
	return nil
}

func validWorkerID(id string) bool {
	if len(id) == 0 || len(id) > 64 {
		return false
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// Register creates a worker bound to key, or starts a new instance of an
// existing one. Builds the previous instance held go back to the queue at
// once without consuming an attempt (unless they had fetched their
// credentials): the old process is gone or has been replaced. An id bound
// to another live key is ErrForbidden: one Mac owner cannot take over
// another's worker and the builds it holds. Once that key is revoked, the
// id is free for the next key that registers it.
func (s *Store) Register(ctx context.Context, req api.RegisterRequest, key APIKey) (Registration, error) {
	if err := ValidateRegistration(&req); err != nil {
		return Registration{}, err
	}
	id := req.ID
	if id == "" {
		id = NewID()
	}
	caps, err := json.Marshal(req.Capabilities)
	if err != nil {
		return Registration{}, fmt.Errorf("encode capabilities: %w", err)
	}
	token, hash := newSecret(prefixWorkerToken)
	var reg Registration
	err = s.withTx(ctx, func(t *txn) error {
		var owner *string
		var ownerLive bool
		err := t.QueryRow(ctx, `SELECT w.key_id, k.revoked_at IS NULL FROM workers w LEFT JOIN api_keys k ON k.id = w.key_id
			WHERE w.id = $1 FOR UPDATE OF w`, id).Scan(&owner, &ownerLive)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("register worker: %w", err)
		}
		if owner != nil && *owner != key.ID && ownerLive {
			return fmt.Errorf("%w: worker id %q is registered with another API key; register it with the key that registered it, choose another worker id, or have an admin revoke that key", ErrForbidden, id)
		}
		if err := t.checkPool(ctx, key, req.Capabilities.Pool); err != nil {
			return err
		}
		var inserted bool
		err = t.QueryRow(ctx, `
			INSERT INTO workers (id, name, capabilities, instance_id, status, token_hash, token_issued_at, token_expires_at, key_id, pool, vm_driver)
			VALUES ($1, $2, $3, $4, 'online', $5, now(), now() + $6::interval, $7, $8, $9)
			ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name, capabilities = EXCLUDED.capabilities,
				pool = EXCLUDED.pool, vm_driver = EXCLUDED.vm_driver,
				instance_id = EXCLUDED.instance_id, status = 'online', token_hash = EXCLUDED.token_hash,
				token_issued_at = now(), token_expires_at = EXCLUDED.token_expires_at,
				prev_token_hash = NULL, prev_token_expires_at = NULL, last_seen_at = now(), key_id = EXCLUDED.key_id
			RETURNING (xmax = 0), token_expires_at`,
			id, req.Name, caps, NewID(), hash, s.cfg.TokenTTL, key.ID, req.Capabilities.Pool, req.Capabilities.VMDriver).Scan(&inserted, &reg.Grant.TokenExpiresAt)
		if err != nil {
			return fmt.Errorf("register worker: %w", err)
		}
		reg.WorkerID, reg.Reregistered = id, !inserted
		reg.Grant.AccessToken = token
		event := "worker.registered"
		if !inserted {
			event = "worker.re-registered"
		}
		t.emit(Change{Kind: "worker", ID: id, Status: "online", Event: event, Detail: map[string]any{"name": req.Name}})
		if !inserted {
			// The previous instance's builds: any live attempt of this worker
			// belongs to an older instance now.
			reg.ReleasedBuilds, err = t.requeueWorkerAttempts(ctx, id, "", requeueRelease("worker re-registered; the previous instance's build was handed back"))
		}
		return err
	})
	return reg, err
}

// AuthenticateWorker validates a worker token presented with key (the API
// key that registered the worker: a token with any other key is
// ErrUnauthorized), records contact and rotates the token when due.
//
// The previous token stays valid until the new one is first used or it
// expires, so a lost response never locks a worker out; presenting it
// replaces the new token only once that one has gone unused for longer
// than any answer can take to arrive (tokenLostAfter). A stale token (say
// one a concurrent request still carries while a long poll's answer holds
// the new one) therefore never displaces a token that may be delivered.
func (s *Store) AuthenticateWorker(ctx context.Context, token string, key APIKey) (WorkerAuth, error) {
	w, err := s.authenticateWorker(ctx, token, key.ID)
	w.Key = key
	return w, err
}

// tokenLostAfter is how long a new worker token may go unused before the
// previous one presented replaces it: the configured delivery grace, kept
// well inside the previous token's lifetime.
func (c Config) tokenLostAfter() time.Duration { return min(c.TokenDeliveryGrace, c.TokenTTL*3/4) }

func (s *Store) authenticateWorker(ctx context.Context, token, keyID string) (WorkerAuth, error) {
	if !strings.HasPrefix(token, prefixWorkerToken) {
		return WorkerAuth{}, ErrUnauthorized
	}
	presented := HashSecret(token)
	if w, ok, err := s.authenticateWorkerFast(ctx, token, presented, keyID); ok || err != nil {
		return w, err
	}
	next, nextHash := newSecret(prefixWorkerToken)
	// One statement decides everything against the row's old values:
	//  - current token, older than the rotation age → it becomes the previous one, a new one is issued;
	//  - current token, otherwise → the previous token is revoked (the new one is in use);
	//  - previous token (the answer carrying the current one was lost) → a new current one is issued,
	//    unless the current one may still be on its way (issued less than tokenLostAfter ago), and the
	//    previous one lives a full TTL again: the replacement's answer may be lost too.
	// A rotated-out token lives a full TTL from its rotation or its last replacement, so it outlives
	// tokenLostAfter, and answers lost one after another never lock the worker out.
	var (
		w           WorkerAuth
		caps        []byte
		curHash     []byte
		curExpires  time.Time
		prevExpires *time.Time
		status      string
	)
	err := s.pool.QueryRow(ctx, `
		UPDATE workers SET
			last_seen_at = now(),
			token_hash = CASE
				WHEN token_hash = $1 AND token_issued_at < now() - $3::interval THEN $2
				WHEN token_hash <> $1 AND token_issued_at < now() - $5::interval THEN $2
				ELSE token_hash END,
			token_issued_at = CASE
				WHEN token_hash = $1 AND token_issued_at < now() - $3::interval THEN now()
				WHEN token_hash <> $1 AND token_issued_at < now() - $5::interval THEN now()
				ELSE token_issued_at END,
			token_expires_at = CASE
				WHEN token_hash = $1 AND token_issued_at < now() - $3::interval THEN now() + $4::interval
				WHEN token_hash <> $1 AND token_issued_at < now() - $5::interval THEN now() + $4::interval
				ELSE token_expires_at END,
			prev_token_hash = CASE
				WHEN token_hash = $1 AND token_issued_at < now() - $3::interval THEN token_hash
				WHEN token_hash = $1 THEN NULL
				ELSE prev_token_hash END,
			prev_token_expires_at = CASE
				WHEN token_hash = $1 AND token_issued_at < now() - $3::interval THEN greatest(token_expires_at, now() + $4::interval)
				WHEN token_hash = $1 THEN NULL
				WHEN token_hash <> $1 AND token_issued_at < now() - $5::interval THEN greatest(prev_token_expires_at, now() + $4::interval)
				ELSE prev_token_expires_at END
		WHERE status <> 'unregistered' AND (key_id IS NULL OR key_id = $6) AND (
			(token_hash = $1 AND token_expires_at > now()) OR
			(prev_token_hash = $1 AND prev_token_expires_at > now()))
		RETURNING id, instance_id, capabilities, token_hash, token_expires_at, prev_token_expires_at, status`,
		presented, nextHash, s.cfg.TokenRotateAfter, s.cfg.TokenTTL, s.cfg.tokenLostAfter(), keyID,
	).Scan(&w.WorkerID, &w.InstanceID, &caps, &curHash, &curExpires, &prevExpires, &status)
	if errors.Is(err, pgx.ErrNoRows) {
		return WorkerAuth{}, ErrUnauthorized
	}
	if err != nil {
		return WorkerAuth{}, fmt.Errorf("authenticate worker: %w", err)
	}
	if err := json.Unmarshal(caps, &w.Capabilities); err != nil {
		return WorkerAuth{}, fmt.Errorf("decode worker capabilities: %w", err)
	}
	if status == "offline" { // the reaper gave it up, yet it is back within its token's life
		if err := s.markOnline(ctx, w.WorkerID); err != nil {
			return WorkerAuth{}, err
		}
	}
	switch {
	case string(curHash) == string(nextHash):
		w.Grant = api.TokenGrant{AccessToken: next, TokenExpiresAt: curExpires}
	case string(curHash) == string(presented):
		w.Grant = api.TokenGrant{AccessToken: token, TokenExpiresAt: curExpires}
	default: // the previous token, kept because the current one is brand new
		w.Grant = api.TokenGrant{AccessToken: token, TokenExpiresAt: *prevExpires}
	}
	return w, nil
}

// lastSeenResolution is how stale workers.last_seen_at may get before a
// request refreshes it. It only has to be fine next to the 5-minute offline
// threshold, and skipping the write spares most worker requests a commit.
const lastSeenResolution = 10 * time.Second

// authenticateWorkerFast answers the common case with a read: the current
// token, no rotation due, no previous token to retire, contact recorded
// recently. ok is false when the full, writing path is needed.
func (s *Store) authenticateWorkerFast(ctx context.Context, token string, presented []byte, keyID string) (WorkerAuth, bool, error) {
	var w WorkerAuth
	var caps []byte
	err := s.pool.QueryRow(ctx, `SELECT id, instance_id, capabilities, token_expires_at FROM workers
		WHERE token_hash = $1 AND token_expires_at > now() AND status = 'online' AND prev_token_hash IS NULL
			AND token_issued_at >= now() - $2::interval AND last_seen_at >= now() - $3::interval
			AND (key_id IS NULL OR key_id = $4)`,
		presented, s.cfg.TokenRotateAfter, lastSeenResolution, keyID).Scan(&w.WorkerID, &w.InstanceID, &caps, &w.Grant.TokenExpiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return w, false, nil
	}
	if err != nil {
		return w, false, fmt.Errorf("authenticate worker: %w", err)
	}
	if err := json.Unmarshal(caps, &w.Capabilities); err != nil {
		return w, false, fmt.Errorf("decode worker capabilities: %w", err)
	}
	w.Grant.AccessToken = token
	return w, true, nil
}

// markOnline records that a worker marked offline made contact again.
func (s *Store) markOnline(ctx context.Context, id string) error {
	return s.withTx(ctx, func(t *txn) error {
		tag, err := t.Exec(ctx, `UPDATE workers SET status = 'online' WHERE id = $1 AND status = 'offline'`, id)
		if err != nil {
			return fmt.Errorf("mark worker online: %w", err)
		}
		if tag.RowsAffected() == 1 {
			t.emit(Change{Kind: "worker", ID: id, Status: "online", Event: "worker.online"})
		}
		return nil
	})
}

// Unregister ends the worker instance: its builds go back to the queue at
// once without consuming an attempt, and its tokens stop working.
func (s *Store) Unregister(ctx context.Context, w WorkerAuth) (int, error) {
	var n int
	err := s.withTx(ctx, func(t *txn) error {
		_, dead := newSecret(prefixWorkerToken) // replaces the hash: nobody holds this token
		tag, err := t.Exec(ctx, `UPDATE workers SET status = 'unregistered', token_hash = $3, prev_token_hash = NULL,
			prev_token_expires_at = NULL, last_seen_at = now() WHERE id = $1 AND instance_id = $2`, w.WorkerID, w.InstanceID, dead)
		if err != nil {
			return fmt.Errorf("unregister worker: %w", err)
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("%w: worker %s was re-registered by another instance", ErrConflict, w.WorkerID)
		}
		t.emit(Change{Kind: "worker", ID: w.WorkerID, Status: "unregistered"})
		n, err = t.requeueWorkerAttempts(ctx, w.WorkerID, w.InstanceID, requeueRelease("worker unregistered; build handed back"))
		return err
	})
	return n, err
}

// requeueWorkerAttempts requeues the live attempts of a worker; instance ""
// means every instance.
func (t *txn) requeueWorkerAttempts(ctx context.Context, workerID, instance string, r requeueReason) (int, error) {
	rows, err := t.Query(ctx, `SELECT id FROM build_attempts WHERE worker_id = $1 AND status IN ('assigned', 'running')
		AND ($2 = '' OR worker_instance = $2) FOR UPDATE`, workerID, instance)
	if err != nil {
		return 0, fmt.Errorf("find worker's builds: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return 0, fmt.Errorf("find worker's builds: %w", err)
	}
	return t.requeue(ctx, ids, r)
}

// ListWorkers returns every worker that has not unregistered, by name.
func (s *Store) ListWorkers(ctx context.Context) ([]api.Worker, error) { return s.listWorkers(ctx, "") }

// listWorkers lists every worker, or only worker id when id is set.
func (s *Store) listWorkers(ctx context.Context, id string) ([]api.Worker, error) {
	rows, err := s.pool.Query(ctx, `SELECT w.id, w.name, w.status, w.paused, w.capabilities, w.registered_at, w.last_seen_at,
		w.builds_completed, w.builds_failed, COALESCE(w.key_id, ''), COALESCE(w.attention_reason, ''),
		w.owner_paused, COALESCE(w.host_pause_reason, ''),
		COALESCE((SELECT array_agg(build_id ORDER BY started_at) FROM build_attempts a WHERE a.worker_id = w.id AND a.status IN ('assigned','running')), '{}'),
		w.cache_bytes, w.cache_hits, w.cache_misses, `+poolAdmitted+`,
		w.spare_state, w.spare_reason, w.spare_since, w.spare_hits, w.spare_misses
		FROM workers w WHERE w.status <> 'unregistered' AND ($1 = '' OR w.id = $1) ORDER BY w.name, w.id`, id)
	if err != nil {
		return nil, fmt.Errorf("list workers: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (api.Worker, error) {
		var w api.Worker
		var caps []byte
		var c api.WorkerCache
		var spare api.WorkerSpare
		var spareState *string
		var spareSince *time.Time
		if err := r.Scan(&w.ID, &w.Name, &w.Status, &w.Paused, &caps, &w.RegisteredAt, &w.LastSeenAt, &w.BuildsCompleted, &w.BuildsFailed,
			&w.KeyID, &w.AttentionReason, &w.OwnerPaused, &w.HostPauseReason, &w.ActiveBuilds, &c.Bytes, &c.Hits, &c.Misses, &w.PoolAdmitted,
			&spareState, &spare.Reason, &spareSince, &spare.Hits, &spare.Misses); err != nil {
			return w, err
		}
		if spareState != nil {
			spare.State = *spareState
			if spareSince != nil {
				spare.Since = *spareSince
			}
			w.Spare = &spare
		}
		if c.Bytes > 0 || c.Hits > 0 || c.Misses > 0 {
			c.Keys = []string{} // the keys are the claim's business, not the listing's
			w.Cache = &c
		}
		w.NeedsAttention = w.AttentionReason != ""
		w.Summarize()
		return w, json.Unmarshal(caps, &w.Capabilities)
	})
}

// CheckRequirements validates a spec's requires (api.Requirements) with
// the bounds of the capabilities it is matched against: the claim reads
// it in SQL for every build it passes.
func CheckRequirements(r *api.Requirements) error {
	if r == nil {
		return nil
	}
	invalid := func(format string, args ...any) error {
		return fmt.Errorf("%w: field \"spec\": requires."+format, append([]any{ErrInvalid}, args...)...)
	}
	switch {
	case r.CPUCores < 0 || r.CPUCores > 1024:
		return invalid("cpu_cores must be between 0 and 1024, got %d", r.CPUCores)
	case r.MemoryGB < 0 || r.MemoryGB > 1<<16:
		return invalid("memory_gb must be between 0 and 65536, got %d", r.MemoryGB)
	case len(r.Image) > 300 || checkText("requires.image", r.Image) != nil:
		return invalid("image must be UTF-8 text of at most 300 bytes")
	case r.Xcode != "" && !toolVersionRe.MatchString(r.Xcode):
		return invalid("xcode %q is not a version (e.g. 16.4)", r.Xcode)
	case len(r.Tools) > maxTools:
		return invalid("tools names %d tools, at most %d are accepted", len(r.Tools), maxTools)
	}
	for name, v := range r.Tools {
		if !toolNameRe.MatchString(name) || !toolVersionRe.MatchString(v) {
			return invalid("tools: %s %q is not a tool name and version (e.g. node 20.19.4)", name, v)
		}
	}
	return nil
}

// FarmOffers sums up what the online workers offer builds, those of the
// pools project may use when it names a project that lists pools (""
// any): one api.Offer per distinct offer, counting its workers.
func (s *Store) FarmOffers(ctx context.Context, project string) (api.FarmOffers, error) {
	rows, err := s.pool.Query(ctx, `SELECT w.capabilities FROM workers w
		WHERE w.status = 'online' AND w.last_seen_at > now() - $1::interval
			AND ($2 = '' OR NOT EXISTS (SELECT 1 FROM project_pools pp WHERE pp.project = $2)
				OR EXISTS (SELECT 1 FROM project_pools pp WHERE pp.project = $2 AND pp.pool = w.pool))
		ORDER BY w.name, w.id`, s.cfg.WorkerOfflineAfter, project)
	if err != nil {
		return api.FarmOffers{}, fmt.Errorf("list the farm's offers: %w", err)
	}
	caps, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (api.Capabilities, error) {
		var raw []byte
		var c api.Capabilities
		if err := r.Scan(&raw); err != nil {
			return c, err
		}
		return c, json.Unmarshal(raw, &c)
	})
	if err != nil {
		return api.FarmOffers{}, fmt.Errorf("list the farm's offers: %w", err)
	}
	out := api.FarmOffers{Offers: []api.Offer{}}
	index := map[string]int{}
	for _, c := range caps {
		o := api.Offer{Platforms: WorkerAuth{Capabilities: c}.Platforms(), CPUCores: c.CPUCores, MemoryGB: c.MemoryGB,
			XcodeVersion: c.XcodeVersion, Image: c.Image, Tools: c.Tools}
		key, err := json.Marshal(o)
		if err != nil {
			return api.FarmOffers{}, fmt.Errorf("list the farm's offers: %w", err)
		}
		i, ok := index[string(key)]
		if !ok {
			i, index[string(key)] = len(out.Offers), len(out.Offers)
			out.Offers = append(out.Offers, o)
		}
		out.Offers[i].Workers++
	}
	return out, nil
}
