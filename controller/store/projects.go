package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/freeagent-build/freeagent/api"
)

// SealedVariable is a project variable whose value is sealed (by the
// caller) for its own project, environment and name. Variable.Value is
// left empty: the store never sees a value in the clear.
type SealedVariable struct {
	api.Variable
	Sealed []byte
	// HMAC is the caller's keyed hash of the value, for environmentDigest;
	// SetVariables stores it, reads leave it empty.
	HMAC []byte
}

// SetVariables creates or replaces one variable in several environments of
// a project, in one transaction with one audit event (names, visibility and
// environments: never values).
func (s *Store) SetVariables(ctx context.Context, vars []SealedVariable) error {
	if len(vars) == 0 {
		return fmt.Errorf("%w: field \"environments\" names no environment", ErrInvalid)
	}
	first := vars[0].Variable
	envs := make([]string, 0, len(vars))
	return s.withTx(ctx, func(t *txn) error {
		for _, v := range vars {
			if v.Project != first.Project || v.Name != first.Name {
				return errors.New("set variables: one variable of one project at a time") // a programming error
			}
			if len(v.HMAC) == 0 {
				return errors.New("set variables: the value's keyed hash is missing") // a programming error
			}
			_, err := t.Exec(ctx, `INSERT INTO project_variables (project, environment, name, visibility, type, value_sealed, value_hmac, value_hmac_of)
				VALUES ($1, $2, $3, $4, $5, $6, $7, sha256($6))
				ON CONFLICT (project, environment, name) DO UPDATE SET visibility = EXCLUDED.visibility, type = EXCLUDED.type,
					value_sealed = EXCLUDED.value_sealed, value_hmac = EXCLUDED.value_hmac, value_hmac_of = EXCLUDED.value_hmac_of,
					updated_at = now()`,
				v.Project, v.Environment, v.Name, v.Visibility, v.Type, v.Sealed, v.HMAC)
			if err != nil {
				return fmt.Errorf("set variable %s: %w", v.Name, err)
			}
			envs = append(envs, v.Environment)
		}
		t.emit(Change{Kind: "project", ID: first.Project, Event: "project.variable_set",
			Detail: map[string]any{"name": first.Name, "visibility": first.Visibility, "type": first.Type, "environments": envs}})
		return nil
	})
}

// Variables lists a project's variables, sealed, ordered by environment
// and name; environment "" lists every environment.
func (s *Store) Variables(ctx context.Context, project, environment string) ([]SealedVariable, error) {
	rows, err := s.pool.Query(ctx, `SELECT project, environment, name, visibility, type, updated_at, value_sealed FROM project_variables
		WHERE project = $1 AND ($2 = '' OR environment = $2) ORDER BY environment, name`, project, environment)
	if err != nil {
		return nil, fmt.Errorf("list variables: %w", err)
	}
	out, err := collectVariables(rows)
	if err != nil {
		return nil, fmt.Errorf("list variables: %w", err)
	}
	return out, nil
}

// collectVariables reads rows of (project, environment, name, visibility,
// type, updated_at, value_sealed).
func collectVariables(rows pgx.Rows) ([]SealedVariable, error) {
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (SealedVariable, error) {
		var v SealedVariable
		err := r.Scan(&v.Project, &v.Environment, &v.Name, &v.Visibility, &v.Type, &v.UpdatedAt, &v.Sealed)
		return v, err
	})
}

// DeleteVariable deletes a project's variable from one environment, or from
// all when environment is "". Nothing to delete is ErrNotFound.
func (s *Store) DeleteVariable(ctx context.Context, project, name, environment string) error {
	return s.withTx(ctx, func(t *txn) error {
		rows, err := t.Query(ctx, `DELETE FROM project_variables WHERE project = $1 AND name = $2 AND ($3 = '' OR environment = $3)
			RETURNING environment, visibility`, project, name, environment)
		if err != nil {
			return fmt.Errorf("delete variable %s: %w", name, err)
		}
		var envs, vis []string
		var e, v string
		if _, err := pgx.ForEachRow(rows, []any{&e, &v}, func() error {
			envs, vis = append(envs, e), append(vis, v)
			return nil
		}); err != nil {
			return fmt.Errorf("delete variable %s: %w", name, err)
		}
		if len(envs) == 0 {
			where := "any environment"
			if environment != "" {
				where = "environment " + environment
			}
			return fmt.Errorf("%w: project %s has no variable %s in %s", ErrNotFound, project, name, where)
		}
		slices.Sort(envs)
		slices.Sort(vis)
		t.emit(Change{Kind: "project", ID: project, Event: "project.variable_deleted",
			Detail: map[string]any{"name": name, "visibility": slices.Compact(vis), "environments": envs}})
		return nil
	})
}

// SealedCredential is a farm credential with its secret part sealed (by the
// caller) for its project, platform and name.
type SealedCredential struct {
	api.Credential
	Sealed []byte
}

// SetCredential creates or replaces a project's credential; audited by
// fingerprint.
func (s *Store) SetCredential(ctx context.Context, c SealedCredential) (api.Credential, error) {
	info, err := json.Marshal(c.Android)
	if err != nil {
		return api.Credential{}, fmt.Errorf("encode credential info: %w", err)
	}
	out := c.Credential
	err = s.withTx(ctx, func(t *txn) error {
		err := t.QueryRow(ctx, `INSERT INTO project_credentials (project, platform, name, info, secret_sealed) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (project, platform, name) DO UPDATE SET info = EXCLUDED.info, secret_sealed = EXCLUDED.secret_sealed, created_at = now()
			RETURNING created_at`, c.Project, c.Platform, c.Name, string(info), c.Sealed).Scan(&out.CreatedAt)
		if err != nil {
			return fmt.Errorf("store credential: %w", err)
		}
		t.emit(Change{Kind: "project", ID: c.Project, Event: "project.credential_set", Platform: c.Platform,
			Detail: credentialDetail(c.Credential)})
		return nil
	})
	return out, err
}

func credentialDetail(c api.Credential) map[string]any {
	d := map[string]any{"name": c.Name}
	if c.Android != nil {
		d["certificate_sha256"], d["key_alias"] = c.Android.CertificateSHA256, c.Android.KeyAlias
	}
	return d
}

const credentialColumns = `project, platform, name, info, created_at`

func scanCredential(r pgx.Row, extra ...any) (api.Credential, error) {
	var c api.Credential
	var info []byte
	if err := r.Scan(append([]any{&c.Project, &c.Platform, &c.Name, &info, &c.CreatedAt}, extra...)...); err != nil {
		return c, err
	}
	if c.Platform == api.PlatformAndroid {
		c.Android = &api.KeystoreInfo{}
		if err := json.Unmarshal(info, c.Android); err != nil {
			return c, fmt.Errorf("read credential info: %w", err)
		}
	}
	return c, nil
}

// Credentials lists a project's farm credentials (fingerprints only).
func (s *Store) Credentials(ctx context.Context, project string) ([]api.Credential, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+credentialColumns+` FROM project_credentials WHERE project = $1 ORDER BY platform, name`, project)
	if err != nil {
		return nil, fmt.Errorf("list credentials: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (api.Credential, error) { return scanCredential(r) })
	if err != nil {
		return nil, fmt.Errorf("list credentials: %w", err)
	}
	return out, nil
}

// Credential reads one farm credential with its sealed secret.
func (s *Store) Credential(ctx context.Context, project, platform, name string) (SealedCredential, error) {
	var c SealedCredential
	var err error
	c.Credential, err = scanCredential(s.pool.QueryRow(ctx, `SELECT `+credentialColumns+`, secret_sealed FROM project_credentials
		WHERE project = $1 AND platform = $2 AND name = $3`, project, platform, name), &c.Sealed)
	if errors.Is(err, pgx.ErrNoRows) {
		return c, fmt.Errorf("%w: project %s has no %s credential %q", ErrNotFound, project, platform, name)
	}
	if err != nil {
		return c, fmt.Errorf("read credential: %w", err)
	}
	return c, nil
}

// DeleteCredential deletes a project's farm credential; audited.
func (s *Store) DeleteCredential(ctx context.Context, project, platform, name string) error {
	return s.withTx(ctx, func(t *txn) error {
		c, err := scanCredential(t.QueryRow(ctx, `DELETE FROM project_credentials WHERE project = $1 AND platform = $2 AND name = $3
			RETURNING `+credentialColumns, project, platform, name))
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%w: project %s has no %s credential %q", ErrNotFound, project, platform, name)
		}
		if err != nil {
			return fmt.Errorf("delete credential: %w", err)
		}
		t.emit(Change{Kind: "project", ID: project, Event: "project.credential_deleted", Platform: platform, Detail: credentialDetail(c)})
		return nil
	})
}
