package vmbootstrap

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/freeagent-build/freeagent/api"
	clproject "github.com/freeagent-build/freeagent/cli/project"
	"github.com/freeagent-build/freeagent/internal/testsupport/testtool"
)

func argvs(cmds []Command) []string {
	var out []string
	for _, c := range cmds {
		s := strings.Join(c.Argv, " ")
		if c.Dir != "" {
			s = "(" + c.Dir + ") " + s
		}
		out = append(out, s)
	}
	return out
}

func TestInstallCommandsArgv(t *testing.T) {
	cases := []struct {
		p      api.Project
		frozen bool
		want   []string
	}{
		{api.Project{PackageManager: "npm", Lockfile: "package-lock.json"}, true, []string{"npm ci --include=dev"}},
		{api.Project{PackageManager: "npm", Lockfile: "package-lock.json"}, false, []string{"npm install --include=dev"}},
		{api.Project{PackageManager: "npm"}, true, []string{"npm install --include=dev"}}, // nothing to freeze to
		{api.Project{PackageManager: "yarn", Lockfile: "yarn.lock"}, true, []string{"yarn install --frozen-lockfile --production false"}},
		{api.Project{PackageManager: "yarn"}, true, []string{"yarn install --production false"}},
		{api.Project{PackageManager: "yarn", Lockfile: "yarn.lock", YarnBerry: true}, true, []string{"yarn install --inline-builds --immutable"}},
		{api.Project{PackageManager: "yarn", Lockfile: "yarn.lock", YarnBerry: true}, false, []string{"yarn install --inline-builds --no-immutable"}},
		{api.Project{PackageManager: "pnpm", Lockfile: "pnpm-lock.yaml"}, true, []string{"pnpm install --frozen-lockfile"}},
		{api.Project{PackageManager: "pnpm", Lockfile: "pnpm-lock.yaml"}, false, []string{"pnpm install --no-frozen-lockfile"}},
		{api.Project{PackageManager: "bun", Lockfile: "bun.lock"}, true, []string{"bun install --frozen-lockfile"}},
		{api.Project{PackageManager: "bun"}, true, []string{"bun install"}},
		{api.Project{PackageManager: "yarn", PackageManagerVersion: "4.1.0", Lockfile: "yarn.lock", YarnBerry: true, Corepack: true}, true,
			[]string{"corepack enable", "corepack prepare yarn@4.1.0 --activate", "yarn install --inline-builds --immutable"}},
		{api.Project{PackageManager: "pnpm", PackageManagerVersion: "10.2.0", Lockfile: "pnpm-lock.yaml"}, true,
			[]string{"npm install -g pnpm@10.2.0", "pnpm install --frozen-lockfile"}},
		{api.Project{PackageManager: "bun", PackageManagerVersion: "1.1.38", Corepack: true}, false,
			[]string{"corepack enable", "npm install -g bun@1.1.38", "bun install"}},
		{api.Project{PackageManager: "npm", PackageManagerVersion: "10.8.2", Corepack: true, Lockfile: "package-lock.json"}, true,
			[]string{"corepack enable", "npm ci --include=dev"}},
	}
	for _, c := range cases {
		got := argvs(InstallCommands(c.p, c.frozen))
		if !slices.Equal(got, c.want) {
			t.Errorf("InstallCommands(%+v, %v) = %q, want %q", c.p, c.frozen, got, c.want)
		}
		for _, cmd := range InstallCommands(c.p, c.frozen) {
			if cmd.Dir != "" {
				t.Errorf("%v runs in %q, not at the workspace root", cmd.Argv, cmd.Dir)
			}
		}
	}
	if got := argvs([]Command{ReinstallCommand(api.Project{PackageManager: "pnpm", Lockfile: "pnpm-lock.yaml", Corepack: true, AppDir: "apps/mobile"})}); !slices.Equal(got, []string{"pnpm install --no-frozen-lockfile"}) {
		t.Errorf("ReinstallCommand = %q", got)
	}
}

func TestScriptAndExpoCommands(t *testing.T) {
	yarn := api.Project{PackageManager: "yarn", AppDir: "apps/mobile"}
	cases := []struct {
		got  Command
		want string
	}{
		{ScriptCommand(yarn, HookPreInstall), "(apps/mobile) npm run eas-build-pre-install"},
		{ScriptCommand(yarn, HookPostInstall), "(apps/mobile) yarn run eas-build-post-install"},
		{ScriptCommand(api.Project{PackageManager: "pnpm"}, HookPreInstall), "pnpm run eas-build-pre-install"},
		{ScriptCommand(api.Project{PackageManager: "bun"}, HookOnBuildSuccess), "bun run eas-build-on-success"},
		{ExpoCommand(api.Project{PackageManager: "npm"}, "config", "--json"), "npx expo config --json"},
		{ExpoCommand(yarn, "config"), "(apps/mobile) yarn expo config"},
		{ExpoCommand(api.Project{PackageManager: "pnpm"}, "config"), "pnpm expo config"},
		{ExpoCommand(api.Project{PackageManager: "bun"}, "config"), "bun expo config"},
		{PrebuildCommand(yarn, "", "android"), "(apps/mobile) yarn expo prebuild --no-install --platform android"},
		{PrebuildCommand(api.Project{PackageManager: "npm"}, "npx expo prebuild --clean", "ios"), "npx expo prebuild --clean --platform ios"},
		{PrebuildCommand(api.Project{PackageManager: "npm"}, "expo prebuild -p ios --no-install", "ios"), "npx expo prebuild -p ios --no-install"},
		{PrebuildCommand(api.Project{PackageManager: "npm"}, "expo-cli prebuild --template t.tgz", "android"), "npx expo prebuild --template t.tgz --platform android"},
		{PrebuildCommand(api.Project{PackageManager: "pnpm"}, "prebuild  --platform android --clean", "ios"), "pnpm expo prebuild --platform android --clean"},
	}
	for _, c := range cases {
		if got := argvs([]Command{c.got})[0]; got != c.want {
			t.Errorf("got %q, want %q", got, c.want)
		}
	}
}

func managers(t *testing.T) (path, berry string) {
	t.Helper()
	npm := testtool.Path(t, "npm")
	prefix := t.TempDir()
	for dir, pkgs := range map[string][]string{"classic": {"yarn@1.22.22", "pnpm@9.15.9"}, "berry": {"@yarnpkg/cli-dist@4.18.1"}} {
		args := append([]string{"install", "--prefix", filepath.Join(prefix, dir), "--no-audit", "--no-fund"}, pkgs...)
		if out, err := exec.Command(npm, args...).CombinedOutput(); err != nil {
			t.Fatalf("npm %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	return filepath.Join(prefix, "classic", "node_modules", ".bin") + string(os.PathListSeparator) + os.Getenv("PATH"),
		filepath.Join(prefix, "berry", "node_modules", "@yarnpkg", "cli-dist", "bin", "yarn.js")
}

// copyFixture copies testdata/install/<name> to a fresh directory.
func copyFixture(t *testing.T, name, berry string) string {
	t.Helper()
	src := filepath.Join("testdata", "install", name)
	dst := filepath.Join(t.TempDir(), name)
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	if yarnrc := filepath.Join(dst, ".yarnrc.yml"); fileExists(yarnrc) {
		f, err := os.OpenFile(yarnrc, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString("yarnPath: " + berry + "\n")
		f.Close()
	}
	return dst
}

type managerRun struct {
	t    *testing.T
	root string
	env  []string
}

func (r managerRun) run(c Command) (string, error) {
	cmd := exec.Command(c.Argv[0], c.Argv[1:]...)
	cmd.Dir = filepath.Join(r.root, filepath.FromSlash(c.Dir))
	cmd.Env = r.env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

func (r managerRun) mustRun(c Command) string {
	r.t.Helper()
	out, err := r.run(c)
	if err != nil {
		r.t.Fatalf("`%s` in %q: %v\n%s", strings.Join(c.Argv, " "), c.Dir, err, out)
	}
	return out
}

// addDependency adds a registry dependency to the app's package.json that
// the lockfile does not have.
func addDependency(t *testing.T, pkgJSON string) {
	t.Helper()
	data, err := os.ReadFile(pkgJSON)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	deps, _ := doc["dependencies"].(map[string]any)
	if deps == nil {
		deps = map[string]any{}
		doc["dependencies"] = deps
	}
	deps["is-even"] = "1.0.0"
	data, _ = json.MarshalIndent(doc, "", "  ")
	if err := os.WriteFile(pkgJSON, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestInstallWithRealManagers decides each fixture with project.Detect (as
// expo-build does), runs the frozen install this file builds with the real
// manager, and proves the workspace package and the project's own Expo CLI
// resolve from the app; then that the frozen install fails once
// package.json and the lockfile disagree, while the post-prebuild
// re-install goes through.
func TestInstallWithRealManagers(t *testing.T) {
	const shared = "process.stdout.write(require('@fixture/shared'))"
	path, berry := managers(t)
	t.Setenv("PATH", path) // the commands' argv[0] is found in it
	cases := []struct {
		fixture, app string
		want         api.Project
		hook         string // a hook script the app defines
		hookAgent    string // the manager the hook must run with
		resolve      string // a script that requires what the app needs, and its output
		resolved     string
	}{
		{"yarn-workspace", "apps/mobile", api.Project{AppDir: "apps/mobile", PackageManager: "yarn", Lockfile: "yarn.lock", Workspace: true}, HookPreInstall, "npm/", shared, "shared works"},
		{"yarn-berry-workspace", "apps/mobile", api.Project{AppDir: "apps/mobile", PackageManager: "yarn", Lockfile: "yarn.lock", Workspace: true, YarnBerry: true}, "", "", shared, "shared works"},
		{"pnpm-workspace", "apps/mobile", api.Project{AppDir: "apps/mobile", PackageManager: "pnpm", Lockfile: "pnpm-lock.yaml", Workspace: true}, "", "", shared, "shared works"},
		{"npm-app", "", api.Project{PackageManager: "npm", Lockfile: "package-lock.json"}, HookPostInstall, "npm/",
			"process.stdout.write(String(require('is-odd')(3)))", "true"}, // a devDependency: --include=dev
	}
	for _, c := range cases {
		t.Run(c.fixture, func(t *testing.T) {
			cache := t.TempDir()
			env := append(os.Environ(), "CI=1",
				"YARN_CACHE_FOLDER="+filepath.Join(cache, "yarn"),
				"npm_config_store_dir="+filepath.Join(cache, "pnpm-store"),
				"npm_config_cache="+filepath.Join(cache, "npm"))
			root := copyFixture(t, c.fixture, berry)
			l, err := clproject.Detect(filepath.Join(root, filepath.FromSlash(c.app)), clproject.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if l.Project != c.want {
				t.Fatalf("Detect = %+v, want %+v", l.Project, c.want)
			}
			r := managerRun{t: t, root: l.WorkspaceRoot, env: env}
			if c.hook != "" {
				r.mustRun(ScriptCommand(l.Project, c.hook))
				agent, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(c.app), "hook-ran.txt"))
				if err != nil || !strings.HasPrefix(string(agent), c.hookAgent) {
					t.Fatalf("the %s hook ran with %q (%v), want %s…", c.hook, agent, err, c.hookAgent)
				}
			}
			for _, cmd := range InstallCommands(l.Project, true) {
				r.mustRun(cmd)
			}
			if out := r.mustRun(Command{Argv: []string{"node", "-e", c.resolve}, Dir: l.Project.AppDir}); out != c.resolved {
				t.Fatalf("%s printed %q in the app, want %q", c.resolve, out, c.resolved)
			}
			r.mustRun(PrebuildCommand(l.Project, "", "android"))
			args, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(c.app), "expo-args.txt"))
			if err != nil || string(args) != "prebuild --no-install --platform android\n" {
				t.Fatalf("the project's expo ran with %q (%v)", args, err)
			}

			// A package.json the lockfile does not match: frozen fails.
			// Yarn 1 checks only the root's package.json against yarn.lock
			// (a workspace's new dependency is installed and the lockfile
			// left stale, yarnpkg/yarn#5840), so that is where it is changed.
			changed := filepath.Join(root, filepath.FromSlash(c.app), "package.json")
			if c.want.PackageManager == api.PackageManagerYarn && !c.want.YarnBerry {
				changed = filepath.Join(root, "package.json")
			}
			addDependency(t, changed)
			install := InstallCommands(l.Project, true)
			if out, err := r.run(install[len(install)-1]); err == nil {
				t.Fatalf("the frozen install `%s` passed with package.json and the lockfile disagreeing:\n%s", strings.Join(install[len(install)-1].Argv, " "), out)
			}
			r.mustRun(ReinstallCommand(l.Project))
			r.mustRun(Command{Argv: []string{"node", "-e", "require('is-even')"}, Dir: l.Project.AppDir})
		})
	}
}
