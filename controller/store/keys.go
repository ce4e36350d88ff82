package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// APIKey is a named, role-scoped key. The secret itself is never stored.
type APIKey struct {
	ID        string     `json:"id"`
	Name      string     `json:"name"`
	Role      string     `json:"role"`
	CreatedAt time.Time  `json:"created_at"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
	// MaxCapacity caps the builds the workers registered with this key
	// hold at once (nil: no cap). Admin-set: a Mac owner's key cannot
	// claim more of the farm's queue than it was given.
	MaxCapacity *int `json:"max_capacity,omitempty"`
	// Projects are a developer key's projects: it sees only their builds,
	// variables and credentials. Empty: see KeyScope.
	Projects []string `json:"projects,omitempty"`
	// Pools are the pools a worker key's workers may register in.
	Pools []string `json:"pools,omitempty"`
	// ProjectsInUse: some live key of the farm is bound to a project (read
	// when the key is authenticated), so unbound developer keys are refused.
	ProjectsInUse bool `json:"-"`
	// PoolsInUse: some live worker key is bound to a pool, so an unbound
	// worker key may no longer register in a trusted pool.
	PoolsInUse bool `json:"-"`
}

// bindingsInUse are the columns saying whether any live key is bound to a
// project, and to a pool.
const bindingsInUse = `EXISTS (SELECT 1 FROM api_key_projects b JOIN api_keys l ON l.id = b.key_id WHERE l.revoked_at IS NULL),
	EXISTS (SELECT 1 FROM api_key_pools b JOIN api_keys l ON l.id = b.key_id WHERE l.revoked_at IS NULL)`

// keyBindings are the columns of a key's projects and pools (k is api_keys).
const keyBindings = `ARRAY(SELECT project FROM api_key_projects WHERE key_id = k.id ORDER BY project),
	ARRAY(SELECT pool FROM api_key_pools WHERE key_id = k.id ORDER BY pool)`

// ValidRole reports whether r is one of admin, developer, worker.
func ValidRole(r string) bool { return r == "admin" || r == "developer" || r == "worker" }

// CreateKey stores a new key and returns it with its secret, which is shown
// once and cannot be recovered.
func (s *Store) CreateKey(ctx context.Context, name, role string) (APIKey, string, error) {
	return s.CreateBoundKey(ctx, NewKey{Name: name, Role: role})
}

// NewKey describes a key to create with its bindings and capacity.
type NewKey struct {
	Name, Role      string
	Projects, Pools []string // see BindKey
	MaxCapacity     int      // ≤ 0: no cap
}

// CreateBoundKey stores a new key with its projects, pools and capacity in
// one transaction: a failure part way (a bad project name, a project on a
// worker key) leaves no key behind, bound to nothing.
func (s *Store) CreateBoundKey(ctx context.Context, nk NewKey) (APIKey, string, error) {
	if nk.Name == "" {
		return APIKey{}, "", fmt.Errorf("%w: key name is empty; pass --name", ErrInvalid)
	}
	if err := checkText("name", nk.Name); err != nil {
		return APIKey{}, "", err
	}
	if !ValidRole(nk.Role) {
		return APIKey{}, "", fmt.Errorf("%w: role %q is not one of admin, developer, worker", ErrInvalid, nk.Role)
	}
	if err := validateBindings(nk.Projects, nk.Pools); err != nil {
		return APIKey{}, "", err
	}
	secret, hash := newSecret(prefixAPIKey)
	k := APIKey{ID: NewID(), Name: nk.Name, Role: nk.Role}
	if nk.MaxCapacity > 0 {
		n := nk.MaxCapacity
		k.MaxCapacity = &n
	}
	err := s.withTx(ctx, func(t *txn) error {
		err := t.QueryRow(ctx, `INSERT INTO api_keys (id, name, role, key_hash, max_capacity) VALUES ($1, $2, $3, $4, $5) RETURNING created_at`,
			k.ID, k.Name, k.Role, hash, k.MaxCapacity).Scan(&k.CreatedAt)
		if err != nil {
			return fmt.Errorf("create key: %w", err)
		}
		if len(nk.Projects)+len(nk.Pools) == 0 {
			return nil
		}
		return t.bindKey(ctx, k.ID, nk.Projects, nk.Pools)
	})
	if err != nil {
		return APIKey{}, "", err
	}
	k.Projects, k.Pools = nk.Projects, nk.Pools
	return k, secret, nil
}

// SetKeyCapacity caps the builds the workers of key id may hold at once;
// n ≤ 0 removes the cap.
func (s *Store) SetKeyCapacity(ctx context.Context, id string, n int) error {
	var capacity *int
	if n > 0 {
		capacity = &n
	}
	tag, err := s.pool.Exec(ctx, `UPDATE api_keys SET max_capacity = $2 WHERE id = $1`, id, capacity)
	if err != nil {
		return fmt.Errorf("set key capacity: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%w: no API key with id %q (see `keys list`)", ErrNotFound, id)
	}
	return nil
}

// ListKeys returns every key, newest first, revoked ones included.
func (s *Store) ListKeys(ctx context.Context) ([]APIKey, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, name, role, created_at, revoked_at, max_capacity, `+keyBindings+`
		FROM api_keys k ORDER BY created_at DESC, id DESC`)
	if err != nil {
		return nil, fmt.Errorf("list keys: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (APIKey, error) {
		var k APIKey
		err := r.Scan(&k.ID, &k.Name, &k.Role, &k.CreatedAt, &k.RevokedAt, &k.MaxCapacity, &k.Projects, &k.Pools)
		return k, err
	})
}

// RevokeKey revokes a key by id. Revoking twice is not an error.
func (s *Store) RevokeKey(ctx context.Context, id string) error {
	tag, err := s.pool.Exec(ctx, `UPDATE api_keys SET revoked_at = COALESCE(revoked_at, now()) WHERE id = $1`, id)
	if err != nil {
		return fmt.Errorf("revoke key: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%w: no API key with id %q (see `keys list`)", ErrNotFound, id)
	}
	return nil
}

// AuthenticateKey returns the live key whose secret is given.
func (s *Store) AuthenticateKey(ctx context.Context, secret string) (APIKey, error) {
	var k APIKey
	err := s.pool.QueryRow(ctx, `SELECT id, name, role, created_at, max_capacity, `+keyBindings+`, `+bindingsInUse+`
		FROM api_keys k WHERE key_hash = $1 AND revoked_at IS NULL`,
		HashSecret(secret)).Scan(&k.ID, &k.Name, &k.Role, &k.CreatedAt, &k.MaxCapacity, &k.Projects, &k.Pools, &k.ProjectsInUse, &k.PoolsInUse)
	if errors.Is(err, pgx.ErrNoRows) {
		return APIKey{}, ErrUnauthorized
	}
	if err != nil {
		return APIKey{}, fmt.Errorf("authenticate API key: %w", err)
	}
	return k, nil
}
