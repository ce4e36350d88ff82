package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/blobs"
	"github.com/freeagent-build/freeagent/controller/store"
)

func (s *Server) register(w http.ResponseWriter, r *http.Request, key store.APIKey) {
	var req api.RegisterRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	reg, err := s.store.Register(r.Context(), req, key)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	status := "registered"
	if reg.Reregistered {
		status = "re-registered"
	}
	cfg := s.store.Config()
	writeJSON(w, http.StatusOK, api.RegisterResponse{
		ID: reg.WorkerID, AccessToken: reg.Grant.AccessToken, TokenExpiresAt: reg.Grant.TokenExpiresAt, Status: status,
		PollWaitSeconds:          int(s.limits.PollMaxWait.Seconds()),
		HeartbeatIntervalSeconds: max(1, int(cfg.LeaseTTL.Seconds()/3)),
		LeaseTTLSeconds:          int(cfg.LeaseTTL.Seconds()),
	})
}

// poll is the long poll: it answers at once with a job when one is
// claimable, else waits (up to ?wait=N seconds, at most PollMaxWait) for a
// database notification that a build became claimable. A build it was woken
// for and cannot take goes on to the next worker in line that may (the hub's
// End). It re-checks every PollBackstop in case a notification was missed,
// and every PollRecheck while its worker cannot take a build (at capacity or
// paused), which no notification announces.
func (s *Server) poll(w http.ResponseWriter, r *http.Request, wa store.WorkerAuth) {
	wait, err := waitParam(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	wait = min(wait, s.limits.PollMaxWait)
	ctx := r.Context()
	start := time.Now()
	deadline := start.Add(wait)
	var res store.PollResult
	claim := s.hub.WaitClaimable(wa.Platforms())
	defer s.hub.Done(claim)
	for {
		look := s.hub.Begin(claim)
		res, err = s.store.Poll(ctx, wa)
		if err != nil {
			s.hub.End(look, true, "") // hand on what it was woken for
			s.fail(w, r, err)
			return
		}
		claimed := ""
		if res.Job != nil {
			claimed = res.Job.ID
		}
		s.hub.End(look, res.Claimable, claimed)
		remaining := time.Until(deadline)
		if res.Job != nil || remaining <= 0 {
			break
		}
		wake, every := claim.C, s.limits.PollBackstop
		if res.AtCapacity || res.Paused {
			// It cannot take a build: step out of line so the next one goes
			// to a worker with room.
			s.hub.Done(claim)
			wake, every = nil, s.limits.PollRecheck
		}
		if !s.park(ctx, wake, min(remaining, every), &deadline) {
			return
		}
		s.hub.Rearm(claim) // back in line before the next look
	}
	s.metrics.Poll(time.Since(start), res)
	depth, err := s.queueDepth.get(ctx, s.store)
	if err != nil && ctx.Err() == nil {
		s.log.WithError(err).Warn("count queue depth")
	}
	writeJSON(w, http.StatusOK, api.PollResponse{Job: res.Job, TokenGrant: wa.Grant, QueueDepth: depth})
}

// watchCancel is the worker's long poll for a cancel of one of its builds:
// it answers as soon as the developer's cancel is committed (the hub's
// notification of the build's change), so the worker stops the build within
// moments instead of at its next heartbeat.
func (s *Server) watchCancel(w http.ResponseWriter, r *http.Request, wa store.WorkerAuth) {
	id := r.PathValue("id")
	if !store.ValidID(id) {
		s.fail(w, r, fmt.Errorf("%w: no build %q", store.ErrNotFound, id))
		return
	}
	wait, err := waitParam(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ctx := r.Context()
	deadline := time.Now().Add(min(wait, s.limits.PollMaxWait))
	watch := s.hub.WatchStatus(id)
	defer watch.Close()
	for {
		st, err := s.store.CancelState(ctx, wa, id)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		remaining := time.Until(deadline)
		if st.CancelRequested || st.Status.Terminal() || remaining <= 0 {
			st.TokenGrant = wa.Grant
			writeJSON(w, http.StatusOK, st)
			return
		}
		if !s.park(ctx, watch.C, min(remaining, s.limits.PollBackstop), &deadline) {
			return
		}
	}
}

// park holds a long poll until wake signals, the timeout passes, or the
// controller drains, which ends the wait (*deadline becomes now). It
// reports false when the request ended.
func (s *Server) park(ctx context.Context, wake <-chan struct{}, timeout time.Duration, deadline *time.Time) bool {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-s.draining:
		*deadline = time.Now()
	case <-wake:
	case <-timer.C:
	}
	return true
}

// waitParam reads a long poll's "wait" parameter, in whole seconds.
func waitParam(r *http.Request) (time.Duration, error) {
	v := r.URL.Query().Get("wait")
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%w: parameter \"wait\" must be a whole number of seconds ≥ 0", store.ErrInvalid)
	}
	return time.Duration(n) * time.Second, nil
}

func (s *Server) heartbeat(w http.ResponseWriter, r *http.Request, wa store.WorkerAuth, over *errRateLimited) {
	var req api.HeartbeatRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := requireFields("build_id", req.BuildID, "attempt_id", req.AttemptID, "lease_token", req.LeaseToken); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := s.spareLease(r.Context(), wa, over, req.BuildID, req.AttemptID, req.LeaseToken); err != nil {
		s.fail(w, r, err)
		return
	}
	resp, err := s.store.Heartbeat(r.Context(), wa, req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if resp.VM != nil {
		s.metrics.AttemptVM(*resp.VM)
	}
	writeJSON(w, http.StatusOK, resp.HeartbeatResponse)
}

// requireFields takes name, value pairs and names the first empty one.
func requireFields(pairs ...string) error {
	for i := 0; i+1 < len(pairs); i += 2 {
		if strings.TrimSpace(pairs[i+1]) == "" {
			return fmt.Errorf("%w: field %q is required", store.ErrInvalid, pairs[i])
		}
	}
	return nil
}

// upload records a build attempt's result: multipart fields build_id,
// attempt_id, lease_token, success, error_message, error_code, retryable, and
// an optional file "result". Fields must precede the file, so the file can
// be written straight into its build's directory.
func (s *Server) upload(w http.ResponseWriter, r *http.Request, wa store.WorkerAuth, over *errRateLimited) {
	form, err := newForm(w, r, s.limits.Artifact+s.limits.JSONBody, "the result fields")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var (
		res     store.Result
		fields  = map[string]string{}
		pending *blobs.Pending
		name    string
	)
	defer func() {
		if pending != nil {
			pending.Abort() // no-op once committed
		}
	}()
	for {
		part, err := form.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if !isFile(part) {
			v, err := readField(part)
			if err != nil {
				s.fail(w, r, err)
				return
			}
			fields[part.FormName()] = v
			continue
		}
		if part.FormName() != "result" {
			continue // unknown file fields are ignored
		}
		if pending != nil {
			s.fail(w, r, badRequest("more than one \"result\" file"))
			return
		}
		// The identifying fields come first, so a worker that lost its lease
		// is refused before it streams a large file for nothing.
		res.BuildID, res.AttemptID, res.LeaseToken = fields["build_id"], fields["attempt_id"], fields["lease_token"]
		if !store.ValidID(res.BuildID) || res.AttemptID == "" || res.LeaseToken == "" {
			s.fail(w, r, badRequest("fields \"build_id\" (a valid build id), \"attempt_id\" and \"lease_token\" must come before the \"result\" file"))
			return
		}
		if err := s.store.CheckLease(r.Context(), wa, res.BuildID, res.AttemptID, res.LeaseToken); err != nil {
			s.fail(w, r, err)
			return
		}
		over = nil // the lease is valid: served whatever the budget
		if name = blobs.CleanName(part.FileName()); name == "" {
			s.fail(w, r, badRequest("the \"result\" file name %q is not a usable file name", part.FileName()))
			return
		}
		if pending, err = s.blobs.Create(r.Context(), res.BuildID, blobs.Artifact(res.AttemptID, name)); err != nil {
			s.fail(w, r, err)
			return
		}
		if err := pending.Fill(part, s.limits.Artifact); err != nil {
			s.fail(w, r, multipartErr(err))
			return
		}
	}
	if pending != nil && (res.BuildID != fields["build_id"] || res.AttemptID != fields["attempt_id"] || res.LeaseToken != fields["lease_token"]) {
		s.fail(w, r, badRequest("fields \"build_id\", \"attempt_id\" and \"lease_token\" changed after the \"result\" file"))
		return
	}
	res.BuildID, res.AttemptID, res.LeaseToken = fields["build_id"], fields["attempt_id"], fields["lease_token"]
	if err := requireFields("build_id", res.BuildID, "attempt_id", res.AttemptID, "lease_token", res.LeaseToken); err != nil {
		s.fail(w, r, err)
		return
	}
	if !store.ValidID(res.BuildID) {
		s.fail(w, r, fmt.Errorf("%w: no build %q", store.ErrNotFound, res.BuildID))
		return
	}
	if err := s.spareLease(r.Context(), wa, over, res.BuildID, res.AttemptID, res.LeaseToken); err != nil {
		s.fail(w, r, err)
		return
	}
	if res.Success, err = parseBool(fields, "success", true); err != nil {
		s.fail(w, r, err)
		return
	}
	if res.Retryable, err = parseBool(fields, "retryable", false); err != nil {
		s.fail(w, r, err)
		return
	}
	res.ErrorMessage, res.ErrorCode = fields["error_message"], fields["error_code"]
	if pending != nil {
		if err := pending.Verify(r.Header.Get(api.HeaderChecksum)); err != nil {
			s.fail(w, r, err)
			return
		}
		if err := pending.Prepare(r.Context()); err != nil {
			s.fail(w, r, err)
			return
		}
		res.Artifact = &store.PendingArtifact{Name: name, Size: pending.Size(), SHA256: pending.SHA256(), Commit: func() error { return pending.Commit(r.Context()) },
			Inspect: s.inspector(r.Context(), res.BuildID, res.AttemptID, name)}
	}
	resp, err := s.store.Complete(r.Context(), wa, res)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if resp.Status.Terminal() && resp.SecretsLeft {
		s.kick()
	}
	writeJSON(w, http.StatusOK, resp.ResultResponse)
}

func parseBool(fields map[string]string, name string, required bool) (bool, error) {
	v, ok := fields[name]
	if !ok || v == "" {
		if required {
			return false, fmt.Errorf("%w: field %q is required (\"true\" or \"false\")", store.ErrInvalid, name)
		}
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%w: field %q must be \"true\" or \"false\", got %q", store.ErrInvalid, name, v)
	}
	return b, nil
}

// readField reads a small multipart form value.
func readField(p *multipart.Part) (string, error) {
	b, err := io.ReadAll(io.LimitReader(p, 8<<10+1))
	if err != nil {
		return "", multipartErr(err)
	}
	if len(b) > 8<<10 {
		return "", fmt.Errorf("%w: field %q is longer than 8 KiB", store.ErrInvalid, p.FormName())
	}
	return string(b), nil
}

// multipartErr classifies an error met while reading a multipart body: a
// size limit, or a malformed or truncated body.
func multipartErr(err error) error {
	var maxBytes *http.MaxBytesError
	if errors.As(err, &maxBytes) || errors.Is(err, blobs.ErrTooLarge) || errors.Is(err, store.ErrTooLarge) || errors.Is(err, errSlowBody) {
		return err
	}
	return badRequest("malformed or truncated multipart body: %v", err)
}

func (s *Server) unregister(w http.ResponseWriter, r *http.Request, wa store.WorkerAuth) {
	n, err := s.store.Unregister(r.Context(), wa)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.UnregisterResponse{Success: true, BuildsReassigned: n})
}

// workerCache records the worker's report of its dependency caches; the
// body is bounded like every JSON body (200 keys are about 14 KB).
func (s *Server) workerCache(w http.ResponseWriter, r *http.Request, wa store.WorkerAuth) {
	var c api.WorkerCache
	if err := s.decodeJSON(w, r, &c); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := s.store.SetWorkerCache(r.Context(), wa, c); err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) listWorkers(w http.ResponseWriter, r *http.Request) {
	ws, err := s.store.ListWorkers(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if ws == nil {
		ws = []api.Worker{}
	}
	writeJSON(w, http.StatusOK, api.WorkerList{Workers: ws})
}

// depthCache shares one queue-depth count per replica for a second: every
// poll answer carries the figure, and counting a large backlog on each
// would cost more than the claim itself.
type depthCache struct {
	mu      sync.Mutex
	value   int
	expires time.Time
}

func (c *depthCache) get(ctx context.Context, st *store.Store) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if time.Now().Before(c.expires) {
		return c.value, nil
	}
	n, err := st.QueueDepth(ctx)
	if err != nil {
		return c.value, err
	}
	c.value, c.expires = n, time.Now().Add(time.Second)
	return n, nil
}
