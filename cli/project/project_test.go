package project

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/freeagent-build/freeagent/api"
)

func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for name, body := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func yes() *bool { b := true; return &b }
func no() *bool  { b := false; return &b }

// TestDetectTable covers what the generator does not: the profile's
// options, the deliberate differences one by one, and Yarn Berry.
func TestDetectTable(t *testing.T) {
	mono := func(extra map[string]string) map[string]string {
		m := map[string]string{
			"package.json":                 `{"private":true,"workspaces":["apps/*","packages/*"]}`,
			"apps/mobile/package.json":     `{"name":"mobile"}`,
			"packages/shared/package.json": `{"name":"@fixture/shared"}`,
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	cases := []struct {
		name    string
		files   map[string]string
		app     string
		opts    Options
		want    api.Project
		wantErr string
	}{
		{name: "yarn classic monorepo", app: "apps/mobile", files: mono(map[string]string{"yarn.lock": yarnV1Lock}),
			want: api.Project{AppDir: "apps/mobile", PackageManager: "yarn", Lockfile: "yarn.lock", Workspace: true}},
		{name: "yarn berry by lockfile", app: "apps/mobile", files: mono(map[string]string{"yarn.lock": yarnBerryLock}),
			want: api.Project{AppDir: "apps/mobile", PackageManager: "yarn", Lockfile: "yarn.lock", Workspace: true, YarnBerry: true}},
		{name: "yarn berry by .yarnrc.yml in the app", app: "apps/mobile", files: mono(map[string]string{"yarn.lock": yarnV1Lock, "apps/mobile/.yarnrc.yml": "yarnPath: x\n"}),
			want: api.Project{AppDir: "apps/mobile", PackageManager: "yarn", Lockfile: "yarn.lock", Workspace: true, YarnBerry: true}},
		{name: "packageManager pins yarn 4 and turns corepack on", files: map[string]string{
			"package.json": `{"packageManager":"yarn@4.1.0+sha512.0123abcd"}`, "yarn.lock": yarnBerryLock},
			want: api.Project{PackageManager: "yarn", PackageManagerVersion: "4.1.0", Lockfile: "yarn.lock", YarnBerry: true, Corepack: true}},
		{name: "corepack false in the profile wins", opts: Options{Corepack: no()}, files: map[string]string{
			"package.json": `{"packageManager":"pnpm@9.15.0"}`, "pnpm-lock.yaml": "lockfileVersion: '9.0'\n"},
			want: api.Project{PackageManager: "pnpm", PackageManagerVersion: "9.15.0", Lockfile: "pnpm-lock.yaml"}},
		{name: "profile pins pnpm", opts: Options{Pnpm: "10.2.0", Yarn: "1.22.22", Corepack: yes()}, files: map[string]string{
			"package.json": `{}`, "pnpm-lock.yaml": "lockfileVersion: '9.0'\n"},
			want: api.Project{PackageManager: "pnpm", PackageManagerVersion: "10.2.0", Lockfile: "pnpm-lock.yaml", Corepack: true}},
		{name: "the profile's yarn does not choose the manager", opts: Options{Yarn: "4.5.0"}, files: map[string]string{"package.json": `{}`},
			want: api.Project{PackageManager: "npm"}},
		{name: "profile and packageManager disagree", opts: Options{Pnpm: "8.0.0"}, files: map[string]string{
			"package.json": `{"packageManager":"pnpm@9.15.0"}`, "pnpm-lock.yaml": "x"}, wantErr: "pins pnpm 8.0.0"},
		{name: "no lockfile: npm, not frozen", files: map[string]string{"package.json": `{}`},
			want: api.Project{PackageManager: "npm"}},
		{name: "no lockfile: packageManager", files: map[string]string{"package.json": `{"packageManager":"bun@1.1.38"}`},
			want: api.Project{PackageManager: "bun", PackageManagerVersion: "1.1.38", Corepack: true}},
		{name: "npm-shrinkwrap.json is npm's", files: map[string]string{"package.json": `{}`, "npm-shrinkwrap.json": "{}", "package-lock.json": "{}"},
			want: api.Project{PackageManager: "npm", Lockfile: "npm-shrinkwrap.json"}},
		{name: "bun text lockfile preferred", files: map[string]string{"package.json": `{}`, "bun.lockb": "x", "bun.lock": "{}"},
			want: api.Project{PackageManager: "bun", Lockfile: "bun.lock"}},
		{name: "mix without packageManager", files: map[string]string{"package.json": `{}`, "yarn.lock": yarnV1Lock, "package-lock.json": "{}"},
			wantErr: "(yarn.lock, package-lock.json)"},
		{name: "mix with packageManager", files: map[string]string{"package.json": `{"packageManager":"npm@10.8.2"}`, "yarn.lock": yarnV1Lock, "package-lock.json": "{}"},
			want: api.Project{PackageManager: "npm", PackageManagerVersion: "10.8.2", Lockfile: "package-lock.json", Corepack: true}},
		{name: "mix, packageManager names neither", files: map[string]string{"package.json": `{"packageManager":"pnpm@9.0.0"}`, "yarn.lock": yarnV1Lock, "package-lock.json": "{}"},
			wantErr: "packageManager says pnpm@9.0.0, which has no lockfile here"},
		{name: "packageManager contradicts the lockfile", files: map[string]string{"package.json": `{"packageManager":"yarn@1.22.22"}`, "package-lock.json": "{}"},
			wantErr: "the only lockfile is package-lock.json"},
		{name: "yarn 4 and a v1 lockfile", files: map[string]string{"package.json": `{"packageManager":"yarn@4.1.0"}`, "yarn.lock": yarnV1Lock},
			wantErr: "is a Yarn 1 lockfile"},
		{name: "yarn 1 and a berry lockfile", opts: Options{Yarn: "1.22.22"}, files: map[string]string{"package.json": `{}`, "yarn.lock": yarnBerryLock},
			wantErr: "written by Yarn 2 or later"},
		{name: "bad packageManager", files: map[string]string{"package.json": `{"packageManager":"yarn"}`}, wantErr: "has no version"},
		{name: "unknown packageManager", files: map[string]string{"package.json": `{"packageManager":"nub@1.0.0"}`}, wantErr: "supports npm, yarn, pnpm and bun"},
		{name: "bracket globs refused", app: "apps/mobile", files: map[string]string{
			"pnpm-workspace.yaml": "packages:\n  - 'apps/[mn]obile'\n", "apps/mobile/package.json": "{}"}, wantErr: "does not interpret"},
		{name: "app without package.json", app: "apps/mobile", files: map[string]string{"package.json": "{}", "apps/mobile/app.json": "{}"}, wantErr: "has no package.json"},
		{name: "pnpm workspace, lockfile only at the root counts", app: "apps/mobile", files: map[string]string{
			"pnpm-workspace.yaml": "packages:\n  - apps/*\n", "package.json": "{}", "pnpm-lock.yaml": "x",
			"apps/mobile/package.json": "{}", "apps/mobile/package-lock.json": "{}"},
			want: api.Project{AppDir: "apps/mobile", PackageManager: "pnpm", Lockfile: "pnpm-lock.yaml", Workspace: true}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := writeTree(t, c.files)
			l, err := Detect(filepath.Join(root, c.app), c.opts)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("Detect = %+v, %v; want an error containing %q", l, err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if l.Project != c.want || l.WorkspaceRoot != root {
				t.Fatalf("Detect = %s %+v\nwant     %s %+v", l.WorkspaceRoot, l.Project, root, c.want)
			}
		})
	}
}

// TestDetectThroughSymlink: the root is reported with links resolved, as
// pack.Scan reports its root.
func TestDetectThroughSymlink(t *testing.T) {
	root := writeTree(t, map[string]string{"package.json": `{"workspaces":["apps/*"]}`, "apps/mobile/package.json": "{}", "yarn.lock": yarnV1Lock})
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(root, link); err != nil {
		t.Fatal(err)
	}
	l, err := Detect(filepath.Join(link, "apps", "mobile"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if l.WorkspaceRoot != root || l.Project.AppDir != "apps/mobile" {
		t.Fatalf("Detect = %+v", l)
	}
}

func TestHugeManifestRefused(t *testing.T) {
	root := writeTree(t, map[string]string{"app/package.json": "{}"})
	if err := os.WriteFile(filepath.Join(root, "package.json"), make([]byte, maxManifestBytes+10), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Detect(filepath.Join(root, "app"), Options{}); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("err = %v", err)
	}
}
