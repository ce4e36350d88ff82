package main

import (
	"archive/zip"
	"bufio"
	"bytes"
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/internal/plist"
	"github.com/freeagent-build/freeagent/internal/provisioning/provisioningtest"
	"github.com/freeagent-build/freeagent/internal/xcode"
)

var (
	fakeBin      string
	launchctlBin string // the stand-in launchctl (internal/standins/fakelaunchctl)
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "fakexcodebuild")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fakeBin = filepath.Join(dir, "xcodebuild")
	launchctlBin = filepath.Join(dir, "launchctl")
	for out, pkg := range map[string]string{fakeBin: ".", launchctlBin: "../fakelaunchctl"} {
		if log, err := exec.Command("go", "build", "-o", out, pkg).CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "building the stand-ins: %v\n%s", err, log)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

const team = "ABCDE12345"

// env is a project laid out as `expo prebuild` + `pod install` leave it,
// with a home directory for installed profiles.
type env struct {
	home, ios, workspace, project, log string
}

const podsProject = `// !$*UTF8*$!
{
	archiveVersion = 1;
	objectVersion = 56;
	objects = {
		AAAAAAAAAAAAAAAAAAAAAAA1 /* Pods-Shop */ = {
			isa = PBXNativeTarget;
			buildConfigurationList = AAAAAAAAAAAAAAAAAAAAAAA3;
			dependencies = (
			);
			name = "Pods-Shop";
			productType = "com.apple.product-type.library.static";
		};
		AAAAAAAAAAAAAAAAAAAAAAA2 /* React-Core */ = {
			isa = PBXNativeTarget;
			buildConfigurationList = AAAAAAAAAAAAAAAAAAAAAAA3;
			dependencies = (
			);
			name = "React-Core";
			productType = "com.apple.product-type.library.static";
		};
		AAAAAAAAAAAAAAAAAAAAAAA0 /* Project object */ = {
			isa = PBXProject;
			targets = (
				AAAAAAAAAAAAAAAAAAAAAAA1,
				AAAAAAAAAAAAAAAAAAAAAAA2,
			);
		};
	};
	rootObject = AAAAAAAAAAAAAAAAAAAAAAA0 /* Project object */;
}
`

const scheme = `<?xml version="1.0" encoding="UTF-8"?>
<Scheme LastUpgradeVersion = "1500" version = "1.7">
   <BuildAction parallelizeBuildables = "YES" buildImplicitDependencies = "YES">
      <BuildActionEntries>
         <BuildActionEntry buildForTesting = "YES" buildForRunning = "YES" buildForProfiling = "YES" buildForArchiving = "YES" buildForAnalyzing = "YES">
            <BuildableReference BuildableIdentifier = "primary" BlueprintIdentifier = "13B07F861A680F5B00A75B9A" BuildableName = "Shop.app" BlueprintName = "Shop" ReferencedContainer = "container:Shop.xcodeproj">
            </BuildableReference>
         </BuildActionEntry>
      </BuildActionEntries>
   </BuildAction>
   <ArchiveAction buildConfiguration = "Release" revealArchiveInOrganizer = "YES">
   </ArchiveAction>
</Scheme>
`

func newEnv(t *testing.T) env {
	t.Helper()
	root := t.TempDir()
	e := env{home: filepath.Join(root, "home"), ios: filepath.Join(root, "ios"), log: filepath.Join(root, "xcodebuild.jsonl")}
	e.workspace = filepath.Join(e.ios, "Shop.xcworkspace")
	e.project = filepath.Join(e.ios, "Shop.xcodeproj")
	files := map[string]string{
		filepath.Join(e.workspace, "contents.xcworkspacedata"): `<?xml version="1.0" encoding="UTF-8"?>
<Workspace
   version = "1.0">
   <FileRef
      location = "group:Shop.xcodeproj">
   </FileRef>
   <FileRef
      location = "group:Pods/Pods.xcodeproj">
   </FileRef>
</Workspace>
`,
		filepath.Join(e.project, "xcshareddata", "xcschemes", "Shop.xcscheme"): scheme,
		filepath.Join(e.ios, "Pods", "Pods.xcodeproj", "project.pbxproj"):      podsProject,
	}
	fixture, err := os.ReadFile(filepath.Join("..", "..", "xcode", "testdata", "app-with-extensions.pbxproj"))
	if err != nil {
		t.Fatal(err)
	}
	files[filepath.Join(e.project, "project.pbxproj")] = string(fixture)
	for path, text := range files {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(e.home, "Library", "MobileDevice", "Provisioning Profiles"), 0o755); err != nil {
		t.Fatal(err)
	}
	return e
}

// teamCerts are the team's distribution and development certificates,
// made once per test binary.
var teamCerts struct {
	sync.Once
	dist, dev []byte
}

func certificates(t *testing.T) (dist, dev []byte) {
	t.Helper()
	teamCerts.Do(func() {
		now := time.Now()
		ca := provisioningtest.NewECIdentity(t, pkix.Name{CommonName: "Test Apple WWDR CA"}, now.AddDate(-1, 0, 0), now.AddDate(5, 0, 0), nil)
		teamCerts.dist = provisioningtest.NewECIdentity(t, pkix.Name{CommonName: "Apple Distribution: Example (" + team + ")"}, now.Add(-time.Hour), now.AddDate(1, 0, 0), &ca).DER
		teamCerts.dev = provisioningtest.NewECIdentity(t, pkix.Name{CommonName: "Apple Development: Dev (" + team + ")"}, now.Add(-time.Hour), now.AddDate(1, 0, 0), &ca).DER
	})
	return teamCerts.dist, teamCerts.dev
}

// installProfile writes a .mobileprovision (the profile's plist in a CMS
// envelope as Apple lays it out) listing the team's development
// certificate when getTaskAllow, its distribution certificate otherwise.
func (e env) installProfile(t *testing.T, name, uuid, appID string, devices []string, allDevices, getTaskAllow bool) {
	t.Helper()
	dist, dev := certificates(t)
	cert := dist
	if getTaskAllow {
		cert = dev
	}
	e.installProfileWith(t, name, uuid, appID, devices, allDevices, getTaskAllow, [][]byte{cert})
}

func (e env) installProfileWith(t *testing.T, name, uuid, appID string, devices []string, allDevices, getTaskAllow bool, certs [][]byte) {
	t.Helper()
	p := provisioningtest.Profile{UUID: uuid, Name: name, TeamID: team, TeamName: "Example", AppID: team + "." + appID, Certificates: certs,
		Created: time.Now().Add(-time.Hour), Expires: time.Now().AddDate(1, 0, 0), Devices: devices, AllDevices: allDevices, GetTaskAllow: getTaskAllow}
	blob := provisioningtest.WrapBER(p.Plist(), 1<<20)
	if err := os.WriteFile(filepath.Join(e.home, "Library", "MobileDevice", "Provisioning Profiles", uuid+".mobileprovision"), blob, 0o644); err != nil {
		t.Fatal(err)
	}
}

var shopTargets = map[string]string{
	"Shop":                "com.example.shop",
	"NotificationService": "com.example.shop.NotificationService",
	"ShopWidget":          "com.example.shop.ShopWidget",
	"ShopWidgetIntents":   "com.example.shop.ShopWidget.intents",
}

// installStoreProfiles installs one App Store profile per target, named
// "<Target> Store".
func (e env) installStoreProfiles(t *testing.T) {
	i := 0
	for target, id := range shopTargets {
		i++
		e.installProfile(t, target+" Store", fmt.Sprintf("00000000-0000-0000-0000-00000000000%d", i), id, nil, false, false)
	}
}

// sign sets manual signing on the targets with internal/xcode, as the
// pipeline does.
func (e env) sign(t *testing.T, profiles map[string]string) {
	t.Helper()
	p, err := xcode.LoadProject(e.project)
	if err != nil {
		t.Fatal(err)
	}
	for target, profile := range profiles {
		if err := p.SetManualSigning(target, "Release", xcode.Signing{TeamID: team, ProfileName: profile}); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Save(e.project); err != nil {
		t.Fatal(err)
	}
}

func (e env) run(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return e.runVia(t, nil, args...)
}

// runVia runs the stand-in xcodebuild through the command prefix (nil:
// directly).
func (e env) runVia(t *testing.T, prefix []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	argv := append(append(slices.Clone(prefix), fakeBin), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "HOME="+e.home, "FAKE_XCODEBUILD_LOG="+e.log)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		code = exit.ExitCode()
	default:
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

func (e env) archive(t *testing.T, extra ...string) (string, string, int, string) {
	path := filepath.Join(filepath.Dir(e.ios), "build", "Shop.xcarchive")
	args := append([]string{"archive", "-workspace", e.workspace, "-scheme", "Shop", "-configuration", "Release", "-destination", "generic/platform=iOS", "-archivePath", path}, extra...)
	out, errs, code := e.run(t, args...)
	return out, errs, code, path
}

func allSigned() map[string]string {
	m := map[string]string{}
	for target := range shopTargets {
		m[target] = target + " Store"
	}
	return m
}

func TestGlobalSigningSettingsFailOnPodTargets(t *testing.T) {
	e := newEnv(t)
	e.installStoreProfiles(t)
	out, errs, code, _ := e.archive(t, "CODE_SIGN_STYLE=Manual", "PROVISIONING_PROFILE_SPECIFIER=Shop Store", "DEVELOPMENT_TEAM="+team)
	if code != 65 || !strings.Contains(out, "** ARCHIVE FAILED **") {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	want := `error: Pods-Shop does not support provisioning profiles, but provisioning profile Shop Store has been manually specified. Set the provisioning profile value to "Automatic" in the build settings editor. (in target 'Pods-Shop' from project 'Pods')`
	if !strings.Contains(errs, want) || !strings.Contains(errs, "(in target 'React-Core' from project 'Pods')") {
		t.Fatalf("stderr:\n%s", errs)
	}
}

func TestArchiveWithoutSigningFails(t *testing.T) {
	e := newEnv(t)
	e.installStoreProfiles(t)
	_, errs, code, path := e.archive(t)
	if code != 65 || !strings.Contains(errs, "error: No profiles for 'com.example.shop' were found: Xcode couldn't find any iOS App Development provisioning profiles matching 'com.example.shop'.") {
		t.Fatalf("exit %d\n%s", code, errs)
	}
	if _, err := os.Stat(path); err == nil {
		t.Fatal("a failed archive left an archive")
	}
}

func TestArchiveWithAnUnsignedExtensionFails(t *testing.T) {
	e := newEnv(t)
	e.installStoreProfiles(t)
	signing := allSigned()
	delete(signing, "ShopWidgetIntents")
	e.sign(t, signing)
	_, errs, code, _ := e.archive(t)
	if code != 65 || !strings.Contains(errs, "'com.example.shop.ShopWidget.intents'") || strings.Contains(errs, "'com.example.shop'") {
		t.Fatalf("exit %d\n%s", code, errs)
	}
}

func TestArchiveWithAMissingProfileFails(t *testing.T) {
	e := newEnv(t)
	e.installStoreProfiles(t)
	signing := allSigned()
	signing["NotificationService"] = "Not Installed"
	e.sign(t, signing)
	_, errs, code, _ := e.archive(t)
	want := "error: No profile for team 'ABCDE12345' matching 'Not Installed' found: Xcode couldn't find any provisioning profiles matching 'ABCDE12345/Not Installed'. Install the profile (by dragging and dropping it onto Xcode's dock item) or select a different one in the Signing & Capabilities tab of the target editor. (in target 'NotificationService' from project 'Shop')"
	if code != 65 || !strings.Contains(errs, want) {
		t.Fatalf("exit %d\n%s", code, errs)
	}
}

func TestArchiveWithAnotherAppsProfileFails(t *testing.T) {
	e := newEnv(t)
	e.installStoreProfiles(t)
	signing := allSigned()
	signing["ShopWidget"] = "Shop Store" // the app's profile on the widget
	e.sign(t, signing)
	_, errs, code, _ := e.archive(t)
	want := `error: Provisioning profile "Shop Store" has app ID "com.example.shop", which does not match the bundle ID "com.example.shop.ShopWidget". (in target 'ShopWidget' from project 'Shop')`
	if code != 65 || !strings.Contains(errs, want) {
		t.Fatalf("exit %d\n%s", code, errs)
	}
}

// TestArchiveWithoutItsSigningCertificateFails: the identity must be one
// the profile includes: a distribution identity for a development
// profile, or a profile listing no certificate of that class, fails as
// Xcode fails (it finds no such identity with a private key).
func TestArchiveWithoutItsSigningCertificateFails(t *testing.T) {
	e := newEnv(t)
	e.installStoreProfiles(t)
	_, dev := certificates(t)
	e.installProfileWith(t, "Shop Lists A Development Certificate", "33333333-0000-0000-0000-000000000000", "com.example.shop", nil, false, false, [][]byte{dev})
	signing := allSigned()
	signing["Shop"] = "Shop Lists A Development Certificate"
	e.sign(t, signing)
	_, errs, code, _ := e.archive(t)
	want := `error: No signing certificate "iOS Distribution" found: No "iOS Distribution" signing certificate matching team ID "ABCDE12345" with a private key was found. (in target 'Shop' from project 'Shop')`
	if code != 65 || !strings.Contains(errs, want) {
		t.Fatalf("exit %d\n%s", code, errs)
	}
	// A certificate named by its common name must be in the profile.
	e.sign(t, allSigned())
	p, err := xcode.LoadProject(e.project)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.SetManualSigning("NotificationService", "Release", xcode.Signing{TeamID: team, ProfileName: "NotificationService Store", Identity: "Apple Distribution: Someone Else (ZZZZZ99999)"}); err != nil {
		t.Fatal(err)
	}
	p.Save(e.project)
	_, errs, code, _ = e.archive(t)
	want = `error: Provisioning profile "NotificationService Store" doesn't include signing certificate "Apple Distribution: Someone Else (ZZZZZ99999)". (in target 'NotificationService' from project 'Shop')`
	if code != 65 || !strings.Contains(errs, want) {
		t.Fatalf("exit %d\n%s", code, errs)
	}
}

func TestArchiveWithAWildcardProfile(t *testing.T) {
	e := newEnv(t)
	e.installStoreProfiles(t)
	e.installProfile(t, "Wildcard", "11111111-0000-0000-0000-000000000000", "com.example.shop.*", nil, false, false)
	signing := allSigned()
	signing["ShopWidget"] = "11111111-0000-0000-0000-000000000000" // by UUID
	e.sign(t, signing)
	if out, errs, code, _ := e.archive(t); code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	signing["Shop"] = "Wildcard" // com.example.shop.* does not cover com.example.shop
	e.sign(t, signing)
	if _, errs, code, _ := e.archive(t); code != 65 || !strings.Contains(errs, `has app ID "com.example.shop.*"`) {
		t.Fatalf("exit %d\n%s", code, errs)
	}
}

func readPlist(t *testing.T, data []byte, v any) {
	t.Helper()
	if _, err := plist.Unmarshal(data, v); err != nil {
		t.Fatal(err)
	}
}

func TestArchiveAndExport(t *testing.T) {
	e := newEnv(t)
	e.installStoreProfiles(t)
	e.installProfile(t, "Shop AdHoc", "22222222-0000-0000-0000-000000000000", "com.example.shop", []string{"00008030-001A"}, false, false)
	e.sign(t, allSigned())
	out, errs, code, archivePath := e.archive(t)
	if code != 0 || !strings.Contains(out, "** ARCHIVE SUCCEEDED **") {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	var info struct {
		ApplicationProperties struct {
			ApplicationPath, CFBundleIdentifier, SigningIdentity, Team string
		}
	}
	data, err := os.ReadFile(filepath.Join(archivePath, "Info.plist"))
	if err != nil {
		t.Fatal(err)
	}
	readPlist(t, data, &info)
	if ap := info.ApplicationProperties; ap.ApplicationPath != "Applications/Shop.app" || ap.CFBundleIdentifier != "com.example.shop" || ap.Team != team || ap.SigningIdentity != "iPhone Distribution" {
		t.Fatalf("archive Info.plist: %+v", ap)
	}
	app := filepath.Join(archivePath, "Products", "Applications", "Shop.app")
	for _, p := range []string{"Info.plist", "embedded.mobileprovision", "PlugIns/NotificationService.appex/embedded.mobileprovision", "PlugIns/ShopWidget.appex/Info.plist", "PlugIns/ShopWidgetIntents.appex/Info.plist", "../../../dSYMs"} {
		if _, err := os.Stat(filepath.Join(app, p)); err != nil {
			t.Errorf("archive: %v", err)
		}
	}
	if _, err := os.Stat(filepath.Join(app, "PlugIns", "ShopKit.appex")); err == nil {
		t.Error("the framework was archived as an extension")
	}

	options := func(method string, profiles map[string]string) string {
		data, err := plist.Marshal(map[string]any{"method": method, "teamID": team, "signingStyle": "manual", "provisioningProfiles": profiles})
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "ExportOptions.plist")
		os.WriteFile(path, data, 0o644)
		return path
	}
	storeProfiles := map[string]string{}
	for target, id := range shopTargets {
		storeProfiles[id] = target + " Store"
	}
	export := func(opts string) (string, string, int, string) {
		dir := filepath.Join(t.TempDir(), "export")
		out, errs, code := e.run(t, "-exportArchive", "-archivePath", archivePath, "-exportPath", dir, "-exportOptionsPlist", opts)
		return out, errs, code, dir
	}

	// A bundle id without a profile.
	partial := map[string]string{}
	for k, v := range storeProfiles {
		partial[k] = v
	}
	delete(partial, "com.example.shop.ShopWidget")
	out, errs, code, _ = export(options("app-store", partial))
	if code != 70 || !strings.Contains(errs, "error: exportArchive: No profiles for 'com.example.shop.ShopWidget' were found") || !strings.Contains(out, "** EXPORT FAILED **") {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	// Store profiles for an ad hoc export.
	out, errs, code, _ = export(options("ad-hoc", storeProfiles))
	if code != 70 || !strings.Contains(errs, `error: exportArchive: Provisioning profile "Shop Store" is not an "iOS Ad Hoc" profile.`) {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	// The export profile of the app is re-embedded.
	out, errs, code, dir := export(options("app-store", storeProfiles))
	if code != 0 || !strings.Contains(out, "** EXPORT SUCCEEDED **") {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	for _, name := range []string{"ExportOptions.plist", "DistributionSummary.plist", "Packaging.log"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Error(err)
		}
	}
	zr, err := zip.OpenReader(filepath.Join(dir, "Shop.ipa"))
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	names := map[string]bool{}
	for _, f := range zr.File {
		names[f.Name] = true
	}
	for _, want := range []string{"Payload/Shop.app/Info.plist", "Payload/Shop.app/Shop", "Payload/Shop.app/embedded.mobileprovision", "Payload/Shop.app/PlugIns/ShopWidgetIntents.appex/embedded.mobileprovision"} {
		if !names[want] {
			t.Errorf("the ipa has no %s (it has %v)", want, names)
		}
	}
}

func TestSimulatorBuild(t *testing.T) {
	e := newEnv(t)
	derived := filepath.Join(t.TempDir(), "derived")
	for _, dest := range [][]string{{"-destination", "generic/platform=iOS Simulator"}, {"-sdk", "iphonesimulator"}} {
		args := append([]string{"build", "-workspace", e.workspace, "-scheme", "Shop", "-configuration", "Debug", "-derivedDataPath", derived}, dest...)
		out, errs, code := e.run(t, args...)
		if code != 0 || !strings.Contains(out, "** BUILD SUCCEEDED **") {
			t.Fatalf("exit %d\n%s%s", code, out, errs)
		}
		data, err := os.ReadFile(filepath.Join(derived, "Build", "Products", "Debug-iphonesimulator", "Shop.app", "Info.plist"))
		if err != nil {
			t.Fatal(err)
		}
		var info struct{ CFBundleIdentifier string }
		readPlist(t, data, &info)
		if info.CFBundleIdentifier != "com.example.shop.debug" {
			t.Fatalf("CFBundleIdentifier = %q", info.CFBundleIdentifier)
		}
	}
}

func TestBadCommandLinesAndTheLog(t *testing.T) {
	e := newEnv(t)
	_, errs, code := e.run(t, "archive", "-x")
	if code != 64 || errs != "xcodebuild: error: invalid option '-x'\n" {
		t.Fatalf("exit %d: %q", code, errs)
	}
	_, errs, code = e.run(t, "frobnicate")
	if code != 64 || !strings.Contains(errs, "Unknown build action 'frobnicate'") {
		t.Fatalf("exit %d: %q", code, errs)
	}
	_, errs, code = e.run(t, "archive", "-workspace", e.workspace, "-scheme", "Nope", "-destination", "generic/platform=iOS", "-archivePath", filepath.Join(t.TempDir(), "a.xcarchive"))
	if code != 65 || !strings.Contains(errs, `does not contain a scheme named "Nope"`) {
		t.Fatalf("exit %d: %q", code, errs)
	}
	f, err := os.Open(e.log)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines [][]string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var argv []string
		if err := json.Unmarshal(sc.Bytes(), &argv); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, argv)
	}
	if len(lines) != 3 || strings.Join(lines[0], " ") != "xcodebuild archive -x" || lines[2][5] != "Nope" {
		t.Fatalf("log: %q", lines)
	}
}

// addScriptPhase gives the Shop target a run script phase (after its
// other phases) whose output path is $(DERIVED_FILE_DIR)/phase-result.txt.
func (e env) addScriptPhase(t *testing.T, name, script string) {
	t.Helper()
	path := filepath.Join(e.project, "project.pbxproj")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const id = "FA11FA11FA11FA11FA11FA11"
	text := strings.Replace(string(b), "\t\t\t\tF60718293041526374859607 /* Embed Frameworks */,\n", "\t\t\t\tF60718293041526374859607 /* Embed Frameworks */,\n\t\t\t\t"+id+",\n", 1)
	phase := fmt.Sprintf("\t\t%s = {isa = PBXShellScriptBuildPhase; buildActionMask = 2147483647; files = (); inputPaths = (\"$(SRCROOT)/.xcode.env\"); name = %q; outputPaths = (\"$(DERIVED_FILE_DIR)/phase-result.txt\"); runOnlyForDeploymentPostprocessing = 0; shellPath = /bin/sh; shellScript = %q; };\n", id, name, script)
	text = strings.Replace(text, "/* End PBXNativeTarget section */", phase+"/* End PBXNativeTarget section */", 1)
	if text == string(b) || !strings.Contains(text, id+",") {
		t.Fatal("the fixture changed: cannot add a script phase to Shop")
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestScriptPhasesRunAsXcodeRunsThem: a target's run script phase runs
// with bash (macOS's /bin/sh) from the project's directory, with the
// build settings Xcode gives it (its xcconfig's among them) and its
// output path's directory made; what it writes into the bundle is in the
// archive and the .ipa; the Info.plist's references are expanded, the
// command line's settings winning.
func TestScriptPhasesRunAsXcodeRunsThem(t *testing.T) {
	e := newEnv(t)
	e.installStoreProfiles(t)
	e.sign(t, allSigned())
	e.addScriptPhase(t, "Bundle JS", `[[ -n "$SRCROOT" ]] || exit 9
echo "phase ran in $PWD"
printf '%s\n' "$CONFIGURATION" "$PRODUCT_NAME" "$PODS_ROOT" "$SCRIPT_INPUT_FILE_0" "$SCRIPT_OUTPUT_FILE_0" > "$CONFIGURATION_BUILD_DIR/$UNLOCALIZED_RESOURCES_FOLDER_PATH/main.jsbundle"
echo ok > "$SCRIPT_OUTPUT_FILE_0"`)
	files := map[string]string{
		"Pods/Target Support Files/Pods-Shop/Pods-Shop.release.xcconfig": "PODS_ROOT = ${SRCROOT}/Pods // as CocoaPods writes it\n#include? \"absent.xcconfig\"\n",
		"Shop/Info.plist": `<?xml version="1.0" encoding="UTF-8"?>
<plist version="1.0"><dict>
<key>CFBundleIdentifier</key><string>$(PRODUCT_BUNDLE_IDENTIFIER)</string>
<key>CFBundleShortVersionString</key><string>$(MARKETING_VERSION)</string>
<key>CFBundleVersion</key><string>$(CURRENT_PROJECT_VERSION)</string>
</dict></plist>`,
	}
	for name, body := range files {
		p := filepath.Join(e.ios, filepath.FromSlash(name))
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p, err := xcode.LoadProject(e.project)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := p.SetBaseConfiguration("Shop", "Release", "Pods/Target Support Files/Pods-Shop/Pods-Shop.release.xcconfig"); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if err := p.Save(e.project); err != nil {
		t.Fatal(err)
	}

	out, errs, code, archivePath := e.archive(t, "MARKETING_VERSION=2.3.4", "CURRENT_PROJECT_VERSION=42")
	if code != 0 || !strings.Contains(out, "** ARCHIVE SUCCEEDED **") {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	if !strings.Contains(out, "PhaseScriptExecution Bundle\\ JS ") || !strings.Contains(out, "phase ran in "+e.ios+"\n") {
		t.Errorf("the phase's run is not in the output:\n%s", out)
	}
	app := filepath.Join(archivePath, "Products", "Applications", "Shop.app")
	got, err := os.ReadFile(filepath.Join(app, "main.jsbundle"))
	if err != nil {
		t.Fatalf("the phase's output is not in the archived app: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(got)), "\n")
	if len(lines) != 5 || lines[0] != "Release" || lines[1] != "Shop" || lines[2] != filepath.Join(e.ios, "Pods") ||
		lines[3] != filepath.Join(e.ios, ".xcode.env") || !strings.HasSuffix(lines[4], "/Shop.build/DerivedSources/phase-result.txt") {
		t.Errorf("the phase saw CONFIGURATION, PRODUCT_NAME, PODS_ROOT, SCRIPT_INPUT_FILE_0, SCRIPT_OUTPUT_FILE_0 = %q", lines)
	}
	var info struct{ CFBundleIdentifier, CFBundleShortVersionString, CFBundleVersion string }
	data, _ := os.ReadFile(filepath.Join(app, "Info.plist"))
	readPlist(t, data, &info)
	if info.CFBundleIdentifier != "com.example.shop" || info.CFBundleShortVersionString != "2.3.4" || info.CFBundleVersion != "42" {
		t.Errorf("the app's Info.plist: %+v", info)
	}
	var archived struct {
		ApplicationProperties struct{ CFBundleShortVersionString, CFBundleVersion string }
	}
	data, _ = os.ReadFile(filepath.Join(archivePath, "Info.plist"))
	readPlist(t, data, &archived)
	if ap := archived.ApplicationProperties; ap.CFBundleShortVersionString != "2.3.4" || ap.CFBundleVersion != "42" {
		t.Errorf("the archive's Info.plist: %+v", ap)
	}
}

// TestAFailingScriptPhaseFailsTheArchive: a phase's nonzero exit fails
// the archive as Xcode does: its output, ** ARCHIVE FAILED **, the
// phase under "The following build commands failed:", exit 65, and no
// archive.
func TestAFailingScriptPhaseFailsTheArchive(t *testing.T) {
	e := newEnv(t)
	e.installStoreProfiles(t)
	e.sign(t, allSigned())
	e.addScriptPhase(t, "Bundle JS", "echo 'SyntaxError: src/app/index.tsx: Unexpected token (3:7)'\nexit 3")
	out, errs, code, archivePath := e.archive(t)
	if code != 65 {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	for _, want := range []string{"SyntaxError: src/app/index.tsx: Unexpected token (3:7)\n", "** ARCHIVE FAILED **", "The following build commands failed:\n\tPhaseScriptExecution Bundle\\ JS "} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(errs, "error: Command PhaseScriptExecution failed with a nonzero exit code") {
		t.Errorf("stderr:\n%s", errs)
	}
	if _, err := os.Stat(archivePath); err == nil {
		t.Error("a failed archive left an .xcarchive")
	}
}

// addAssetCatalog gives the Shop target a Copy Bundle Resources phase
// holding its asset catalog, as every app target Xcode or `expo prebuild`
// makes has.
func (e env) addAssetCatalog(t *testing.T) {
	t.Helper()
	path := filepath.Join(e.project, "project.pbxproj")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const id = "FA22FA22FA22FA22FA22FA22"
	text := strings.Replace(string(b), "\t\t\t\tF60718293041526374859607 /* Embed Frameworks */,\n", "\t\t\t\tF60718293041526374859607 /* Embed Frameworks */,\n\t\t\t\t"+id+" /* Resources */,\n", 1)
	phase := "\t\t" + id + " /* Resources */ = {isa = PBXResourcesBuildPhase; buildActionMask = 2147483647; files = (13B07FBF1A68108700A75B9A /* Images.xcassets in Resources */); runOnlyForDeploymentPostprocessing = 0; };\n"
	text = strings.Replace(text, "/* End PBXNativeTarget section */", phase+"/* End PBXNativeTarget section */", 1)
	if text == string(b) || !strings.Contains(text, id+" /* Resources */,") {
		t.Fatal("the fixture changed: cannot add a resources phase to Shop")
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestAssetCatalogsNeedTheirUsersSession: actool reaches
// CoreSimulatorService through its launchd session, so an archive run
// with `sudo -u` inside another user's session fails as the real one
// does (the build user's steps before they entered its own session);
// in its own user's session, or where no session is modelled, it builds.
func TestAssetCatalogsNeedTheirUsersSession(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("launchctl asuser needs root, as on macOS")
	}
	e := newEnv(t)
	e.installStoreProfiles(t)
	e.sign(t, allSigned())
	e.addAssetCatalog(t)
	archive := func(prefix ...string) (string, string, int) {
		path := filepath.Join(t.TempDir(), "Shop.xcarchive")
		return e.runVia(t, prefix, "archive", "-workspace", e.workspace, "-scheme", "Shop", "-configuration", "Release",
			"-destination", "generic/platform=iOS", "-archivePath", path)
	}

	out, errs, code := archive(launchctlBin, "asuser", "4242")
	if code != 65 {
		t.Fatalf("in another user's session: exit %d, want 65\n%s%s", code, out, errs)
	}
	for _, want := range []string{"Images.xcassets: error: Failed to find a suitable device for the type IBSimDeviceTypeiPad2x",
		"Failed to subscribe to notifications from CoreSimulatorService.", "** ARCHIVE FAILED **",
		"The following build commands failed:\n\tCompileAssetCatalog "} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(errs, "error: Command CompileAssetCatalog failed with a nonzero exit code") {
		t.Errorf("stderr:\n%s", errs)
	}

	for _, prefix := range [][]string{{launchctlBin, "asuser", strconv.Itoa(os.Getuid())}, nil} {
		if out, errs, code := archive(prefix...); code != 0 || !strings.Contains(out, "CompileAssetCatalog ") {
			t.Fatalf("through %q: exit %d\n%s%s", prefix, code, out, errs)
		}
	}
}
