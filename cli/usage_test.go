package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every mistake on the command line exits 2 (ExitUsage), whatever the
// command, whether the CLI or the controller (400/422) finds it, and
// without a stack of unrelated output: one line saying what is wrong.
func TestUsageErrorsExit2(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dir := project(t, map[string]string{})
	id := e.queueBuild(dir, "android")
	file := filepath.Join(t.TempDir(), "a-file")
	os.WriteFile(file, []byte("x"), 0o644)
	admin := map[string]string{"EXPO_CONTROLLER_API_KEY": e.adminKey}
	cases := []struct {
		vars map[string]string
		args []string
	}{
		{nil, []string{}},
		{nil, []string{"--json"}},
		{nil, []string{"frobnicate"}},
		{nil, []string{"build", "--no-wait", "--bogus"}},
		{nil, []string{"build", "--no-wait", dir, dir, "--platform", "android"}},
		{nil, []string{"build", "--no-wait", file, "--platform", "android"}},
		{nil, []string{"build", "--no-wait", filepath.Join(dir, "missing"), "--platform", "android"}},
		{nil, []string{"build", "--no-wait", dir, "--platform", "windows"}},
		{nil, []string{"build", "--no-wait", dir, "--platform", "android", "--priority", "high"}},
		{nil, []string{"build", "--no-wait", dir, "--platform", "android", "--build-timeout", "5s"}},
		{nil, []string{"build", "--no-wait", dir, "--platform", "android", "--build-timeout", "soon"}},
		{nil, []string{"build", dir, "--platform", "android", "--wait", "--no-wait"}},
		{nil, []string{"build", "--no-wait", dir, "--platform", "android", "-o", "out"}},
		{nil, []string{"build", "--no-wait", dir, "--platform", "android", "--profile", "nope"}},
		{nil, []string{"build", "--no-wait", dir, "--platform", "android", "--message", strings.Repeat("m", 1025)}},
		{nil, []string{"build", dir, "--platform", "android", "--local"}},
		{nil, []string{"build", dir, "--platform", "android", "--auto-submit-with-profile", "production"}},
		{nil, []string{"build", dir, "--platform", "android", "--build-logger-level", "loud"}},
		{nil, []string{"build", dir, "--platform", "android", "--no-wait", "-o", "out"}},
		{nil, []string{"build:list", "extra"}},
		{nil, []string{"build:list", "--limit", "0"}},
		{nil, []string{"build:list", "--offset", "-1"}},
		{nil, []string{"build:list", "--distribution", "adhoc"}},
		{nil, []string{"build:view", id, id}},
		{nil, []string{"build:cancel", id, "--profile", "production"}},
		{nil, []string{"build:download"}},
		{nil, []string{"build:download", "--build-id", id, "-p", "android"}},
		{nil, []string{"build:download", "--build-id", id, "--all-artifacts", "--artifact", "a.apk"}},
		{nil, []string{"status"}},
		{nil, []string{"status", id, id}},
		{nil, []string{"status", id, "--wacth"}},
		{nil, []string{"logs"}},
		{nil, []string{"logs", id, "--tail"}},
		{nil, []string{"download"}},
		{nil, []string{"download", id, "--output"}},
		{nil, []string{"list", "extra"}},
		{nil, []string{"list", "--limit", "0"}},
		{nil, []string{"list", "--limit", "many"}},
		{nil, []string{"list", "--status", "bogus"}},
		{nil, []string{"list", "--platform", "windows"}},
		{nil, []string{"list", "--cursor", "not-a-cursor"}},
		{nil, []string{"cancel"}},
		{nil, []string{"cancel", id, id}},
		{nil, []string{"retry"}},
		{nil, []string{"retry", id, "--p12"}},
		{nil, []string{"env"}},
		{nil, []string{"env", "frob"}},
		{nil, []string{"env", "set", "--project", "demo"}},
		{nil, []string{"env", "set", "1BAD", "--project", "demo", "--visibility", "plaintext"}},
		{nil, []string{"env", "set", "GOOD", "--project", "demo"}},
		{nil, []string{"env", "set", "GOOD", "--project", "demo", "--visibility", "public"}},
		{nil, []string{"env", "list", "NAME", "--project", "demo"}},
		{nil, []string{"credentials"}},
		{nil, []string{"credentials", "frob"}},
		{nil, []string{"credentials", "set", "--project", "demo"}},
		{admin, []string{"workers", "extra"}},
		{admin, []string{"workers", "--bogus"}},
		{nil, []string{"config", "extra"}},
		{nil, []string{"config", "--controller-url", "not a url"}},
		{nil, []string{"version", "extra"}},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			r := e.run(c.vars, c.args...)
			if r.code != ExitUsage {
				t.Errorf("want exit %d\n%s", ExitUsage, r)
			}
			if r.stderr == "" {
				t.Errorf("nothing on standard error says what is wrong\n%s", r)
			}
		})
	}
}
