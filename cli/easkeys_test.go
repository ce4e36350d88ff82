package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/internal/provisioning/provisioningtest"
)

// TestIOSLocalCredentialsWithCustomBuild: a project whose package.json has
// a freeagent:build script gets its credentials.json checked against the
// app's targets and delivered to the VM, as the default pipeline does;
// wrong credentials are refused before the upload.
func TestIOSLocalCredentialsWithCustomBuild(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	kit := provisioningtest.NewKit(t, "TEAM123456", "kit-p12-password", true, "com.example.myapp", "com.example.myapp.widget")
	creds := func(password string) string {
		return `{"ios":{
  "MyApp":{"provisioningProfilePath":"certs/app.mobileprovision","distributionCertificate":{"path":"certs/dist.p12","password":"` + password + `"}},
  "MyAppWidget":{"provisioningProfilePath":"certs/widget.mobileprovision","distributionCertificate":{"path":"certs/dist.p12","password":"` + password + `"}}}}`
	}
	files := func(password string) map[string]string {
		return map[string]string{
			"eas.json": iosEASJSON, "credentials.json": creds(password),
			"package.json":   `{"name":"demo","scripts":{"freeagent:build":"fastlane build"}}`,
			"certs/dist.p12": string(kit.P12), "certs/app.mobileprovision": string(kit.Profiles["com.example.myapp"]),
			"certs/widget.mobileprovision": string(kit.Profiles["com.example.myapp.widget"]),
		}
	}
	id := queuedID(t, e.mustRun(0, nil, "build", "--no-wait", iosApp(t, files("kit-p12-password")), "--platform", "ios", "--profile", "preview", "--json"))
	spec := e.storedSpec(t, id)
	if spec.Credentials.Source != api.CredentialsLocal || spec.Credentials.IOS == nil || len(spec.Credentials.IOS.Targets) != 2 {
		t.Fatalf("a custom build's credentials: %+v", spec.Credentials)
	}
	w := e.worker("ios")
	job, vm := w.claimAsVM(t, id)
	if vm.creds == nil || len(vm.creds.IOS) != 2 || string(vm.creds.IOS["MyApp"].Certificate) != string(kit.P12) {
		t.Fatalf("the VM of a custom build got credentials %+v", vm.creds)
	}
	if _, ok := vm.files["credentials.json"]; ok {
		t.Error("credentials.json is in the source archive")
	}
	w.finish(job, false, "", nil)

	p := e.proxy()
	r := e.run(map[string]string{"EXPO_CONTROLLER_URL": p.URL}, "build", "--no-wait", iosApp(t, files("wrong")), "--platform", "ios", "--profile", "preview")
	if r.code != ExitUsage || !strings.Contains(r.stderr, "credentials.json") || !strings.Contains(r.stderr, "password") {
		t.Errorf("a custom build with a wrong p12 password: want exit %d naming credentials.json\n%s", ExitUsage, r)
	}
	noSubmit(t, p, "wrong password")
}

// TestIOSWithoutCredentials: as eas-cli, an iOS device build of a profile
// with withoutCredentials resolves no credentials and is not refused for
// lacking them.
func TestIOSWithoutCredentials(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dir := iosApp(t, map[string]string{"eas.json": `{"build":{"production":{"withoutCredentials":true,"credentialsSource":"local"}}}`})
	spec := e.storedSpec(t, queuedID(t, e.mustRun(0, nil, "build", "--no-wait", dir, "--platform", "ios", "--json")))
	if spec.IOS == nil || spec.IOS.Simulator || spec.Credentials.IOS != nil || spec.Credentials.Source != api.CredentialsNone {
		t.Errorf("withoutCredentials: ios %+v, credentials %+v", spec.IOS, spec.Credentials)
	}
}

// TestRequireCommit: with cli.requireCommit, a git working tree with
// uncommitted or untracked files is refused before anything is sent,
// listing them, as eas-cli refuses it; a clean tree builds.
func TestRequireCommit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dir := project(t, map[string]string{"eas.json": `{"cli":{"requireCommit":true},"build":{"production":{}}}`})
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	p := e.proxy()
	r := e.run(map[string]string{"EXPO_CONTROLLER_URL": p.URL}, "build", "--no-wait", dir, "--platform", "android")
	if r.code != ExitUsage || !strings.Contains(r.stderr, "git repository") {
		t.Errorf("requireCommit outside git: want exit %d\n%s", ExitUsage, r)
	}
	git("init", "-q")
	git("add", "-A")
	git("commit", "-qm", "init")
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("untracked"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = e.run(map[string]string{"EXPO_CONTROLLER_URL": p.URL}, "build", "--no-wait", dir, "--platform", "android")
	if r.code != ExitUsage || !strings.Contains(r.stderr, "working tree is dirty") || !strings.Contains(r.stderr, "notes.txt") {
		t.Errorf("requireCommit with an untracked file: want exit %d naming it\n%s", ExitUsage, r)
	}
	noSubmit(t, p, "dirty tree")
	git("add", "-A")
	git("commit", "-qm", "notes")
	e.mustRun(0, nil, "build", "--no-wait", dir, "--platform", "android", "--json")
}
