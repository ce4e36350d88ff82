package store

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/install"
	"github.com/freeagent-build/freeagent/internal/cachekey"
)

// requeueReason says why live attempts end without a result and whether that
// counts against the build's attempts.
type requeueReason struct {
	consume       bool   // counts as a used attempt, with backoff; false hands the build back at once
	attemptStatus string // expired | released | failed
	code, message string
}

// requeueRelease is an interruption (drain, unregister, re-register): the
// build goes back at once and the attempt is not counted.
func requeueRelease(msg string) requeueReason {
	return requeueReason{attemptStatus: "released", code: "released", message: msg}
}

// requeue ends the given live attempts and returns their builds to pending:
// with backoff min(MaxBackoff, 2^attempts) when the attempt is consumed; as
// failed (max_attempts, a dead letter) when none are left; as cancelled when
// a cancel was requested. It is the one place a running build leaves its
// worker without a result.
//
// A release (not consumed) of an attempt whose VM had fetched its
// credentials is consumed all the same and audited on the worker: the
// signing identity left the controller, so handing the build back cannot
// be free. Too many such releases in a window raise the worker's
// needs-attention state.
func (t *txn) requeue(ctx context.Context, attemptIDs []string, r requeueReason) (int, error) {
	if len(attemptIDs) == 0 {
		return 0, nil
	}
	rows, err := t.Query(ctx, `
		WITH a AS (
			UPDATE build_attempts SET status = $2, ended_at = now(), error_code = $3, error_message = $4,
				otp_hash = NULL, vm_token_hash = NULL
			WHERE id = ANY($1) AND status IN ('assigned', 'running')
			RETURNING id, build_id, worker_id, secrets_fetched, ($5 OR secrets_fetched <> '{}') AS consume
		), n AS (
			SELECT b.id, a.id AS attempt_id, a.worker_id, a.secrets_fetched, a.consume, CASE
				WHEN b.cancel_requested THEN 'cancelled'
				WHEN a.consume AND b.attempts >= b.max_attempts THEN 'failed'
				ELSE 'pending' END AS status
			FROM builds b JOIN a ON b.id = a.build_id AND b.attempt_id = a.id
		)
		UPDATE builds b SET
			status = n.status,
			attempts = CASE WHEN n.consume THEN b.attempts ELSE b.attempts - 1 END,
			run_after = now() + CASE WHEN n.consume THEN make_interval(secs => least($6::float8, power(2, b.attempts))) ELSE interval '0' END,
			worker_id = CASE WHEN n.status = 'pending' THEN NULL ELSE b.worker_id END,
			attempt_id = NULL, lease_expires_at = NULL, phase = '', progress = NULL,
			completed_at = CASE WHEN n.status = 'pending' THEN NULL ELSE now() END,
			error_code = CASE n.status WHEN 'cancelled' THEN 'cancelled' WHEN 'failed' THEN 'max_attempts' ELSE b.error_code END,
			error_message = CASE n.status
				WHEN 'cancelled' THEN 'cancelled while running'
				WHEN 'failed' THEN format('gave up after %s attempts; last: %s', b.attempts, $4::text)
				ELSE b.error_message END
		FROM n WHERE b.id = n.id
		RETURNING b.id, b.status, b.platform, n.attempt_id, n.worker_id, n.secrets_fetched, n.consume`,
		attemptIDs, r.attemptStatus, r.code, r.message, r.consume, t.cfg.MaxBackoff.Seconds())
	if err != nil {
		return 0, fmt.Errorf("requeue builds: %w", err)
	}
	type requeued struct {
		change            Change
		attemptID, worker string
		fetched           []string
		consumed          bool
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (requeued, error) {
		q := requeued{change: Change{Kind: "build"}}
		err := row.Scan(&q.change.ID, &q.change.Status, &q.change.Platform, &q.attemptID, &q.worker, &q.fetched, &q.consumed)
		return q, err
	})
	if err != nil {
		return 0, fmt.Errorf("requeue builds: %w", err)
	}
	var suspects []string // workers that handed back attempts holding credentials
	for _, q := range out {
		c := q.change
		c.Detail = map[string]any{"code": r.code, "attempt_consumed": q.consumed}
		if c.Status == string(api.StatusPending) {
			c.Event = "build.requeued"
		}
		t.emit(c)
		if !r.consume && len(q.fetched) > 0 {
			t.emit(Change{Kind: "worker", ID: q.worker, Event: "worker.released_after_credentials",
				Detail: map[string]any{"build_id": c.ID, "attempt_id": q.attemptID, "fetched": q.fetched, "reason": r.message}})
			if !slices.Contains(suspects, q.worker) {
				suspects = append(suspects, q.worker)
			}
		}
	}
	for _, id := range suspects {
		if err := t.checkReleases(ctx, id); err != nil {
			return 0, err
		}
	}
	return len(out), nil
}

// checkReleases raises a worker's needs-attention state once it handed back
// ReleaseAttentionCount attempts that had fetched credentials within
// ReleaseAttentionWindow, counting only releases after the last
// acknowledgement.
func (t *txn) checkReleases(ctx context.Context, workerID string) error {
	var reason *string
	err := t.QueryRow(ctx, `
		WITH c AS (
			SELECT count(*) AS n FROM build_attempts a, workers w
			WHERE w.id = $1 AND a.worker_id = w.id AND a.status = 'released' AND a.secrets_fetched <> '{}'
				AND a.ended_at > greatest(now() - $2::interval, COALESCE(w.attention_at, '-infinity'))
		)
		UPDATE workers SET attention_at = now(),
			attention_reason = format('handed back %s builds after fetching their signing credentials or secrets within %s', c.n, $4::text)
		FROM c WHERE id = $1 AND attention_reason IS NULL AND c.n >= $3
		RETURNING attention_reason`,
		workerID, t.cfg.ReleaseAttentionWindow, t.cfg.ReleaseAttentionCount, t.cfg.ReleaseAttentionWindow.String()).Scan(&reason)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("check the worker's releases: %w", err)
	}
	t.emit(Change{Kind: "worker", ID: workerID, Event: "worker.needs_attention", Detail: map[string]any{"reason": *reason}})
	return nil
}

func collectBuildChanges(rows pgx.Rows) ([]Change, error) {
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Change, error) {
		c := Change{Kind: "build"}
		err := r.Scan(&c.ID, &c.Status, &c.Platform)
		return c, err
	})
}

// PollResult is what one claim attempt found. Poll hands the worker instance
// first a job it was given but never acknowledged (its answer was lost),
// else the next claimable build in (priority, submitted_at) order, skipping
// rows other pollers hold locked. Job is nil when the worker is at capacity or nothing is claimable.
type PollResult struct {
	Job        *api.Job
	AtCapacity bool
	Paused     bool // an admin paused the worker: it gets no new builds
	// Claimable is set when a build of the worker's platforms was pending
	// and due: with no Job, one this worker may not take (its pool, trust
	// or capabilities), or one another claim held.
	Claimable bool
	// Claimed is set when Job is a new claim rather than a redelivery;
	// Pickup is then how long the build had been claimable (since its
	// submit or the end of its backoff).
	Claimed bool
	Pickup  time.Duration
}

// Poll hands out at most one job; see PollResult. One read-only statement
// looks first (a claimable build, the worker's live attempts): most polls
// of an idle farm end there, and a full worker never opens a transaction.
func (s *Store) Poll(ctx context.Context, w WorkerAuth) (PollResult, error) {
	var res PollResult
	var unacked bool
	var live int
	err := s.pool.QueryRow(ctx, `
		SELECT EXISTS (SELECT 1 FROM builds WHERE status = 'pending' AND run_after <= now() AND platform = ANY($3)),
			EXISTS (SELECT 1 FROM workers WHERE id = $1 AND paused),
			count(*), count(*) FILTER (WHERE status = 'assigned' AND worker_instance = $2) > 0
		FROM build_attempts WHERE worker_id = $1 AND status IN ('assigned', 'running')`,
		w.WorkerID, w.InstanceID, w.Platforms()).Scan(&res.Claimable, &res.Paused, &live, &unacked)
	if err != nil {
		return res, fmt.Errorf("poll: %w", err)
	}
	switch {
	case unacked:
		return s.redeliver(ctx, w)
	case res.Paused:
		return res, nil
	case live >= w.MaxConcurrent():
		res.AtCapacity = true
		return res, nil
	case !res.Claimable:
		return res, nil
	}
	// The claim re-checks capacity itself: this worker may poll twice at once.
	err = s.withTx(ctx, func(t *txn) error {
		if w.Key.MaxCapacity != nil {
			full, err := t.keyAtCapacity(ctx, w.Key.ID, *w.Key.MaxCapacity)
			if err != nil || full {
				res.AtCapacity = full
				return err
			}
		}
		var err error
		res.Job, res.Pickup, err = t.claim(ctx, w)
		res.Claimed = res.Job != nil
		return err
	})
	return res, err
}

// keyAtCapacity reports whether the workers of a capped key hold limit live
// attempts. It locks the key's row until the transaction ends, so claims by
// the key's workers take turns and together never pass the cap.
func (t *txn) keyAtCapacity(ctx context.Context, keyID string, limit int) (bool, error) {
	if _, err := t.Exec(ctx, `SELECT 1 FROM api_keys WHERE id = $1 FOR UPDATE`, keyID); err != nil {
		return false, fmt.Errorf("lock the key's capacity: %w", err)
	}
	var live int
	err := t.QueryRow(ctx, `SELECT count(*) FROM build_attempts a JOIN workers w ON w.id = a.worker_id
		WHERE w.key_id = $1 AND a.status IN ('assigned', 'running')`, keyID).Scan(&live)
	if err != nil {
		return false, fmt.Errorf("count the key's live builds: %w", err)
	}
	return live >= limit, nil
}

// redeliver hands the worker instance the job it was given but never
// acknowledged (its poll answer was lost).
func (s *Store) redeliver(ctx context.Context, w WorkerAuth) (PollResult, error) {
	var res PollResult
	err := s.withTx(ctx, func(t *txn) error {
		var id *string
		err := t.QueryRow(ctx, `SELECT min(id) FROM build_attempts
			WHERE worker_id = $1 AND worker_instance = $2 AND status = 'assigned'`, w.WorkerID, w.InstanceID).Scan(&id)
		if err != nil || id == nil { // nil: the reaper took it back meanwhile
			return err
		}
		res.Job, err = t.redeliver(ctx, *id)
		return err
	})
	return res, err
}

// jobColumns are a job's columns of build b and its attempt's cache
// domain, which each query names cache_domain.
const jobColumns = `b.id, b.platform, b.profile, b.priority, b.has_certs, b.base_image, b.timeout_seconds, b.lease_expires_at,
	b.project, b.spec->'caches' AS caches, cache_domain`

func scanJob(row pgx.Row, j *api.Job, extra ...any) error {
	var hasCerts bool
	var caches []byte
	dest := append([]any{&j.ID, &j.Platform, &j.Profile, &j.Priority, &hasCerts, &j.BaseImage, &j.BuildTimeoutSeconds, &j.LeaseExpiresAt,
		&j.Project, &caches, &j.CacheDomain}, extra...)
	if err := row.Scan(dest...); err != nil {
		return err
	}
	if len(caches) > 0 && string(caches) != "null" {
		if err := json.Unmarshal(caches, &j.Caches); err != nil {
			return fmt.Errorf("build %s: its spec's caches: %w", j.ID, err)
		}
	}
	qualifyCaches(j.Caches, j.CacheDomain)
	j.SourceURL = "/api/builds/" + j.ID + "/source"
	if hasCerts {
		u := "/api/builds/" + j.ID + "/certs-secure"
		j.CertsURL = &u
	}
	return nil
}

// needsTrust is true for a build (alias c) that carries signing
// credentials or sensitive or secret variables of its project and
// environment: one that only a trusted pool may run.
const needsTrust = `(c.has_certs OR c.has_credentials OR EXISTS (SELECT 1 FROM project_variables v
	WHERE v.project = c.project AND v.environment = c.spec->>'environment' AND v.visibility <> 'plaintext'))`

// cacheDomain is the cache domain of a build (alias c): the builds whose
// dependency caches it may restore, and whose later builds may restore
// what it saves. A project an admin made one domain (project_settings)
// is one; otherwise a domain is one environment's builds with secrets
// (needsTrust: signing credentials, sensitive or secret variables) or
// without, so that no build without secrets plants what one with them
// restores. The project is in every key already (cachekey).
const cacheDomain = `(CASE WHEN EXISTS (SELECT 1 FROM project_settings ps WHERE ps.project = c.project AND ps.one_cache_domain) THEN 'project'
	ELSE 'environment:' || COALESCE(c.spec->>'environment', '') || CASE WHEN ` + needsTrust + ` THEN ' with secrets' ELSE ' without secrets' END END)`

// warmKey is cachekey.Qualify in SQL: the key x of a build v of domain
// v.cache_domain as the worker holds it.
const warmKey = `encode(sha256(convert_to(v.cache_domain || E'\n' || x, 'UTF8')), 'hex')`

// qualifyCaches binds a job's cache keys to its cache domain.
func qualifyCaches(caches []api.CacheEntry, domain string) {
	for i := range caches {
		caches[i].Key = cachekey.Qualify(domain, caches[i].Key)
	}
}

// poolAdmitted is true when worker w's key may place it in its pool while
// that pool is trusted: checkPool's rule, read again at every claim, so that
// a registration made while the pool was untrusted (or before the key was
// unbound) is not carried over into its trust. An admin key, a key bound to
// the pool, or any key while no live worker key is bound to a pool (a
// one-owner farm).
const poolAdmitted = `(NOT EXISTS (SELECT 1 FROM api_key_pools b JOIN api_keys l ON l.id = b.key_id WHERE l.revoked_at IS NULL)
		OR EXISTS (SELECT 1 FROM api_keys k WHERE k.id = w.key_id AND (k.role = 'admin'
			OR EXISTS (SELECT 1 FROM api_key_pools b WHERE b.key_id = k.id AND b.pool = w.pool))))`

// routable is true when the worker me (pool, vm_driver, trusted,
// allow_local, caps) may run build c: its pool is one the build's project
// may use (a project that lists none may use any), a build that needs
// trust goes only to a trusted pool, and to a local-driver worker only when
// the pool allows it, and the worker offers what the build requires.
const routable = `(NOT EXISTS (SELECT 1 FROM project_pools pp WHERE pp.project = c.project)
		OR EXISTS (SELECT 1 FROM project_pools pp WHERE pp.project = c.project AND pp.pool = me.pool))
	AND (` + trustedWorker + ` OR NOT ` + needsTrust + `)
	AND ` + requirementsMet

// requirementsMet is true when the capabilities of worker me (caps) meet
// the requirements of build c's spec (api.Requirements.Unmet, the same
// conditions): at least the CPU cores and memory, the image by name, an
// Xcode and each tool at the version or one it begins ("16" takes 16.4).
// checkRequirements let only well-typed requirements in; jsonb compares
// the numbers, so no cast can fail a claim.
const requirementsMet = `(c.spec->'requires' IS NULL OR (
		COALESCE(me.caps->'cpu_cores', '0') >= COALESCE(c.spec->'requires'->'cpu_cores', '0')
		AND COALESCE(me.caps->'memory_gb', '0') >= COALESCE(c.spec->'requires'->'memory_gb', '0')
		AND (c.spec->'requires'->>'image' IS NULL OR me.caps->>'image' = c.spec->'requires'->>'image')
		AND (c.spec->'requires'->>'xcode' IS NULL OR me.caps->>'xcode_version' = c.spec->'requires'->>'xcode'
			OR starts_with(me.caps->>'xcode_version', (c.spec->'requires'->>'xcode') || '.'))
		AND NOT EXISTS (SELECT 1 FROM jsonb_each_text(c.spec->'requires'->'tools') r(name, want)
			WHERE NOT EXISTS (SELECT 1 FROM jsonb_array_elements_text(me.caps->'tools'->r.name) h(have)
				WHERE h.have = r.want OR starts_with(h.have, r.want || '.')))))`

// workerPool selects a worker (w) with what its pool says of it: pool,
// vm_driver, trusted (the pool is, and has admitted the worker),
// allow_local, and its capabilities as caps (the names routable and
// trustedWorker read as me).
const workerPool = `SELECT w.pool, w.vm_driver, COALESCE(p.trusted, false) AND ` + poolAdmitted + ` AS trusted,
		COALESCE(p.allow_local, false) AS allow_local, w.capabilities AS caps
		FROM workers w LEFT JOIN pools p ON p.name = w.pool`

// trustedWorker is true when the worker me (trusted, vm_driver,
// allow_local: its pool's word) may hold signing credentials and
// sensitive or secret variables: its pool is trusted, and a local-driver
// worker only when the pool allows it.
const trustedWorker = `(me.trusted AND (me.vm_driver <> '` + api.VMDriverLocal + `' OR me.allow_local))`

// eligible is true when build c is claimable now by the worker (me) whose
// live attempts leave it room.
const eligible = `c.status = 'pending' AND c.run_after <= now() AND c.platform = ANY($3) AND (SELECT free FROM live)
				AND ` + routable

// claimSQL is the claim (see claim). Warm placement looks at most 100
// builds behind the queue head: the builds of one priority that arrived
// within WarmPlacementWait, in practice far fewer, so the claim costs the
// same with a million builds queued as with ten. $1 worker, $2 instance, $3 its
// platforms, $4 the new attempt, $5 lease TTL, $6 lease token hash, $7 OTP
// hash, $8 OTP TTL, $9 the worker's concurrency, $10 WarmPlacementWait.
const claimSQL = `
	WITH live AS (
		-- Nothing new while the worker is at capacity or has a job it
		-- never acknowledged (that one is delivered again instead).
		SELECT count(*) < $9 AND count(*) FILTER (WHERE status = 'assigned' AND worker_instance = $2) = 0 AS free
		FROM build_attempts WHERE worker_id = $1 AND status IN ('assigned', 'running')
	), me AS (
		` + workerPool + ` WHERE w.id = $1 AND NOT w.paused -- a paused worker drains
	), head AS (
		-- The build first come, first served takes, locked by another
		-- claim or not: its priority is the one warm placement picks
		-- within, and its wait says whether warm placement is over.
		SELECT c.priority, c.run_after FROM builds c, me WHERE ` + eligible + `
		ORDER BY c.priority, c.submitted_at, c.id LIMIT 1
	), warm AS (
		SELECT v.id FROM (
			SELECT c.id, c.submitted_at, c.cache_keys, ` + cacheDomain + ` AS cache_domain FROM builds c, me, head
			WHERE ` + eligible + ` AND c.priority = head.priority AND head.run_after > now() - $10::interval
				AND EXISTS (SELECT 1 FROM worker_cache_keys WHERE worker_id = $1)
			ORDER BY c.priority, c.submitted_at, c.id LIMIT 100 -- the look-ahead (builds_claim's order)
		) v
		-- The keys as the worker holds them: bound to the build's domain.
		WHERE EXISTS (SELECT 1 FROM worker_cache_keys k, unnest(v.cache_keys) x
			WHERE k.worker_id = $1 AND k.cache_key = ` + warmKey + `)
		ORDER BY v.submitted_at, v.id LIMIT 1
	), pick AS (
		SELECT c.id FROM builds c, warm WHERE c.id = warm.id AND c.status = 'pending' AND c.run_after <= now()
		FOR UPDATE OF c SKIP LOCKED
	), fifo AS (
		SELECT c.id FROM builds c, me WHERE ` + eligible + `
		ORDER BY c.priority, c.submitted_at, c.id
		LIMIT 1 FOR UPDATE OF c SKIP LOCKED
	), next AS (
		-- Evaluated lazily: fifo locks nothing when pick found a build.
		SELECT id, true AS warm FROM pick UNION ALL SELECT id, false FROM fifo LIMIT 1
	), dom AS (
		-- The attempt's cache domain, from what the claim fixes: its
		-- variables (this snapshot's, as fixed reads them) and credentials.
		SELECT ` + cacheDomain + ` AS cache_domain FROM next JOIN builds c ON c.id = next.id
	), fixed AS (
		-- The variables the attempt's VM reads (AttemptEnvironment), fixed
		-- now: ones set later never reach it. Sensitive and secret ones
		-- only for a worker trusted with them (routable let no other claim
		-- a build that has any).
		SELECT v.name, v.visibility, v.type, v.value_sealed, v.updated_at, v.value_hmac, v.value_hmac_of
		FROM next JOIN builds c ON c.id = next.id, me, project_variables v
		WHERE v.project = c.project AND v.environment = c.spec->>'environment'
			AND (v.visibility = 'plaintext' OR ` + trustedWorker + `)
	), b AS (
		UPDATE builds SET status = 'assigned', worker_id = $1, attempt_id = $4, attempts = attempts + 1,
			lease_expires_at = now() + $5::interval, phase = 'assigned', progress = NULL,
			env_digest = (SELECT ` + environmentDigest + ` FROM fixed v)
		FROM next WHERE builds.id = next.id
		RETURNING builds.*, next.warm
	), a AS (
		INSERT INTO build_attempts (id, build_id, number, worker_id, worker_instance, status, lease_token_hash, otp_hash, otp_expires_at,
			variables_fixed, cache_domain)
		SELECT $4, b.id, (SELECT COALESCE(max(number), 0) + 1 FROM build_attempts WHERE build_id = b.id),
			$1, $2, 'assigned', $6, $7, now() + $8::interval, true, dom.cache_domain FROM b, dom
		RETURNING cache_domain
	), av AS (
		INSERT INTO attempt_variables (attempt_id, name, visibility, type, value_sealed, updated_at)
		SELECT $4, v.name, v.visibility, v.type, v.value_sealed, v.updated_at FROM b, fixed v
	)
	SELECT ` + jobColumns + `, greatest(0, extract(epoch FROM clock_timestamp() - b.run_after))::float8, b.warm FROM b, a`

// claim assigns the worker the next build: among the eligible builds of
// the best priority, the oldest one needing a dependency cache the worker
// holds (worker_cache_keys ∩ builds.cache_keys), else the oldest. Warm
// placement yields to first come, first served once the queue head has been
// claimable for WarmPlacementWait. Both picks lock with SKIP LOCKED, and
// the first-come pick runs only when the warm one found nothing, so each
// build is assigned once and one statement still does the claim, fixing
// the attempt's variables with it.
func (t *txn) claim(ctx context.Context, w WorkerAuth) (*api.Job, time.Duration, error) {
	lease, leaseHash := newSecret(prefixLeaseToken)
	otp, otpHash := newSecret(prefixOTP)
	j := &api.Job{AttemptID: NewID(), LeaseToken: lease, OTP: otp}
	var waited float64 // seconds the build was claimable before this claim
	var warm bool
	err := scanJob(t.QueryRow(ctx, claimSQL,
		w.WorkerID, w.InstanceID, w.Platforms(), j.AttemptID, t.cfg.LeaseTTL, leaseHash, otpHash, t.cfg.OTPTTL, w.MaxConcurrent(),
		t.cfg.WarmPlacementWait), j, &waited, &warm)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("claim build: %w", err)
	}
	t.emit(Change{Kind: "build", ID: j.ID, Status: string(api.StatusAssigned), Platform: j.Platform,
		Detail: map[string]any{"worker_id": w.WorkerID, "attempt_id": j.AttemptID, "warm": warm}})
	return j, time.Duration(waited * float64(time.Second)), nil
}

// redeliver gives a fresh lease token and OTP to an attempt whose poll answer
// never reached the worker; the old ones, never seen, stop working.
func (t *txn) redeliver(ctx context.Context, attemptID string) (*api.Job, error) {
	lease, leaseHash := newSecret(prefixLeaseToken)
	otp, otpHash := newSecret(prefixOTP)
	j := &api.Job{AttemptID: attemptID, LeaseToken: lease, OTP: otp}
	err := scanJob(t.QueryRow(ctx, `
		WITH a AS (
			UPDATE build_attempts SET lease_token_hash = $2, otp_hash = $3, otp_expires_at = now() + $4::interval
			WHERE id = $1 AND status = 'assigned' RETURNING build_id, cache_domain
		), b AS (
			UPDATE builds SET lease_expires_at = now() + $5::interval FROM a
			WHERE builds.id = a.build_id AND builds.attempt_id = $1 RETURNING builds.*, a.cache_domain
		)
		SELECT `+jobColumns+` FROM b`, attemptID, leaseHash, otpHash, t.cfg.OTPTTL, t.cfg.LeaseTTL), j)
	if err != nil {
		return nil, fmt.Errorf("redeliver build: %w", err)
	}
	return j, nil
}

// HeartbeatResult is Heartbeat's answer: the worker's, and the attempt's
// VM when this heartbeat was the first to report it (nil otherwise), which
// the caller counts once.
type HeartbeatResult struct {
	api.HeartbeatResponse
	VM *api.AttemptVM
}

// Heartbeat renews the lease of an attempt the worker instance holds and
// records its phase, and its VM the first time one is reported. The first
// heartbeat acknowledges the job: assigned → building. A lease that is no
// longer this attempt's gives ErrLeaseLost.
func (s *Store) Heartbeat(ctx context.Context, w WorkerAuth, req api.HeartbeatRequest) (HeartbeatResult, error) {
	var resp HeartbeatResult
	if !ValidID(req.BuildID) || !ValidID(req.AttemptID) {
		return resp, fmt.Errorf("%w: build %q attempt %q is not held by this worker; stop it", ErrLeaseLost, req.BuildID, req.AttemptID)
	}
	if err := checkText("phase", req.Phase); err != nil {
		return resp, err
	}
	if len(req.Phase) > 100 {
		return resp, fmt.Errorf("%w: field \"phase\" is longer than 100 characters", ErrInvalid)
	}
	if req.Progress != nil && (*req.Progress < 0 || *req.Progress > 100) {
		return resp, fmt.Errorf("%w: field \"progress\" must be between 0 and 100", ErrInvalid)
	}
	var vmSpare *string
	var vmPhaseMS *int64
	if v := req.VM; v != nil {
		if err := checkAttemptVM(*v); err != nil {
			return resp, err
		}
		ms := int64(v.PhaseSeconds * 1000)
		vmSpare, vmPhaseMS = &v.Spare, &ms
	}
	err := s.withTx(ctx, func(t *txn) error {
		var first, vmNew bool
		var platform string
		err := t.QueryRow(ctx, `
			WITH o AS (
				SELECT id, status, vm_phase_ms IS NULL AS vm_unknown FROM build_attempts
				WHERE id = $2 AND build_id = $1 AND worker_id = $3 AND worker_instance = $4
					AND lease_token_hash = $5 AND status IN ('assigned', 'running')
				FOR UPDATE
			), a AS (
				UPDATE build_attempts SET status = 'running',
					vm_spare = CASE WHEN o.vm_unknown THEN $9 ELSE vm_spare END,
					vm_phase_ms = CASE WHEN o.vm_unknown THEN $10 ELSE vm_phase_ms END
				FROM o WHERE build_attempts.id = o.id
				RETURNING o.status = 'assigned' AS first, o.vm_unknown AND $10::bigint IS NOT NULL AS vm_new
			)
			UPDATE builds SET lease_expires_at = now() + $6::interval,
				status = CASE WHEN status = 'assigned' THEN 'building' ELSE status END,
				started_at = COALESCE(started_at, now()),
				phase = COALESCE(NULLIF($7, ''), CASE WHEN status = 'assigned' THEN 'started' ELSE phase END),
				progress = COALESCE($8, progress)
			FROM a WHERE builds.id = $1 AND builds.attempt_id = $2 AND builds.status IN ('assigned', 'building')
			RETURNING builds.lease_expires_at, builds.cancel_requested, a.first, a.vm_new, builds.platform`,
			req.BuildID, req.AttemptID, w.WorkerID, w.InstanceID, HashSecret(req.LeaseToken), t.cfg.LeaseTTL, req.Phase, req.Progress,
			vmSpare, vmPhaseMS,
		).Scan(&resp.LeaseExpiresAt, &resp.CancelRequested, &first, &vmNew, &platform)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%w: build %s attempt %s is not held by this worker any more; stop it", ErrLeaseLost, req.BuildID, req.AttemptID)
		}
		if err != nil {
			return fmt.Errorf("heartbeat: %w", err)
		}
		if first {
			t.emit(Change{Kind: "build", ID: req.BuildID, Status: string(api.StatusBuilding), Platform: platform,
				Detail: map[string]any{"attempt_id": req.AttemptID}})
		}
		if vmNew {
			resp.VM = req.VM
		}
		return nil
	})
	resp.TokenGrant = w.Grant
	return resp, err
}

// checkAttemptVM refuses a VM report no agent sends.
func checkAttemptVM(v api.AttemptVM) error {
	switch v.Spare {
	case "", api.SpareHit, api.SpareMiss:
	default:
		return fmt.Errorf("%w: field \"vm.spare\" is %q; it must be hit, miss or empty", ErrInvalid, v.Spare)
	}
	if !(v.PhaseSeconds >= 0 && v.PhaseSeconds <= api.MaxVMPhase.Seconds()) {
		return fmt.Errorf("%w: field \"vm.phase_seconds\" must be between 0 and %.0f", ErrInvalid, api.MaxVMPhase.Seconds())
	}
	return nil
}

// Result is a worker's report of how an attempt ended.
type Result struct {
	BuildID, AttemptID, LeaseToken string
	Success                        bool
	ErrorMessage, ErrorCode        string
	Retryable                      bool
	// Artifact, when set, is already written to a temporary file; Commit
	// moves it into place inside the transaction, only once the attempt is
	// known to still hold its lease.
	Artifact *PendingArtifact
}

// PendingArtifact is an uploaded file waiting for its record; the file is
// the attempt's own (blobs.Artifact(attempt id, Name)).
type PendingArtifact struct {
	Name   string
	Size   int64
	SHA256 string
	Commit func() error
	// Inspect, when set, reads what the committed file says about its app
	// (an .ipa's Info.plist); it runs once, in the transaction that records
	// the artifact, and its answer or its error is stored with the row so
	// install links never open the file again.
	Inspect func() (install.AppInfo, error)
}

// Completion is Complete's answer: the worker's, and what the caller does next.
type Completion struct {
	api.ResultResponse
	// SecretsLeft is set when the build holds certificates or
	// credentials not yet deleted: once it ended, the caller kicks the
	// reaper to delete them now. Most builds hold none, and their
	// completions then cost the reaper no query.
	SecretsLeft bool
}

// Complete records an attempt's result with a compare-and-set on (build,
// attempt, lease). Repeating a completion returns the first answer and
// changes nothing; a completion from an attempt that lost its lease gives
// ErrLeaseLost.
func (s *Store) Complete(ctx context.Context, w WorkerAuth, r Result) (Completion, error) {
	var resp api.ResultResponse
	var secrets bool
	if !ValidID(r.BuildID) || !ValidID(r.AttemptID) {
		return Completion{}, fmt.Errorf("%w: build %q has no attempt %q of this worker", ErrLeaseLost, r.BuildID, r.AttemptID)
	}
	// A failure report is recorded even when its text is odd: clean it
	// rather than lose the result.
	r.ErrorMessage, r.ErrorCode = sanitizeText(r.ErrorMessage, 4000), sanitizeText(r.ErrorCode, 100)
	err := s.withTx(ctx, func(t *txn) error {
		var (
			status, instance string
			leaseHash        []byte
			stored           []byte
			cancelRequested  bool
		)
		// The build's row is locked with the attempt's: a cancel either
		// committed before (and is seen here) or waits and finds the
		// build ended.
		err := t.QueryRow(ctx, `SELECT a.status, a.worker_instance, a.lease_token_hash, a.result, b.cancel_requested,
				(b.has_certs OR b.has_credentials) AND b.certs_deleted_at IS NULL
			FROM build_attempts a JOIN builds b ON b.id = a.build_id
			WHERE a.id = $1 AND a.build_id = $2 AND a.worker_id = $3 FOR UPDATE`,
			r.AttemptID, r.BuildID, w.WorkerID).Scan(&status, &instance, &leaseHash, &stored, &cancelRequested, &secrets)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%w: build %s has no attempt %s of this worker", ErrLeaseLost, r.BuildID, r.AttemptID)
		}
		if err != nil {
			return fmt.Errorf("record result: %w", err)
		}
		if subtle.ConstantTimeCompare(leaseHash, HashSecret(r.LeaseToken)) != 1 {
			return fmt.Errorf("%w: lease token does not match attempt %s", ErrLeaseLost, r.AttemptID)
		}
		if stored != nil { // a repeat: the first answer stands
			if err := json.Unmarshal(stored, &resp); err != nil {
				return fmt.Errorf("decode stored result: %w", err)
			}
			resp.Duplicate = true
			return nil
		}
		if (status != "assigned" && status != "running") || instance != w.InstanceID {
			return fmt.Errorf("%w: attempt %s already ended (%s)", ErrLeaseLost, r.AttemptID, status)
		}
		resp, err = t.finish(ctx, w, r, cancelRequested)
		return err
	})
	return Completion{ResultResponse: resp, SecretsLeft: secrets}, err
}

// finish applies a result to a build whose attempt is verified live and
// stores the answer with the attempt, for repeats. cancelRequested is the
// build's flag, read under its row lock.
func (t *txn) finish(ctx context.Context, w WorkerAuth, r Result, cancelRequested bool) (api.ResultResponse, error) {
	resp := api.ResultResponse{Success: true, BuildID: r.BuildID}
	switch {
	case cancelRequested:
		// The developer asked to cancel before the result arrived: the
		// cancel wins over a success (whose artifact is not kept), a
		// retryable failure and a hand-back alike.
		msg := orDefault(r.ErrorMessage, "cancelled")
		if r.Success {
			msg = "cancelled; the cancel arrived before the worker reported the build's success"
		}
		resp.Status = api.StatusCancelled
		return resp, t.endBuild(ctx, w, Result{BuildID: r.BuildID, AttemptID: r.AttemptID}, resp, "cancelled", api.CodeCancelled, msg)
	case r.Success:
		if r.Artifact != nil {
			// The attempt's row is locked and its lease checked: a stale
			// attempt never gets here, so it can never overwrite a real result.
			if err := r.Artifact.Commit(); err != nil {
				return resp, fmt.Errorf("store artifact %s: %w", r.Artifact.Name, err)
			}
			resp.Artifact = &api.Artifact{Name: r.Artifact.Name, Size: r.Artifact.Size, SHA256: r.Artifact.SHA256,
				URL: ArtifactURL(r.BuildID, r.Artifact.Name)}
		}
		resp.Status = api.StatusCompleted
		if err := t.endBuild(ctx, w, r, resp, "completed", "", ""); err != nil {
			return resp, err
		}
		if r.Artifact != nil {
			return resp, t.describeArtifact(ctx, r.BuildID, r.AttemptID, r.Artifact)
		}
		return resp, nil
	case r.ErrorCode == api.CodeReleased:
		// A drain: back to the queue at once, not counted.
		if _, err := t.requeue(ctx, []string{r.AttemptID}, requeueRelease(orDefault(r.ErrorMessage, "worker handed the build back"))); err != nil {
			return resp, err
		}
		resp.Requeued = true
		resp.Status = api.StatusPending
	case r.Retryable:
		if _, err := t.requeue(ctx, []string{r.AttemptID}, requeueReason{consume: true, attemptStatus: "failed",
			code: orDefault(r.ErrorCode, "retryable"), message: orDefault(r.ErrorMessage, "retryable failure")}); err != nil {
			return resp, err
		}
		if err := t.QueryRow(ctx, `SELECT status FROM builds WHERE id = $1`, r.BuildID).Scan(&resp.Status); err != nil {
			return resp, fmt.Errorf("read requeued build: %w", err)
		}
		resp.Requeued = resp.Status == api.StatusPending
	default:
		attemptStatus, code := "failed", orDefault(r.ErrorCode, api.CodeBuildFailed)
		resp.Status = api.StatusFailed
		if r.ErrorCode == api.CodeCancelled {
			resp.Status, attemptStatus, code = api.StatusCancelled, "cancelled", api.CodeCancelled
		}
		return resp, t.endBuild(ctx, w, r, resp, attemptStatus, code, orDefault(r.ErrorMessage, "build failed"))
	}
	// The attempt went back to the queue (or was dead-lettered by it).
	b, err := json.Marshal(resp)
	if err != nil {
		return resp, err
	}
	_, err = t.Exec(ctx, `
		WITH a AS (UPDATE build_attempts SET result = $2 WHERE id = $1)
		UPDATE workers SET builds_failed = builds_failed + 1 WHERE id = $3 AND $4`,
		r.AttemptID, b, w.WorkerID, resp.Status.Terminal())
	if err != nil {
		return resp, fmt.Errorf("store result: %w", err)
	}
	return resp, nil
}

// endBuild moves a build whose attempt is live to the terminal status of
// resp, records its artifact, stores resp as the attempt's answer and counts
// the build on the worker: one statement.
func (t *txn) endBuild(ctx context.Context, w WorkerAuth, r Result, resp api.ResultResponse, attemptStatus, code, msg string) error {
	result, err := json.Marshal(resp)
	if err != nil {
		return err
	}
	var art struct {
		name, sha *string
		size      *int64
	}
	if a := r.Artifact; a != nil {
		art.name, art.sha, art.size = &a.Name, &a.SHA256, &a.Size
	}
	var platform, appVersion, buildVersion string
	err = t.QueryRow(ctx, `
		WITH a AS (
			UPDATE build_attempts SET status = $3, ended_at = now(), error_code = NULLIF($4, ''), error_message = NULLIF($5, ''),
				otp_hash = NULL, vm_token_hash = NULL, result = $7
			WHERE id = $2 RETURNING id
		), b AS (
			UPDATE builds SET status = $6, completed_at = now(), lease_expires_at = NULL, phase = $6,
				error_code = NULLIF($4, ''), error_message = NULLIF($5, '')
			FROM a WHERE builds.id = $1 AND builds.attempt_id = a.id
			RETURNING builds.id, builds.platform, builds.spec
		), art AS (
			INSERT INTO artifacts (build_id, attempt_id, name, size, sha256) SELECT b.id, $2, $9, $10, $11 FROM b WHERE $9::text IS NOT NULL
			ON CONFLICT (build_id, attempt_id, name) DO UPDATE SET size = EXCLUDED.size, sha256 = EXCLUDED.sha256, created_at = now()
		), wk AS (
			UPDATE workers SET builds_completed = builds_completed + CASE WHEN $6 = 'completed' THEN 1 ELSE 0 END,
				builds_failed = builds_failed + CASE WHEN $6 = 'completed' THEN 0 ELSE 1 END
			FROM b WHERE workers.id = $8
		)
		SELECT b.platform, `+versionColumns+` FROM b`,
		r.BuildID, r.AttemptID, attemptStatus, code, msg, string(resp.Status), result, w.WorkerID,
		art.name, art.size, art.sha).Scan(&platform, &appVersion, &buildVersion)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%w: build %s is no longer on attempt %s", ErrLeaseLost, r.BuildID, r.AttemptID)
	}
	if err != nil {
		return fmt.Errorf("end build: %w", err)
	}
	t.emit(Change{Kind: "build", ID: r.BuildID, Status: string(resp.Status), Platform: platform,
		Detail: versionDetail(map[string]any{"attempt_id": r.AttemptID, "error_code": code}, appVersion, buildVersion)})
	return nil
}

// recordArtifact records an artifact the VM of attempt attemptID uploaded
// and moves its file into place, inside the transaction that verified the
// attempt. The row is the attempt's: the build shows it only if the attempt
// ends the build.
func (t *txn) recordArtifact(ctx context.Context, buildID, attemptID string, a *PendingArtifact) error {
	if _, err := t.Exec(ctx, `INSERT INTO artifacts (build_id, attempt_id, name, size, sha256) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (build_id, attempt_id, name) DO UPDATE SET size = EXCLUDED.size, sha256 = EXCLUDED.sha256, created_at = now()`,
		buildID, attemptID, a.Name, a.Size, a.SHA256); err != nil {
		return fmt.Errorf("record artifact: %w", err)
	}
	if err := a.Commit(); err != nil {
		return fmt.Errorf("store artifact %s: %w", a.Name, err)
	}
	return t.describeArtifact(ctx, buildID, attemptID, a)
}

// maxAppError bounds the stored reason an artifact cannot be installed.
const maxAppError = 500

// describeArtifact stores what a committed artifact says about its app, or
// why it could not be read: an unreadable .ipa is still the build's
// artifact, and its install page says why it cannot be installed.
func (t *txn) describeArtifact(ctx context.Context, buildID, attemptID string, a *PendingArtifact) error {
	if a.Inspect == nil {
		return nil
	}
	app, err := a.Inspect()
	var bundleID *string
	problem := ""
	if err != nil {
		problem = sanitizeText(err.Error(), maxAppError)
		app = install.AppInfo{}
	} else {
		app.BundleID, app.Version, app.Title = sanitizeText(app.BundleID, 1000), sanitizeText(app.Version, 1000), sanitizeText(app.Title, 1000)
		bundleID = &app.BundleID
	}
	if _, err := t.Exec(ctx, `UPDATE artifacts SET app_bundle_id = $4, app_version = $5, app_title = $6, app_error = $7
		WHERE build_id = $1 AND attempt_id = $2 AND name = $3`,
		buildID, attemptID, a.Name, bundleID, app.Version, app.Title, problem); err != nil {
		return fmt.Errorf("record what artifact %s says about its app: %w", a.Name, err)
	}
	return nil
}

// ArtifactURL is the download path of a build's artifact.
func ArtifactURL(buildID, name string) string {
	return "/api/builds/" + buildID + "/artifacts/" + url.PathEscape(name)
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
