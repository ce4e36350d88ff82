package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/store"
)

// apiKey authenticates X-API-Key, charges the request to the key's budget
// and checks the key's role.
func (s *Server) apiKey(r *http.Request, roles ...string) (store.APIKey, error) {
	k, err := s.knownKey(r)
	if err != nil {
		return k, err
	}
	if err := s.rates.key(k.ID); err != nil {
		return k, err
	}
	return k, keyRole(r, k, roles...)
}

// knownKey authenticates X-API-Key, charging no budget.
func (s *Server) knownKey(r *http.Request) (store.APIKey, error) {
	secret := r.Header.Get(api.HeaderAPIKey)
	if secret == "" {
		return store.APIKey{}, fmt.Errorf("%w: missing %s header", store.ErrUnauthorized, api.HeaderAPIKey)
	}
	return s.keyCache.get(r.Context(), s.store, secret)
}

func keyRole(r *http.Request, k store.APIKey, roles ...string) error {
	if !slices.Contains(roles, k.Role) {
		return fmt.Errorf("%w: a %s API key cannot use %s %s", store.ErrForbidden, k.Role, r.Method, r.URL.Path)
	}
	return nil
}

func (c *keyCache) get(ctx context.Context, st *store.Store, secret string) (store.APIKey, error) {
	h := string(store.HashSecret(secret))
	now := time.Now()
	c.mu.Lock()
	e, ok := c.entries[h]
	c.mu.Unlock()
	if ok && now.Before(e.expires) {
		return e.key, nil
	}
	k, err := st.AuthenticateKey(ctx, secret)
	if err != nil {
		return k, fmt.Errorf("API key rejected: %w", err)
	}
	c.mu.Lock()
	if len(c.entries) > 10000 { // bounded: drop everything rather than grow without limit
		clear(c.entries)
	}
	c.entries[h] = cachedKey{key: k, expires: now.Add(c.ttl)}
	c.mu.Unlock()
	return k, nil
}

// metricsAuth guards /metrics: an admin key, as X-API-Key or as a bearer
// token (what Prometheus's scrape config sends), unless MetricsPublic.
func (s *Server) metricsAuth(h http.Handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.metricsPublic {
			if bearer, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && r.Header.Get(api.HeaderAPIKey) == "" {
				r.Header.Set(api.HeaderAPIKey, strings.TrimSpace(bearer))
			}
			if _, err := s.apiKey(r, api.RoleAdmin); err != nil {
				s.fail(w, r, err)
				return
			}
		}
		h.ServeHTTP(w, r)
	}
}

// workerKey guards registration: an API key of the worker or admin role.
func (s *Server) workerKey(h func(http.ResponseWriter, *http.Request, store.APIKey)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		k, err := s.apiKey(r, api.RoleWorker, api.RoleAdmin)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		h(w, r, k)
	}
}

// worker guards the worker endpoints: an API key, then the worker token,
// then the worker's own request budget (not its key's, which a fleet
// usually shares).
func (s *Server) worker(h func(http.ResponseWriter, *http.Request, store.WorkerAuth)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		wa, err := s.budgetedWorker(r)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		h(w, r, wa)
	}
}

// leaseWorker guards the worker endpoints that carry a lease's work (a
// heartbeat, a result). The work of a lease the worker holds costs its
// budget nothing: a busy worker's heartbeats and results must not use up
// what its next poll needs. A worker over its budget is not refused yet:
// the handler learns it (over, nil while there is room) and serves the
// request if the lease it names is valid (spareLease). A request whose
// lease turns out stale (409, 410) is charged, so a flood of them is
// refused like any other.
func (s *Server) leaseWorker(h func(w http.ResponseWriter, r *http.Request, wa store.WorkerAuth, over *errRateLimited)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		wa, err := s.workerAuth(r)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		h(rec, r, wa, s.rates.workerRoom(wa.WorkerID))
		if rec.status == http.StatusConflict || rec.status == http.StatusGone {
			s.rates.worker(wa.WorkerID) //nolint:errcheck // the charge; the answer is already given
		}
	}
}

// spareLease is nil when a request within its worker's budget (over is
// nil), or one over it for a lease the worker holds, may go on; otherwise
// over, the budget's refusal.
func (s *Server) spareLease(ctx context.Context, wa store.WorkerAuth, over *errRateLimited, buildID, attemptID, leaseToken string) error {
	if over == nil {
		return nil
	}
	if !store.ValidID(buildID) || s.store.CheckLease(ctx, wa, buildID, attemptID, leaseToken) != nil {
		return over
	}
	return nil
}

// budgetedWorker is workerAuth, then the charge to the worker's budget.
func (s *Server) budgetedWorker(r *http.Request) (store.WorkerAuth, error) {
	wa, err := s.workerAuth(r)
	if err != nil {
		return wa, err
	}
	if over := s.rates.worker(wa.WorkerID); over != nil {
		return wa, over
	}
	return wa, nil
}

// workerAuth authenticates a worker request: its API key (a worker or
// admin key) and its worker token. It charges no budget when both are
// good (the caller charges the worker's); a key of another role, or a
// token refused, is charged to the key.
func (s *Server) workerAuth(r *http.Request) (store.WorkerAuth, error) {
	key, err := s.knownKey(r)
	if err != nil {
		return store.WorkerAuth{}, err
	}
	if err := keyRole(r, key, api.RoleWorker, api.RoleAdmin); err != nil {
		return store.WorkerAuth{}, s.chargeKey(key, err)
	}
	tok := r.Header.Get(api.HeaderWorkerToken)
	if tok == "" {
		return store.WorkerAuth{}, s.chargeKey(key, keyHeld{fmt.Errorf("%w: missing %s header; register first", store.ErrUnauthorized, api.HeaderWorkerToken)})
	}
	wa, err := s.store.AuthenticateWorker(r.Context(), tok, key)
	if err != nil {
		return wa, s.chargeKey(key, keyHeld{fmt.Errorf("worker token rejected: unknown, expired, or issued to a worker registered with another API key (register again with this worker's key): %w", err)})
	}
	return wa, nil
}

// chargeKey charges a refused worker request to its key's budget: the
// budget's refusal once that is spent, else refusal.
func (s *Server) chargeKey(key store.APIKey, refusal error) error {
	if err := s.rates.key(key.ID); err != nil {
		return err
	}
	return refusal
}

// keyHeld is a failed authentication after a valid API key (a worker's
// stale token): the key holder's own slip, bounded by the key's budget,
// never a guess, so it is not charged to the address and never answered
// 429 for another client's failures.
type keyHeld struct{ error }

func (e keyHeld) Unwrap() error { return e.error }

func (s *Server) admin(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if _, err := s.apiKey(r, api.RoleAdmin); err != nil {
			s.fail(w, r, err)
			return
		}
		h(w, r)
	}
}

// developer guards the developers' endpoints: an admin key, or a developer
// key with a scope (store.KeyScope: an unbound key on a farm of bound ones
// is refused here, everywhere).
func (s *Server) developer(h func(http.ResponseWriter, *http.Request, store.APIKey)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		k, err := s.developerKey(r)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		h(w, r, k)
	}
}

func (s *Server) developerKey(r *http.Request) (store.APIKey, error) {
	k, err := s.apiKey(r, api.RoleDeveloper, api.RoleAdmin)
	if err != nil {
		return k, err
	}
	if _, err := store.KeyScope(k); err != nil {
		return k, err
	}
	return k, nil
}

// scope is what key k may see. developer() refused a key without one; the
// zero Scope it would give sees nothing.
func scope(k store.APIKey) store.Scope {
	sc, _ := store.KeyScope(k)
	return sc
}

// projectAllowed is ErrForbidden, naming the project and the fix, unless
// key k may act in project p.
func projectAllowed(k store.APIKey, p string) error {
	sc, err := store.KeyScope(k)
	if err != nil {
		return err
	}
	if sc.Allows(p) {
		return nil
	}
	if p == "" {
		return fmt.Errorf("%w: this key is bound to projects %s, and the build names no project; submit from the app's directory (its slug is the project) or pass --project NAME",
			store.ErrForbidden, strings.Join(sc.Projects, ", "))
	}
	return fmt.Errorf("%w: this key may not use project %q (it is bound to %s); use a key of that project, or have an admin bind this one (freeagent-controller keys bind %s --project %s)",
		store.ErrForbidden, p, strings.Join(sc.Projects, ", "), k.ID, p)
}

// buildAccess is a caller allowed to read and act on one build.
type buildAccess struct {
	ID  string
	Key *store.APIKey // the developer or admin key used; nil when a build token was used
}

// KeyID is the id of the key used; "" for a build token.
func (b buildAccess) KeyID() string {
	if b.Key == nil {
		return ""
	}
	return b.Key.ID
}

// buildReader guards a build's developer endpoints: a developer/admin API
// key, or that build's own build token.
func (s *Server) buildReader(h func(http.ResponseWriter, *http.Request, buildAccess)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		if !store.ValidID(id) {
			s.fail(w, r, fmt.Errorf("%w: no build %q", store.ErrNotFound, id))
			return
		}
		if tok := r.Header.Get(api.HeaderBuildToken); tok != "" && r.Header.Get(api.HeaderAPIKey) == "" {
			owner, err := s.store.AuthenticateBuildToken(r.Context(), tok)
			if err != nil {
				s.fail(w, r, fmt.Errorf("build token rejected: %w", err))
				return
			}
			if owner != id {
				s.fail(w, r, fmt.Errorf("%w: this build token belongs to another build", store.ErrForbidden))
				return
			}
			h(w, r, buildAccess{ID: id})
			return
		}
		if r.Header.Get(api.HeaderAPIKey) == "" {
			s.fail(w, r, fmt.Errorf("%w: send %s or the build's %s", store.ErrUnauthorized, api.HeaderAPIKey, api.HeaderBuildToken))
			return
		}
		k, err := s.developerKey(r)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if err := s.canSee(r, k, id); err != nil {
			s.fail(w, r, err)
			return
		}
		h(w, r, buildAccess{ID: id, Key: &k})
	}
}

// vm guards the endpoints the VM calls with its VM token.
func (s *Server) vm(h func(w http.ResponseWriter, r *http.Request, buildID, attemptID string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		if !store.ValidID(id) {
			s.fail(w, r, fmt.Errorf("%w: no build %q", store.ErrNotFound, id))
			return
		}
		tok := r.Header.Get(api.HeaderVMToken)
		if tok == "" {
			s.fail(w, r, fmt.Errorf("%w: missing %s header", store.ErrUnauthorized, api.HeaderVMToken))
			return
		}
		attempt, err := s.store.AuthenticateVM(r.Context(), id, tok)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		h(w, r, id, attempt)
	}
}

// sourceReader admits the build's VM, or the worker the build is assigned to.
func (s *Server) sourceReader(h func(w http.ResponseWriter, r *http.Request, buildID string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		if !store.ValidID(id) {
			s.fail(w, r, fmt.Errorf("%w: no build %q", store.ErrNotFound, id))
			return
		}
		if tok := r.Header.Get(api.HeaderVMToken); tok != "" {
			if _, err := s.store.AuthenticateVM(r.Context(), id, tok); err != nil {
				s.fail(w, r, err)
				return
			}
			h(w, r, id)
			return
		}
		wa, err := s.budgetedWorker(r)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if err := s.store.WorkerHoldsBuild(r.Context(), wa, id); err != nil {
			s.fail(w, r, err)
			return
		}
		h(w, r, id)
	}
}

// canSee is ErrNotFound unless key k may see build id: another project's
// build answers as if it did not exist, so ids leak nothing.
func (s *Server) canSee(r *http.Request, k store.APIKey, id string) error {
	sc := scope(k)
	if sc.All {
		return nil
	}
	p, err := s.store.BuildProject(r.Context(), id)
	if err != nil {
		return err
	}
	if !sc.Allows(p) {
		return fmt.Errorf("%w: no build %q", store.ErrNotFound, id)
	}
	return nil
}
