package store

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"

	"github.com/jackc/pgx/v5"
)

// projectName is what names a project: the app's slug, which Expo allows as
// ^[a-zA-Z0-9_-]+$, or the name `expo-build build --project` gives.
var projectName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

// sha256Hex is a SHA-256 written as lowercase hex: a cache key or a source
// fingerprint.
var sha256Hex = regexp.MustCompile(`^[0-9a-f]{64}$`)

// ValidateProject checks a project name, naming the field in the error.
func ValidateProject(field, p string) error {
	if !projectName.MatchString(p) {
		return fmt.Errorf("%w: %s %q is not a project name: use 1 to 128 letters, digits, \"_\" and \"-\" (the app's expo.slug)", ErrInvalid, field, p)
	}
	return nil
}

// ValidatePool checks a pool name; it follows the project rule.
func ValidatePool(field, p string) error {
	if !projectName.MatchString(p) {
		return fmt.Errorf("%w: %s %q is not a pool name: use 1 to 128 letters, digits, \"_\" and \"-\"", ErrInvalid, field, p)
	}
	return nil
}

// Scope is what a caller may see: every project, or the listed ones.
type Scope struct {
	All      bool
	Projects []string
}

// Allows reports whether the scope covers project p.
func (s Scope) Allows(p string) bool { return s.All || slices.Contains(s.Projects, p) }

// filter is the projects a query keeps; nil keeps every project.
func (s Scope) filter() []string {
	if s.All {
		return nil
	}
	if s.Projects == nil {
		return []string{}
	}
	return s.Projects
}

// KeyScope is what key k may see. An admin sees everything; a developer key
// sees the projects it is bound to. An unbound developer key sees
// everything while the farm binds no key to a project (a one-team farm),
// and nothing once it does: it must be bound too (ErrForbidden, saying how).
func KeyScope(k APIKey) (Scope, error) {
	switch {
	case k.Role == "admin":
		return Scope{All: true}, nil
	case len(k.Projects) > 0:
		return Scope{Projects: k.Projects}, nil
	case !k.ProjectsInUse:
		return Scope{All: true}, nil
	}
	return Scope{}, fmt.Errorf("%w: this developer key is bound to no project, and this farm has project-bound keys, so unbound keys are refused; have an admin bind it (freeagent-controller keys bind %s --project NAME) or create a key with --project", ErrForbidden, k.ID)
}

// BindKey adds projects (developer keys) or pools (worker keys) to key id.
// Binding is additive; UnbindKey removes.
func (s *Store) BindKey(ctx context.Context, id string, projects, pools []string) error {
	if err := validateBindings(projects, pools); err != nil {
		return err
	}
	return s.withTx(ctx, func(t *txn) error { return t.bindKey(ctx, id, projects, pools) })
}

func validateBindings(projects, pools []string) error {
	for _, p := range projects {
		if err := ValidateProject("--project", p); err != nil {
			return err
		}
	}
	for _, p := range pools {
		if err := ValidatePool("--pool", p); err != nil {
			return err
		}
	}
	return nil
}

func (t *txn) bindKey(ctx context.Context, id string, projects, pools []string) error {
	var role string
	err := t.QueryRow(ctx, `SELECT role FROM api_keys WHERE id = $1 FOR UPDATE`, id).Scan(&role)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%w: no API key with id %q (see `keys list`)", ErrNotFound, id)
	}
	if err != nil {
		return fmt.Errorf("bind key: %w", err)
	}
	if len(projects) > 0 && role != "developer" {
		return fmt.Errorf("%w: only developer keys are bound to projects (key %s is a %s key; admins see every project)", ErrInvalid, id, role)
	}
	if len(pools) > 0 && role != "worker" {
		return fmt.Errorf("%w: only worker keys are bound to pools (key %s is a %s key)", ErrInvalid, id, role)
	}
	if _, err := t.Exec(ctx, `INSERT INTO api_key_projects (key_id, project) SELECT $1, unnest($2::text[]) ON CONFLICT DO NOTHING`, id, projects); err != nil {
		return fmt.Errorf("bind key to projects: %w", err)
	}
	if _, err := t.Exec(ctx, `INSERT INTO api_key_pools (key_id, pool) SELECT $1, unnest($2::text[]) ON CONFLICT DO NOTHING`, id, pools); err != nil {
		return fmt.Errorf("bind key to pools: %w", err)
	}
	t.emit(Change{Kind: "key", ID: id, Event: "key.bound", Detail: map[string]any{"projects": projects, "pools": pools}})
	return nil
}

// UnbindKey removes projects and pools from key id.
func (s *Store) UnbindKey(ctx context.Context, id string, projects, pools []string) error {
	return s.withTx(ctx, func(t *txn) error {
		if _, err := t.Exec(ctx, `DELETE FROM api_key_projects WHERE key_id = $1 AND project = ANY($2)`, id, projects); err != nil {
			return fmt.Errorf("unbind key: %w", err)
		}
		if _, err := t.Exec(ctx, `DELETE FROM api_key_pools WHERE key_id = $1 AND pool = ANY($2)`, id, pools); err != nil {
			return fmt.Errorf("unbind key: %w", err)
		}
		t.emit(Change{Kind: "key", ID: id, Event: "key.unbound", Detail: map[string]any{"projects": projects, "pools": pools}})
		return nil
	})
}

// BuildProject says which project build id belongs to.
func (s *Store) BuildProject(ctx context.Context, id string) (string, error) {
	var p string
	err := s.pool.QueryRow(ctx, `SELECT project FROM builds WHERE id = $1`, id).Scan(&p)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("%w: no build %q", ErrNotFound, id)
	}
	if err != nil {
		return "", fmt.Errorf("read the build's project: %w", err)
	}
	return p, nil
}
