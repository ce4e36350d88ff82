package store_test

import (
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/store"
)

// remoteBuild is a build of project "app" with the remote version source.
func remoteBuild(platform, increment, initial, buildVersion string) store.NewBuild {
	spec := api.BuildSpec{Platform: platform, Versions: &api.AppVersions{Source: api.VersionSourceRemote, Increment: increment,
		ApplicationID: "com.example.app", AppVersion: "1.0.0", InitialBuildVersion: initial, BuildVersion: buildVersion}}
	b, err := json.Marshal(spec)
	if err != nil {
		panic(err) // a fixed, plain value
	}
	return store.NewBuild{ID: store.NewID(), Platform: platform, Project: "app", SourceFormat: "tar.gz", Spec: b, Commit: func() error { return nil }}
}

// storedBuildVersion is build id's build version as GetBuild reads it,
// checked against its stored spec.
func (f *fixture) storedBuildVersion(id string) string {
	f.t.Helper()
	b, err := f.s.GetBuild(f.ctx, id)
	if err != nil {
		f.t.Fatal(err)
	}
	if b.Spec == nil || b.Spec.Versions == nil || b.Spec.Versions.BuildVersion != b.BuildVersion {
		f.t.Fatalf("build %s: build_version %q but spec %+v", id, b.BuildVersion, b.Spec)
	}
	return b.BuildVersion
}

// TestSubmitTakesBuildVersions: the first remote build starts from the
// project's number, each autoIncrement build takes the next one, a build
// without autoIncrement the current one, and a retry keeps its build's.
func TestSubmitTakesBuildVersions(t *testing.T) {
	t.Parallel()
	f := newStore(t)
	first := f.submit(remoteBuild(api.PlatformAndroid, api.IncrementBuildVersion, "43", ""))
	second := f.submit(remoteBuild(api.PlatformAndroid, api.IncrementBuildVersion, "43", ""))
	same := f.submit(remoteBuild(api.PlatformAndroid, "", "43", ""))
	retry := f.submit(remoteBuild(api.PlatformAndroid, api.IncrementBuildVersion, "43", "43"))
	ios := f.submit(remoteBuild(api.PlatformIOS, api.IncrementBuildVersion, "1.9", ""))
	ios2 := f.submit(remoteBuild(api.PlatformIOS, api.IncrementBuildVersion, "1.9", ""))
	for id, want := range map[string]string{first.ID: "43", second.ID: "44", same.ID: "44", retry.ID: "43", ios.ID: "1.9", ios2.ID: "1.10"} {
		if got := f.storedBuildVersion(id); got != want {
			t.Errorf("build %s: build version %q, want %q", id, got, want)
		}
	}
	if second.BuildVersion != "44" || second.AppVersion != "1.0.0" {
		t.Errorf("Submit answered versions %q/%q", second.AppVersion, second.BuildVersion)
	}
	rec, err := f.s.AppVersion(f.ctx, "app", api.PlatformAndroid, "com.example.app")
	if err != nil || rec.BuildVersion != "44" {
		t.Fatalf("kept version %+v, %v", rec, err)
	}
}

// TestParallelSubmitsTakeDistinctBuildVersions: twenty submits at once
// take twenty different numbers, one after another.
func TestParallelSubmitsTakeDistinctBuildVersions(t *testing.T) {
	t.Parallel()
	f := newStore(t)
	const n = 20
	ids := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			sub, err := f.s.Submit(f.ctx, remoteBuild(api.PlatformAndroid, api.IncrementBuildVersion, "1", ""))
			ids[i], errs[i] = sub.Build.ID, err
		})
	}
	wg.Wait()
	var got []int
	for i, id := range ids {
		if errs[i] != nil {
			t.Fatalf("submit %d: %v", i, errs[i])
		}
		v, err := strconv.Atoi(f.storedBuildVersion(id))
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, v)
	}
	slices.Sort(got)
	for i, v := range got {
		if v != i+1 {
			t.Fatalf("build versions %v, want 1 to %d once each", got, n)
		}
	}
}

// TestBuildVersionRefusedStoresNoBuild: a submit whose build version
// cannot be decided stores no build (it is never built with a guess), and
// bad version input is refused before anything is stored.
func TestBuildVersionRefusedStoresNoBuild(t *testing.T) {
	t.Parallel()
	f := newStore(t)
	f.submit(remoteBuild(api.PlatformAndroid, "", strconv.Itoa(api.MaxVersionCode), ""))
	_, err := f.s.Submit(f.ctx, remoteBuild(api.PlatformAndroid, api.IncrementBuildVersion, "1", ""))
	wantErr(t, "incrementing past the largest versionCode", err, store.ErrConflict)
	for name, nb := range map[string]store.NewBuild{
		"a versionCode that is not a number": remoteBuild(api.PlatformAndroid, api.IncrementBuildVersion, "x1", ""),
		"no initial version":                 remoteBuild(api.PlatformAndroid, api.IncrementBuildVersion, "", ""),
		"an app-version increment":           remoteBuild(api.PlatformAndroid, api.IncrementAppVersion, "1", ""),
		"a bad buildNumber":                  remoteBuild(api.PlatformIOS, "", "1.2.3.4", ""),
	} {
		_, err := f.s.Submit(f.ctx, nb)
		wantErr(t, name, err, store.ErrInvalid)
	}
	var builds int
	if err := f.s.Pool().QueryRow(f.ctx, `SELECT count(*) FROM builds`).Scan(&builds); err != nil {
		t.Fatal(err)
	}
	if builds != 1 {
		t.Fatalf("%d builds stored, want only the first", builds)
	}
}

// TestSetAppVersion: set stores a valid number for a known project (lower
// ones too, as EAS allows) and refuses bad input, storing nothing.
func TestSetAppVersion(t *testing.T) {
	t.Parallel()
	f := newStore(t)
	f.submit(remoteBuild(api.PlatformAndroid, api.IncrementBuildVersion, "10", ""))
	set := func(project, platform, v string) error {
		_, err := f.s.SetAppVersion(f.ctx, api.AppVersionRecord{Project: project, Platform: platform, ApplicationID: "com.example.app", BuildVersion: v})
		return err
	}
	if err := set("app", api.PlatformAndroid, "7"); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "a non-number", set("app", api.PlatformAndroid, "seven"), store.ErrInvalid)
	wantErr(t, "zero", set("app", api.PlatformAndroid, "0"), store.ErrInvalid)
	wantErr(t, "an unknown platform", set("app", "windows", "8"), store.ErrInvalid)
	wantErr(t, "an unknown project", set("typo", api.PlatformAndroid, "8"), store.ErrNotFound)
	if err := set("app", api.PlatformIOS, "2.1"); err != nil {
		t.Fatal(err)
	}
	rec, err := f.s.AppVersion(f.ctx, "app", api.PlatformAndroid, "com.example.app")
	if err != nil || rec.BuildVersion != "7" {
		t.Fatalf("kept %+v, %v", rec, err)
	}
	if _, err := f.s.AppVersion(f.ctx, "typo", api.PlatformAndroid, "com.example.app"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an unknown project's version: %v", err)
	}
	next := f.submit(remoteBuild(api.PlatformAndroid, api.IncrementBuildVersion, "10", ""))
	if got := f.storedBuildVersion(next.ID); got != "8" {
		t.Fatalf("the build after set 7 has %q, want 8", got)
	}
}
