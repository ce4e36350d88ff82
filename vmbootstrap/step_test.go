package vmbootstrap

import (
	"archive/tar"
	"archive/zip"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/internal/plist"
	"github.com/freeagent-build/freeagent/internal/provisioning/provisioningtest"
	"github.com/freeagent-build/freeagent/internal/standins/fakexcodebuild/fakexcodebuildtest"
	"github.com/freeagent-build/freeagent/internal/testsupport/syncbuf"
	"github.com/freeagent-build/freeagent/internal/toolchain"
	"github.com/freeagent-build/freeagent/internal/xcode"
)

func testRunner(out *syncbuf.Buffer, grace time.Duration) *stepRunner {
	return &stepRunner{env: os.Environ(), out: out, grace: grace, drain: 300 * time.Millisecond}
}

func alive(pid int) bool {
	return syscall.Kill(pid, 0) == nil
}

func readPid(t *testing.T, path string) int {
	t.Helper()
	var pid int
	waitFor(t, 5*time.Second, "the pid file", func() bool {
		b, err := os.ReadFile(path)
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && pid > 0
	})
	return pid
}

// TestStepKilledWithItsGroup: a step that ignores SIGTERM, and its child
// that does too, are SIGKILLed together once the grace period passes.
func TestStepKilledWithItsGroup(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out := &syncbuf.Buffer{}
	r := testRunner(out, 300*time.Millisecond)
	ctx, cancel := context.WithCancelCause(context.Background())
	script := `trap "" TERM; (trap "" TERM; sleep 30; echo never) & echo $! > child.pid; echo started; wait; wait`
	done := make(chan error, 1)
	go func() { done <- r.run(ctx, Step{Argv: []string{"sh", "-c", script}, Dir: dir}) }()
	child := readPid(t, filepath.Join(dir, "child.pid"))
	waitFor(t, 5*time.Second, "the step's output", func() bool { return strings.Contains(out.String(), "started") })
	start := time.Now()
	cause := errors.New("test cancel")
	cancel(cause)
	var err error
	select {
	case err = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the step was not stopped")
	}
	if !errors.Is(err, cause) {
		t.Fatalf("error %v does not wrap the cause", err)
	}
	if d := time.Since(start); d < 250*time.Millisecond || d > 3*time.Second {
		t.Fatalf("stopped after %s; want the 300 ms grace then SIGKILL", d)
	}
	waitFor(t, 3*time.Second, "the step's child to die", func() bool { return !alive(child) })
}

// TestStepTerminatedGracefully: SIGTERM reaches the step, which may clean
// up and exit before the grace period ends.
func TestStepTerminatedGracefully(t *testing.T) {
	t.Parallel()
	out := &syncbuf.Buffer{}
	r := testRunner(out, 10*time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- r.run(ctx, Step{Argv: []string{"sh", "-c", `trap 'echo got TERM; exit 0' TERM; echo ready; sleep 30 & wait`}, Dir: t.TempDir()})
	}()
	waitFor(t, 5*time.Second, "the step to start", func() bool { return strings.Contains(out.String(), "ready") })
	start := time.Now()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("error %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("not stopped")
	}
	if time.Since(start) > 3*time.Second || !strings.Contains(out.String(), "got TERM") {
		t.Fatalf("after %s, output %q", time.Since(start), out.String())
	}
}

func TestStepFailureAndOutputOrder(t *testing.T) {
	t.Parallel()
	out := &syncbuf.Buffer{}
	err := testRunner(out, time.Second).run(context.Background(), Step{Argv: []string{"sh", "-c", "echo one; echo two >&2; echo three; exit 3"}, Dir: t.TempDir()})
	var se *StepError
	if !errors.As(err, &se) || se.Code != 3 || !strings.Contains(se.Error(), "exit status 3") {
		t.Fatalf("error %#v", err)
	}
	if !strings.Contains(out.String(), "▸ sh -c 'echo one; echo two >&2; echo three; exit 3'\none\ntwo\nthree\n") {
		t.Fatalf("output %q", out.String())
	}
}

// TestStepLeftoverProcess: a step that exits leaving a background process
// holding its output does not hang the build, and the leftover is killed.
func TestStepLeftoverProcess(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out := &syncbuf.Buffer{}
	start := time.Now()
	err := testRunner(out, time.Second).run(context.Background(), Step{Argv: []string{"sh", "-c", "sleep 30 & echo $! > bg.pid; echo done"}, Dir: dir})
	if err != nil || time.Since(start) > 3*time.Second {
		t.Fatalf("err %v after %s", err, time.Since(start))
	}
	bg := readPid(t, filepath.Join(dir, "bg.pid"))
	waitFor(t, 3*time.Second, "the leftover to die", func() bool { return !alive(bg) })
}

func TestStepToolMissing(t *testing.T) {
	t.Parallel()
	err := testRunner(&syncbuf.Buffer{}, time.Second).run(context.Background(), Step{Argv: []string{"no-such-tool-freeagent"}, Dir: t.TempDir()})
	var tm *ToolMissingError
	if !errors.As(err, &tm) {
		t.Fatalf("error %v", err)
	}
}

// fakeTools writes shell stand-ins for npm, npx, pod and xcodebuild into a
// directory and returns an environment with it first on PATH.
func fakeTools(t *testing.T) []string {
	t.Helper()
	bin := t.TempDir()
	iosTemplate, _ := filepath.Abs("testdata/ios-app/ios")
	podsTemplate, _ := filepath.Abs("testdata/ios-pods")
	tools := map[string]string{
		"npm": `echo "fake npm $*"`,
		"npx": `echo "fake npx $*"
[ "$2" = prebuild ] || exit 0
platform=
while [ $# -gt 0 ]; do [ "$1" = --platform ] && platform=$2; shift; done
case "$platform" in
android)
	mkdir -p android
	# No x bit: archives made on Windows lose it; the bootstrap sets it.
	cat > android/gradlew <<'EOF'
#!/bin/sh
echo "gradle $* platform=$FREEAGENT_PLATFORM profile=$FREEAGENT_PROFILE ci=$CI"
mkdir -p app/build/outputs/bundle/release
echo AAB > app/build/outputs/bundle/release/app-release.aab
echo not-an-aab > app/build/outputs/bundle/release/output-metadata.json
EOF
	;;
ios)
	cp -R "` + iosTemplate + `" ios
	;;
esac`,
		"pod": `echo "fake pod $* in $(basename "$PWD")"
cp -R "` + podsTemplate + `"/. .`,
	}
	for name, body := range tools {
		writeExecutable(t, filepath.Join(bin, name), "#!/bin/sh\n"+body+"\n")
	}
	// xcodebuild is the strict stand-in: it reads the installed profiles
	// from $HOME and records its command lines.
	home := t.TempDir()
	return mergeEnv(os.Environ(), "PATH="+bin+string(filepath.ListSeparator)+xcodebuildDir(t)+string(filepath.ListSeparator)+os.Getenv("PATH"),
		"HOME="+home, "FAKE_XCODEBUILD_LOG="+filepath.Join(home, "xcodebuild.log"),
		"FREEAGENT_PLATFORM=test", "FREEAGENT_PROFILE=production", "CI=1")
}

type fakeKeychain struct{ path string }

func (k fakeKeychain) Path() string                                       { return k.path }
func (fakeKeychain) Create(context.Context, string) error                 { return nil }
func (fakeKeychain) Import(context.Context, []byte, string, string) error { return nil }
func (fakeKeychain) AddToSearchList(context.Context) error                { return nil }
func (fakeKeychain) SigningIdentity(context.Context) (string, error)      { return fakeIdentity, nil }
func (fakeKeychain) Delete(context.Context) error                         { return nil }

func newTestPipeline(t *testing.T, platform string, files map[string]string, sign *signing) (*pipeline, *syncbuf.Buffer, *[]string) {
	t.Helper()
	root := t.TempDir()
	for name, body := range files {
		os.MkdirAll(filepath.Dir(filepath.Join(root, name)), 0o755)
		if err := os.WriteFile(filepath.Join(root, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := &syncbuf.Buffer{}
	var phases []string
	work := t.TempDir()
	p := &pipeline{tree: root, root: root, workDir: work, artifactsDir: filepath.Join(work, "artifacts"), spec: defaultSpec(platform, "production", root), signing: sign,
		runner: &stepRunner{env: fakeTools(t), out: out, grace: time.Second, drain: time.Second},
		phase:  func(phase string, _ int, _ string) { phases = append(phases, phase) }}
	os.MkdirAll(p.artifactsDir, 0o755)
	return p, out, &phases
}

func assertInOrder(t *testing.T, text string, parts ...string) {
	t.Helper()
	at := 0
	for _, p := range parts {
		i := strings.Index(text[at:], p)
		if i < 0 {
			t.Fatalf("%q missing (or out of order) in:\n%s", p, text)
		}
		at += i + len(p)
	}
}

// TestDefaultAndroidPipeline runs npm ci → expo prebuild → gradlew with
// stand-in tools and collects the APK.
func TestDefaultAndroidPipeline(t *testing.T) {
	t.Parallel()
	p, out, phases := newTestPipeline(t, api.PlatformAndroid, map[string]string{
		"package.json": `{"name":"app","scripts":{"build":"nope"}}`, "package-lock.json": "{}", "app.json": "{}"}, nil)
	arts, err := p.run(context.Background())
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(arts) != 1 || arts[0] != filepath.Join(p.root, "android/app/build/outputs/bundle/release/app-release.aab") {
		t.Fatalf("artifacts %v", arts)
	}
	assertInOrder(t, out.String(),
		"▸ npm ci --include=dev\n", "fake npm ci --include=dev\n",
		"▸ npx expo prebuild --no-install --platform android\n", "fake npx expo prebuild --no-install --platform android\n",
		"▸ npm install --include=dev\n",
		"▸ cd android && ./gradlew :app:bundleRelease\n", "gradle :app:bundleRelease platform=test profile=production ci=1\n")
	if strings.Join(*phases, ",") != "install,prebuild,build" {
		t.Fatalf("phases %v", *phases)
	}
}

// installIOSSigning installs the fixture app's two targets' credentials
// (each its own ad hoc profile, one distribution certificate) where the
// pipeline's xcodebuild looks, as the bootstrap does.
func installIOSSigning(t *testing.T, p *pipeline, kit provisioningtest.Kit, profiles map[string]string) {
	t.Helper()
	creds := map[string]api.IOSTargetCredentials{}
	for target, bundle := range profiles {
		creds[target] = api.IOSTargetCredentials{ProvisioningProfile: kit.Profiles[bundle], Certificate: kit.P12, CertificatePassword: kit.Password}
	}
	s, _, err := installSigning(context.Background(), fakeKeychain{"/tmp/k.keychain-db"}, materialFromCredentials(creds), toolchain.EnvValue(p.runner.env, "HOME"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	p.signing = s
}

var fixtureTargets = []api.IOSTarget{{Name: "MyApp", BundleID: "com.example.myapp"}, {Name: "MyAppWidget", BundleID: "com.example.myapp.widget"}}

// TestDefaultIOSPipeline: npm install (no lockfile) → expo prebuild → pod
// install → per-target signing in the Xcode project → xcodebuild archive
// with no global signing settings → -exportArchive mapping both targets,
// against the strict stand-in xcodebuild (which fails on global signing
// settings with Pods targets, and on a profile that does not fit).
func TestDefaultIOSPipeline(t *testing.T) {
	t.Parallel()
	kit := provisioningtest.NewKit(t, "TEAM123456", "p12-pass", true, "com.example.myapp", "com.example.myapp.widget")
	p, out, _ := newTestPipeline(t, api.PlatformIOS, map[string]string{"package.json": `{}`, "app.json": "{}"}, nil)
	installIOSSigning(t, p, kit, map[string]string{"MyApp": "com.example.myapp", "MyAppWidget": "com.example.myapp.widget"})
	p.spec.IOS = &api.IOSBuild{Scheme: "MyApp", BuildConfiguration: "Release", ApplicationArchivePaths: []string{api.IOSArchivePath}, Targets: fixtureTargets}
	arts, err := p.run(context.Background())
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(arts) != 1 || arts[0] != filepath.Join(p.root, "ios", "build", "MyApp.ipa") {
		t.Fatalf("artifacts %v", arts)
	}
	archive := filepath.Join(p.workDir, "MyApp.xcarchive")
	options := filepath.Join(p.workDir, "ExportOptions.plist")
	assertInOrder(t, out.String(),
		"▸ npm install --include=dev\n",
		"▸ npx expo prebuild --no-install --platform ios\n",
		"▸ cd ios && pod install\n", "fake pod install in ios\n",
		"▸ target MyApp (com.example.myapp, Release): provisioning profile \"com.example.myapp Ad Hoc\" (ad-hoc, team TEAM123456)\n",
		"▸ target MyAppWidget (com.example.myapp.widget, Release): provisioning profile \"com.example.myapp.widget Ad Hoc\" (ad-hoc, team TEAM123456)\n",
		"** ARCHIVE SUCCEEDED **", "** EXPORT SUCCEEDED **")
	want := [][]string{
		{"xcodebuild", "archive", "-workspace", filepath.Join(p.root, "ios", "MyApp.xcworkspace"), "-scheme", "MyApp", "-configuration", "Release",
			"-destination", "generic/platform=iOS", "-archivePath", archive},
		{"xcodebuild", "-exportArchive", "-archivePath", archive, "-exportPath", filepath.Join(p.root, "ios", "build"), "-exportOptionsPlist", options},
	}
	if calls := fakexcodebuildtest.Calls(t, toolchain.EnvValue(p.runner.env, "FAKE_XCODEBUILD_LOG")); !reflect.DeepEqual(calls, want) {
		t.Fatalf("xcodebuild ran\n%q\nwant\n%q", calls, want)
	}
	// Each target carries its own profile, for Release only.
	proj, err := xcode.LoadProject(filepath.Join(p.root, "ios", "MyApp.xcodeproj"))
	if err != nil {
		t.Fatal(err)
	}
	for target, bundle := range map[string]string{"MyApp": "com.example.myapp", "MyAppWidget": "com.example.myapp.widget"} {
		set, err := proj.BuildSettings(target, "Release")
		if err != nil {
			t.Fatal(err)
		}
		if set["CODE_SIGN_STYLE"] != "Manual" || set["PROVISIONING_PROFILE_SPECIFIER"] != bundle+" Ad Hoc" || set["DEVELOPMENT_TEAM"] != "TEAM123456" || set["CODE_SIGN_IDENTITY"] != "iPhone Distribution" {
			t.Errorf("%s Release: %v", target, set)
		}
		if debug, _ := proj.BuildSettings(target, "Debug"); debug["PROVISIONING_PROFILE_SPECIFIER"] != "" {
			t.Errorf("%s Debug was given a profile: %v", target, debug)
		}
	}
	b, _ := os.ReadFile(options)
	m, err := plist.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	opts := m.(map[string]any)
	profiles := map[string]any{}
	for _, ip := range p.signing.profiles {
		profiles[ip.profile.BundleID] = ip.profile.UUID
	}
	if opts["method"] != api.ExportAdHoc || opts["teamID"] != "TEAM123456" || len(profiles) != 2 || !reflect.DeepEqual(opts["provisioningProfiles"], profiles) {
		t.Fatalf("ExportOptions.plist:\n%s", b)
	}
	// The .ipa holds the app and its extension, each with its own profile.
	names := zipNames(t, arts[0])
	for _, want := range []string{"Payload/MyApp.app/embedded.mobileprovision", "Payload/MyApp.app/PlugIns/MyAppWidget.appex/embedded.mobileprovision"} {
		if !slices.Contains(names, want) {
			t.Errorf("the .ipa lacks %s: %v", want, names)
		}
	}

	// Without credentials a device build cannot sign: a clear error.
	p2, _, _ := newTestPipeline(t, api.PlatformIOS, map[string]string{"package.json": `{}`}, nil)
	if _, err := p2.run(context.Background()); !errors.Is(err, errConfig) || !strings.Contains(err.Error(), "credentials.json") {
		t.Fatalf("iOS without credentials: %v", err)
	}
}

// TestIOSGlobalSigningFailsLikeXcode: what the old pipeline did, global
// signing settings on the command line, fails with Xcode's error for the
// Pods targets; the check that the pipeline no longer does it is worth
// only as much as the stand-in's strictness.
func TestIOSGlobalSigningFailsLikeXcode(t *testing.T) {
	t.Parallel()
	p, out, _ := newTestPipeline(t, api.PlatformIOS, map[string]string{"package.json": `{}`}, nil)
	ios := filepath.Join(p.root, "ios")
	for _, s := range []Step{p.step(p.root, "npx", "expo", "prebuild", "--platform", "ios"), p.step(ios, "pod", "install")} {
		if err := p.runner.run(context.Background(), s); err != nil {
			t.Fatal(err)
		}
	}
	err := p.runner.run(context.Background(), p.step(ios, "xcodebuild", "archive", "-workspace", filepath.Join(ios, "MyApp.xcworkspace"), "-scheme", "MyApp",
		"-configuration", "Release", "-destination", "generic/platform=iOS", "-archivePath", filepath.Join(p.workDir, "a.xcarchive"),
		"CODE_SIGN_STYLE=Manual", "PROVISIONING_PROFILE_SPECIFIER=9F2B3C4D-1111-2222-3333-444455556666"))
	var se *StepError
	if !errors.As(err, &se) || se.Code != 65 || !strings.Contains(out.String(), "does not support provisioning profiles") {
		t.Fatalf("error %v\n%s", err, out)
	}
}

// TestIOSPipelineProfileMismatch: a target whose bundle identifier its
// profile does not cover fails before xcodebuild runs, naming both.
func TestIOSPipelineProfileMismatch(t *testing.T) {
	t.Parallel()
	kit := provisioningtest.NewKit(t, "TEAM123456", "p12-pass", true, "com.example.myapp", "com.example.other")
	p, _, _ := newTestPipeline(t, api.PlatformIOS, map[string]string{"package.json": `{}`}, nil)
	installIOSSigning(t, p, kit, map[string]string{"MyApp": "com.example.myapp", "MyAppWidget": "com.example.other"})
	p.spec.IOS = &api.IOSBuild{Scheme: "MyApp", BuildConfiguration: "Release", ApplicationArchivePaths: []string{api.IOSArchivePath}, Targets: fixtureTargets}
	_, err := p.run(context.Background())
	if !errors.Is(err, errConfig) || !strings.Contains(err.Error(), `target "MyAppWidget" has bundle identifier com.example.myapp.widget`) || !strings.Contains(err.Error(), "com.example.other") {
		t.Fatalf("error %v", err)
	}
	if _, err := os.Stat(toolchain.EnvValue(p.runner.env, "FAKE_XCODEBUILD_LOG")); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("xcodebuild ran")
	}
}

// TestIOSCertsZipFitsTargetsByBundleID: a build without a spec (raw API)
// or with --p12/--certs brings a certs zip whose profiles are not named
// for targets; each target gets the one for its bundle identifier, read
// from the scheme's application target and its embedded extension.
func TestIOSCertsZipFitsTargetsByBundleID(t *testing.T) {
	t.Parallel()
	kit := provisioningtest.NewKit(t, "TEAM123456", "p12-pass", true, "com.example.myapp.widget", "com.example.myapp")
	p, out, _ := newTestPipeline(t, api.PlatformIOS, map[string]string{"package.json": `{}`}, nil)
	s, _, err := installSigning(context.Background(), fakeKeychain{"/tmp/k.keychain-db"}, materialFromCerts(api.CertsResponse{P12: kit.P12, P12Password: kit.Password,
		ProvisioningProfiles: [][]byte{kit.Profiles["com.example.myapp.widget"], kit.Profiles["com.example.myapp"]}}), toolchain.EnvValue(p.runner.env, "HOME"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	p.signing = s
	if _, err := p.run(context.Background()); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	assertInOrder(t, out.String(), "▸ target MyApp (com.example.myapp, Release): provisioning profile \"com.example.myapp Ad Hoc\"",
		"▸ target MyAppWidget (com.example.myapp.widget, Release): provisioning profile \"com.example.myapp.widget Ad Hoc\"", "** EXPORT SUCCEEDED **")
}

// TestIOSSimulatorPipeline: a simulator build needs no credentials and
// yields the .app packed as .tar.gz.
func TestIOSSimulatorPipeline(t *testing.T) {
	t.Parallel()
	p, out, _ := newTestPipeline(t, api.PlatformIOS, map[string]string{"package.json": `{}`}, nil)
	p.spec.IOS = &api.IOSBuild{Scheme: "MyApp", BuildConfiguration: "Release", Simulator: true, ApplicationArchivePaths: []string{api.IOSSimulatorArchivePath}}
	arts, err := p.run(context.Background())
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	want := [][]string{{"xcodebuild", "build", "-workspace", filepath.Join(p.root, "ios", "MyApp.xcworkspace"), "-scheme", "MyApp", "-configuration", "Release",
		"-destination", "generic/platform=iOS Simulator", "-derivedDataPath", filepath.Join(p.root, "ios", "build")}}
	if calls := fakexcodebuildtest.Calls(t, toolchain.EnvValue(p.runner.env, "FAKE_XCODEBUILD_LOG")); !reflect.DeepEqual(calls, want) {
		t.Fatalf("xcodebuild ran %q", calls)
	}
	if len(arts) != 1 || filepath.Base(arts[0]) != "MyApp.app.tar.gz" {
		t.Fatalf("artifacts %v", arts)
	}
	names := tarNames(t, arts[0])
	if !slices.Contains(names, "MyApp.app/") || !slices.Contains(names, "MyApp.app/Info.plist") || !slices.Contains(names, "MyApp.app/MyApp") {
		t.Fatalf("the archive holds %v", names)
	}
}

// TestCustomScriptArtifacts: only regular, visible files directly in
// FREEAGENT_ARTIFACTS_DIR are artifacts; none at all is an error.
func TestCustomScriptArtifacts(t *testing.T) {
	t.Parallel()
	p, _, _ := newTestPipeline(t, api.PlatformAndroid, map[string]string{"package.json": `{"scripts":{"freeagent:build":"x"}}`}, nil)
	if _, err := p.run(context.Background()); !errors.Is(err, ErrNoArtifacts) {
		t.Fatalf("no artifacts: %v", err)
	}
	os.WriteFile(filepath.Join(p.artifactsDir, "b.apk"), []byte("b"), 0o644)
	os.WriteFile(filepath.Join(p.artifactsDir, "a.aab"), []byte("a"), 0o644)
	os.WriteFile(filepath.Join(p.artifactsDir, ".DS_Store"), []byte("x"), 0o644)
	os.Mkdir(filepath.Join(p.artifactsDir, "sub"), 0o755)
	os.Symlink("/etc/passwd", filepath.Join(p.artifactsDir, "passwd"))
	arts, err := p.run(context.Background())
	if err != nil || len(arts) != 2 || filepath.Base(arts[0]) != "a.aab" || filepath.Base(arts[1]) != "b.apk" {
		t.Fatalf("artifacts %v %v", arts, err)
	}
}

// tarNames lists the entries of a .tar.gz.
func tarNames(t *testing.T, file string) []string {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return names
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
	}
}

// zipNames lists the entries of a zip (an .ipa).
func zipNames(t *testing.T, file string) []string {
	t.Helper()
	zr, err := zip.OpenReader(file)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	var names []string
	for _, f := range zr.File {
		names = append(names, f.Name)
	}
	return names
}

// TestUnreadableArtifactIsNotASigningMismatch: an .aab the signature
// check cannot read is the build's fault (build_failed), not a signing
// mismatch naming certificates it never saw.
func TestUnreadableArtifactIsNotASigningMismatch(t *testing.T) {
	t.Parallel()
	p, out, _ := newTestPipeline(t, api.PlatformAndroid, map[string]string{"package.json": `{}`, "package-lock.json": "{}"}, nil)
	p.keystore = &api.AndroidKeystore{Keystore: []byte("KS"), KeystorePassword: "a", KeyAlias: "upload", KeyPassword: "b"}
	p.spec.Credentials = api.CredentialsInfo{Source: api.CredentialsLocal, Android: &api.KeystoreInfo{Type: "JKS", KeyAlias: "upload", CertificateSHA256: strings.Repeat("ab", 32)}}
	_, err := p.run(context.Background())
	if !errors.Is(err, errConfig) || errors.As(err, new(*SigningMismatchError)) || !strings.Contains(err.Error(), "app-release.aab") {
		t.Fatalf("error %v\n%s", err, out)
	}
}

// TestEmptyCustomScriptIsNoCustomBuild: an empty "freeagent:build" is no
// custom build, as expo-build decides (it resolved the default build).
func TestEmptyCustomScriptIsNoCustomBuild(t *testing.T) {
	t.Parallel()
	p, out, _ := newTestPipeline(t, api.PlatformAndroid, map[string]string{"package.json": `{"scripts":{"freeagent:build":""}}`, "package-lock.json": "{}"}, nil)
	if _, err := p.run(context.Background()); err != nil || !strings.Contains(out.String(), "./gradlew :app:bundleRelease") {
		t.Fatalf("err %v\n%s", err, out)
	}
}

// TestWorkflowDecidesPrebuild: the spec's workflow, decided on the
// developer's side, decides whether expo prebuild runs: a managed app
// gets it even when the archive holds part of android/ (what its ignore
// rules let through), a bare one keeps its own. A spec that does not say
// (an older CLI's, a raw submit's) is bare when the archive holds the
// native directory.
func TestWorkflowDecidesPrebuild(t *testing.T) {
	t.Parallel()
	files := map[string]string{"package.json": `{"name":"app"}`, "package-lock.json": "{}", "app.json": "{}",
		"android/gradlew": "#!/bin/sh\necho \"own gradle $*\"\nmkdir -p app/build/outputs/apk/release\necho APK > app/build/outputs/apk/release/app-release.apk\n"}
	for _, tc := range []struct {
		workflow, want string
	}{
		{api.WorkflowManaged, "fake npx expo prebuild --no-install --platform android\n"},
		{api.WorkflowGeneric, "▸ a bare app (its own android/ directory): skipping expo prebuild\n"},
	} {
		p, out, _ := newTestPipeline(t, api.PlatformAndroid, files, nil)
		p.spec.Workflow = tc.workflow
		if _, err := p.run(context.Background()); err != nil {
			t.Fatalf("%s: %v\n%s", tc.workflow, err, out)
		}
		if !strings.Contains(out.String(), tc.want) {
			t.Errorf("%s: the log lacks %q:\n%s", tc.workflow, tc.want, out)
		}
	}
	root := t.TempDir()
	if w := defaultSpec(api.PlatformAndroid, "production", root).Workflow; w != api.WorkflowManaged {
		t.Errorf("an archive without android/: %q, want managed", w)
	}
	os.Mkdir(filepath.Join(root, "android"), 0o755)
	if w := defaultSpec(api.PlatformAndroid, "production", root).Workflow; w != api.WorkflowGeneric {
		t.Errorf("an archive with android/: %q, want generic", w)
	}
}
