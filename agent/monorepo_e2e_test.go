package agent_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/internal/testsupport/testtool"
)

// The workspace package the app requires, and the line the app's
// eas-build-post-install hook prints once it resolved it (and a registry
// dependency) from inside the VM. The hook's own command line, which yarn
// and pnpm echo, does not contain the line: only running it prints it.
const (
	sharedIndexJS    = "module.exports = 'shared works';\n"
	postInstallHook  = `node -e "console.log('MONOREPO_MARKER ' + require('@fixture/shared') + ' is-number=' + require('is-number')(5))"`
	postInstallPrint = "MONOREPO_MARKER shared works is-number=true"
)

// TestMonorepoWorkspaceBuilds is "a Yarn workspace and a pnpm
// workspace build from their roots with frozen installs", through the real
// parts: expo-build submits apps/mobile of a monorepo whose lockfile the
// real manager wrote; the spec says where the app is and which manager and
// lockfile decided it; the VM's freeagent-vm installs at the workspace root
// with the frozen command, the app resolves the workspace package, and the
// stand-in Gradle builds the .aab. Then package.json and the lockfile
// disagree and the same path fails in the install.
func TestMonorepoWorkspaceBuilds(t *testing.T) {
	testtool.Need(t, "node", "npm", "jar", "jarsigner", "apksigner", "zipalign")
	// yarn and pnpm are not part of the machine: the test installs the
	// versions it pins, and the agent (so the VM's build) finds them first.
	path := workspaceManagers(t) + string(os.PathListSeparator) + os.Getenv("PATH")
	t.Setenv("PATH", path) // the host's installs find them too
	cache := t.TempDir()
	hostEnv := append(os.Environ(), "CI=1",
		"YARN_CACHE_FOLDER="+filepath.Join(cache, "yarn"),
		"npm_config_store_dir="+filepath.Join(cache, "pnpm-store"),
		"npm_config_cache="+filepath.Join(cache, "npm"))

	f := newFarm(t, nil)
	f.startAgent("PATH=" + path)
	run := f.expoBuild(t)
	expoBuild := func(args ...string) (int, string) {
		code, stdout, stderr := run("", args...)
		return code, stdout + stderr
	}

	cases := []struct {
		manager  string
		lockfile string
		root     map[string]string // the workspace root's files
		shared   string            // the app's version range of @fixture/shared
		frozen   string            // the frozen install, as the build log shows it
		// breaks is the package.json (relative to the root) that gets a
		// dependency the lockfile lacks. Yarn 1 checks only the root's
		// against yarn.lock (a workspace's new dependency is installed
		// and the lockfile left stale, yarnpkg/yarn#5840).
		breaks    string
		outOfDate string // what the manager says about it
	}{
		{
			manager:  "yarn",
			lockfile: "yarn.lock",
			root: map[string]string{
				"package.json": `{"name":"monorepo","private":true,"workspaces":["apps/*","packages/*"]}`,
			},
			shared:    "1.0.0",
			frozen:    "yarn install --frozen-lockfile --production false",
			breaks:    "package.json",
			outOfDate: "Your lockfile needs to be updated",
		},
		{
			manager:  "pnpm",
			lockfile: "pnpm-lock.yaml",
			root: map[string]string{
				"package.json":        `{"name":"monorepo","private":true}`,
				"pnpm-workspace.yaml": "packages:\n  - apps/*\n  - packages/*\n",
			},
			shared:    "workspace:*",
			frozen:    "pnpm install --frozen-lockfile",
			breaks:    "apps/mobile/package.json",
			outOfDate: "ERR_PNPM_OUTDATED_LOCKFILE",
		},
	}
	for _, c := range cases {
		t.Run(c.manager, func(t *testing.T) {
			root := filepath.Join(t.TempDir(), c.manager+"-monorepo")
			app := filepath.Join(root, "apps", "mobile")
			copyTree(t, "../vmbootstrap/testdata/android-app", app)
			files := map[string]string{
				"packages/shared/package.json": `{"name":"@fixture/shared","version":"1.0.0","main":"index.js"}`,
				"packages/shared/index.js":     sharedIndexJS,
				"apps/mobile/app.json": `{"expo":{"name":"Mobile","slug":"mobile-` + c.manager + `","version":"1.0.0",` +
					`"android":{"package":"com.example.mobile` + c.manager + `","versionCode":1}}}`,
				"apps/mobile/eas.json": `{"build":{"production":{}}}`,
				"apps/mobile/package.json": mustJSON(t, map[string]any{
					"name": "mobile", "version": "1.0.0", "private": true, "main": "index.js",
					"scripts":      map[string]string{"eas-build-post-install": postInstallHook},
					"dependencies": map[string]string{"@fixture/shared": c.shared, "is-number": "7.0.0"},
				}),
			}
			for name, body := range c.root {
				files[name] = body
			}
			writeFiles(t, root, files)

			// The lockfile the real manager writes; the hook works on the
			// developer's machine; then nothing but the lockfile travels.
			inDir(t, root, hostEnv, c.manager, "install")
			if out := inDir(t, app, hostEnv, "node", "-e", "console.log(require('@fixture/shared'))"); strings.TrimSpace(out) != "shared works" {
				t.Fatalf("the workspace package does not resolve from the app on the host: %q", out)
			}
			if lock, err := os.ReadFile(filepath.Join(root, c.lockfile)); err != nil || !strings.Contains(string(lock), "is-number") {
				t.Fatalf("%s install wrote no %s locking is-number (%v):\n%s", c.manager, c.lockfile, err, lock)
			}
			removeNodeModules(t, root)

			out := t.TempDir()
			code, stdout := expoBuild("build", app, "--platform", "android", "--profile", "production", "--non-interactive", "-o", out)
			if code != 0 {
				t.Fatalf("build: exit %d\n%s", code, stdout)
			}
			id := buildID(t, stdout)
			log := buildLog(t, f, id)
			if _, err := os.Stat(filepath.Join(out, "app-release.aab")); err != nil {
				t.Fatalf("no app-release.aab downloaded: %v\n%s", err, log)
			}
			b, err := f.dev.GetBuild(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			want := api.Project{AppDir: "apps/mobile", PackageManager: c.manager, Lockfile: c.lockfile, Workspace: true}
			if b.Spec == nil || b.Spec.Project != want {
				t.Fatalf("spec project: %+v, want %+v", specProject(b.Spec), want)
			}
			// The frozen install ran at the workspace root (a command in
			// the app's directory is shown as `cd apps/mobile && …`), and
			// after it the hook in the app resolved the workspace package.
			install := logLineIndex(log, "▸ "+c.frozen)
			hook := logLineIndex(log, "▸ cd apps/mobile && "+c.manager+" run eas-build-post-install")
			marker := logLineIndex(log, postInstallPrint)
			if install < 0 || hook < 0 || marker < 0 || !(install < hook && hook < marker) {
				t.Fatalf("want `%s` at the root, then the post-install hook printing %q (lines %d, %d, %d):\n%s",
					c.frozen, postInstallPrint, install, hook, marker, log)
			}

			// package.json asks for what the lockfile lacks: the frozen
			// install fails the build, as it does on EAS.
			addRegistryDependency(t, filepath.Join(root, filepath.FromSlash(c.breaks)))
			code, stdout = expoBuild("build", app, "--platform", "android", "--profile", "production", "--non-interactive", "-o", t.TempDir())
			if code == 0 {
				t.Fatalf("a build whose lockfile is out of date succeeded:\n%s", stdout)
			}
			id = buildID(t, stdout)
			log = buildLog(t, f, id)
			b, err = f.dev.GetBuild(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			if b.Status != api.StatusFailed || b.ErrorMessage == nil || !strings.Contains(*b.ErrorMessage, c.frozen) || len(b.Artifacts) != 0 {
				t.Fatalf("want a failed build naming `%s`, no artifact; got %s %q %d artifact(s)\n%s", c.frozen, b.Status, deref(b.ErrorMessage), len(b.Artifacts), log)
			}
			// The project's fault: one attempt, not retried.
			if b.Attempts != 1 || deref(b.ErrorCode) != api.CodeBuildFailed {
				t.Fatalf("want one attempt ending %s, got %d attempt(s), code %s", api.CodeBuildFailed, b.Attempts, deref(b.ErrorCode))
			}
			if !strings.Contains(log, c.outOfDate) || strings.Contains(log, "eas-build-post-install") {
				t.Fatalf("want %s saying %q and nothing run after the install:\n%s", c.manager, c.outOfDate, log)
			}
		})
	}
}

// workspaceManagers installs Yarn 1 and pnpm with npm into a fresh prefix
// and returns the directory of their executables.
func workspaceManagers(t *testing.T) string {
	t.Helper()
	prefix := t.TempDir()
	args := []string{"install", "--prefix", prefix, "--no-audit", "--no-fund", "yarn@1.22.22", "pnpm@9.15.9"}
	if out, err := exec.Command("npm", args...).CombinedOutput(); err != nil {
		t.Fatalf("npm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return filepath.Join(prefix, "node_modules", ".bin")
}

// writeFiles writes files (slash-separated path under root → content),
// making their directories.
func writeFiles(t testing.TB, root string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func inDir(t testing.TB, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s in %s: %v\n%s", name, strings.Join(args, " "), dir, err, out)
	}
	return string(out)
}

// removeNodeModules deletes every node_modules under root, as a fresh
// clone has none.
func removeNodeModules(t testing.TB, root string) {
	t.Helper()
	var dirs []string
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() && d.Name() == "node_modules" {
			dirs = append(dirs, p)
			return filepath.SkipDir
		}
		return err
	})
	for _, d := range dirs {
		if err := os.RemoveAll(d); err != nil {
			t.Fatal(err)
		}
	}
}

// addRegistryDependency adds is-odd, which no lockfile here has, to a
// package.json.
func addRegistryDependency(t *testing.T, pkgJSON string) {
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
	deps["is-odd"] = "3.0.1"
	if err := os.WriteFile(pkgJSON, []byte(mustJSON(t, doc)), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b) + "\n"
}

// buildLog is the build's whole log (f.logs fails the farm's test, not
// the subtest's).
func buildLog(t *testing.T, f *farm, id string) string {
	t.Helper()
	c, err := f.dev.ReadLogs(context.Background(), id, 0)
	if err != nil {
		t.Fatal(err)
	}
	return string(c.Data)
}

// logLineIndex is the index of the first log line that is exactly line, or -1.
func logLineIndex(log, line string) int {
	for i, l := range strings.Split(log, "\n") {
		if strings.TrimRight(l, "\r") == line {
			return i
		}
	}
	return -1
}

func specProject(s *api.BuildSpec) any {
	if s == nil {
		return "no spec"
	}
	return s.Project
}
