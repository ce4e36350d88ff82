package store

import (
	"context"
	"errors"
	"fmt"
	"regexp"

	"github.com/jackc/pgx/v5"

	"github.com/freeagent-build/freeagent/api"
)

// applicationIDPattern admits Android packages and iOS bundle identifiers.
var applicationIDPattern = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,255}$`)

// maxAppVersion bounds a stored app version ("1.2.3").
const maxAppVersion = 100

func validateAppVersionKey(project, platform, applicationID string) error {
	if err := ValidateProject("project", project); err != nil {
		return err
	}
	if err := ValidatePlatform(platform); err != nil {
		return err
	}
	if !applicationIDPattern.MatchString(applicationID) {
		return fmt.Errorf("%w: application identifier %q is not an Android package or iOS bundle identifier (letters, digits, \".\", \"_\" and \"-\")", ErrInvalid, applicationID)
	}
	return nil
}

func validateAppVersion(v string) error {
	if err := checkText("app_version", v); err != nil {
		return err
	}
	if len(v) > maxAppVersion {
		return fmt.Errorf("%w: app version is longer than %d characters", ErrInvalid, maxAppVersion)
	}
	return nil
}

// checkRemoteVersions checks what a spec asks of the remote version
// source before anything is stored.
func checkRemoteVersions(project, platform string, v *api.AppVersions) error {
	if !v.Remote() {
		return nil
	}
	if project == "" {
		return fmt.Errorf("%w: field \"spec\": the remote version source needs the build's project", ErrInvalid)
	}
	if err := validateAppVersionKey(project, platform, v.ApplicationID); err != nil {
		return fmt.Errorf("field \"spec\": versions: %w", err)
	}
	if err := validateAppVersion(v.AppVersion); err != nil {
		return fmt.Errorf("field \"spec\": versions: %w", err)
	}
	if v.Increment != "" && v.Increment != api.IncrementBuildVersion {
		return fmt.Errorf("%w: field \"spec\": versions.increment %q: the remote version source increments only the build version (autoIncrement \"version\" is local only, as in EAS)", ErrInvalid, v.Increment)
	}
	for _, b := range []string{v.BuildVersion, v.InitialBuildVersion} {
		if b == "" {
			continue
		}
		if err := api.CheckBuildVersion(platform, b); err != nil {
			return fmt.Errorf("%w: field \"spec\": versions: %v", ErrInvalid, err)
		}
	}
	if v.BuildVersion == "" && v.InitialBuildVersion == "" {
		return fmt.Errorf("%w: field \"spec\": versions: the remote version source needs initial_build_version (the project's own %s)", ErrInvalid, api.BuildVersionName(platform))
	}
	return nil
}

// takeBuildVersion decides a remote-source build's build version inside
// the transaction that stores the build, as EAS does at build creation:
// the farm's current one, the next one with autoIncrement, or, the first
// time, InitialBuildVersion. The row stays locked until the build is
// stored, so two submits never take the same number; a build that then
// fails has used its number, as in EAS.
func takeBuildVersion(ctx context.Context, t *txn, project, platform string, v *api.AppVersions) error {
	var taken string
	err := t.QueryRow(ctx, `INSERT INTO app_versions (project, platform, application_id, build_version, app_version)
		VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING RETURNING build_version`,
		project, platform, v.ApplicationID, v.InitialBuildVersion, v.AppVersion).Scan(&taken)
	switch {
	case err == nil:
		v.BuildVersion = taken
		return nil
	case !errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("initialize the app version: %w", err)
	}
	var current string
	if err := t.QueryRow(ctx, `SELECT build_version FROM app_versions WHERE project = $1 AND platform = $2 AND application_id = $3 FOR UPDATE`,
		project, platform, v.ApplicationID).Scan(&current); err != nil {
		return fmt.Errorf("read the app version: %w", err)
	}
	taken = current
	if v.Increment == api.IncrementBuildVersion {
		next, err := api.NextBuildVersion(platform, current)
		if err != nil {
			return fmt.Errorf("%w: the farm's %s of %s: %v; set a valid one with `expo-build build:version:set`", ErrConflict, api.BuildVersionName(platform), v.ApplicationID, err)
		}
		taken = next
	}
	if _, err := t.Exec(ctx, `UPDATE app_versions SET build_version = $4, app_version = $5, updated_at = now()
		WHERE project = $1 AND platform = $2 AND application_id = $3`,
		project, platform, v.ApplicationID, taken, v.AppVersion); err != nil {
		return fmt.Errorf("store the app version: %w", err)
	}
	v.BuildVersion = taken
	return nil
}

// AppVersion is the build version the farm keeps for an application;
// ErrNotFound when it keeps none.
func (s *Store) AppVersion(ctx context.Context, project, platform, applicationID string) (api.AppVersionRecord, error) {
	if err := validateAppVersionKey(project, platform, applicationID); err != nil {
		return api.AppVersionRecord{}, err
	}
	r := api.AppVersionRecord{Project: project, Platform: platform, ApplicationID: applicationID}
	err := s.pool.QueryRow(ctx, `SELECT build_version, app_version, updated_at FROM app_versions
		WHERE project = $1 AND platform = $2 AND application_id = $3`, project, platform, applicationID).
		Scan(&r.BuildVersion, &r.AppVersion, &r.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, fmt.Errorf("%w: the farm keeps no %s for %s %s of project %q yet: the first build with the remote version source initializes it from the app config, or set one with `expo-build build:version:set`",
			ErrNotFound, api.BuildVersionName(platform), platform, applicationID, project)
	}
	if err != nil {
		return r, fmt.Errorf("read the app version: %w", err)
	}
	return r, nil
}

// SetAppVersion sets the build version the farm keeps for an application
// of a project the farm knows (one with builds, variables, credentials,
// bound keys, pools or versions): a mistyped project is refused, not
// started. As in EAS any valid number is accepted, lower ones too.
func (s *Store) SetAppVersion(ctx context.Context, r api.AppVersionRecord) (api.AppVersionRecord, error) {
	if err := validateAppVersionKey(r.Project, r.Platform, r.ApplicationID); err != nil {
		return r, err
	}
	if err := api.CheckBuildVersion(r.Platform, r.BuildVersion); err != nil {
		return r, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if err := validateAppVersion(r.AppVersion); err != nil {
		return r, err
	}
	err := s.withTx(ctx, func(t *txn) error {
		var known bool
		if err := t.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM builds WHERE project = $1)
			OR EXISTS (SELECT 1 FROM app_versions WHERE project = $1)
			OR EXISTS (SELECT 1 FROM project_variables WHERE project = $1)
			OR EXISTS (SELECT 1 FROM project_credentials WHERE project = $1)
			OR EXISTS (SELECT 1 FROM api_key_projects WHERE project = $1)
			OR EXISTS (SELECT 1 FROM project_pools WHERE project = $1)`, r.Project).Scan(&known); err != nil {
			return fmt.Errorf("look up project %q: %w", r.Project, err)
		}
		if !known {
			return fmt.Errorf("%w: project %q is unknown to the farm (no builds, variables, credentials or keys): check the app's slug or --project, or submit a build first", ErrNotFound, r.Project)
		}
		err := t.QueryRow(ctx, `INSERT INTO app_versions (project, platform, application_id, build_version, app_version)
			VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (project, platform, application_id) DO UPDATE SET build_version = EXCLUDED.build_version,
				app_version = CASE WHEN EXCLUDED.app_version = '' THEN app_versions.app_version ELSE EXCLUDED.app_version END, updated_at = now()
			RETURNING app_version, updated_at`, r.Project, r.Platform, r.ApplicationID, r.BuildVersion, r.AppVersion).
			Scan(&r.AppVersion, &r.UpdatedAt)
		if err != nil {
			return fmt.Errorf("store the app version: %w", err)
		}
		t.emit(Change{Kind: "project", ID: r.Project, Event: "project.app_version_set",
			Detail: map[string]any{"platform": r.Platform, "application_id": r.ApplicationID, "build_version": r.BuildVersion}})
		return nil
	})
	if err != nil {
		return r, err
	}
	return r, nil
}
