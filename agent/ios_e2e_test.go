package agent_test

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/freeagent-build/freeagent/internal/provisioning/provisioningtest"
	"github.com/freeagent-build/freeagent/internal/standins/fakexcodebuild/fakexcodebuildtest"
)

// The eas.json of the iOS end-to-end project: an ad hoc build signed from
// credentials.json, and a simulator build.
const easIOSJSON = `{
  "build": {
    "preview": {"distribution": "internal", "credentialsSource": "local"},
    "simulator": {"ios": {"simulator": true}}
  }
}`

// TestExpoTeamIOSBuilds is an Expo team's iOS build, through the real parts
// on Linux: expo-build decides the build from the app's Xcode project (the
// app and its widget extension) and validates a two-entry credentials.json;
// the agent runs the build in a (fake Tart) VM whose freeagent-vm runs the
// production iOS pipeline against the strict stand-in xcodebuild, which
// fails as Xcode does on global signing settings with Pods targets, on a
// target without its own matching profile, and on an export whose method
// or profiles do not fit.
func TestExpoTeamIOSBuilds(t *testing.T) {
	f := newFarm(t, nil)
	pods, err := filepath.Abs("../vmbootstrap/testdata/ios-pods")
	if err != nil {
		t.Fatal(err)
	}
	xlog := f.iosGuest(t, "#!/bin/sh\necho \"Pod installation complete! (stand-in pod $*)\"\ncp -R '"+pods+"'/. .\n")
	// One HOME for the VMs, to see that no profile stays installed.
	home := t.TempDir()
	f.guestEnv(map[string]string{"HOME": home})
	f.startAgent()
	expoBuild := f.expoBuild(t)

	kit := provisioningtest.NewKit(t, "TEAM123456", "kit-p12-password", true, "com.example.myapp", "com.example.myapp.widget")
	dir := filepath.Join(t.TempDir(), "ios-app")
	copyTree(t, "../vmbootstrap/testdata/ios-app", dir)
	files := map[string][]byte{
		"eas.json": []byte(easIOSJSON),
		"credentials.json": []byte(`{"ios":{
  "MyApp":{"provisioningProfilePath":"certs/app.mobileprovision","distributionCertificate":{"path":"certs/dist.p12","password":"kit-p12-password"}},
  "MyAppWidget":{"provisioningProfilePath":"certs/widget.mobileprovision","distributionCertificate":{"path":"certs/dist.p12","password":"kit-p12-password"}}}}`),
		".gitignore":                   []byte("credentials.json\ncerts/\nnode_modules/\n"),
		"package-lock.json":            []byte(`{"name":"my-app","version":"1.0.0","lockfileVersion":3,"requires":true,"packages":{"":{"name":"my-app","version":"1.0.0"}}}`),
		"certs/dist.p12":               kit.P12,
		"certs/app.mobileprovision":    kit.Profiles["com.example.myapp"],
		"certs/widget.mobileprovision": kit.Profiles["com.example.myapp.widget"],
	}
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, body, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// The ad hoc build: an .ipa whose app and extension each carry their
	// own profile.
	out := t.TempDir()
	code, stdout, stderr := expoBuild("", "build", dir, "--platform", "ios", "--profile", "preview", "--non-interactive", "-o", out)
	if code != 0 {
		log := ""
		if m := buildIDPattern.FindStringSubmatch(stdout + stderr); m != nil {
			log = f.logs(m[1])
		}
		t.Fatalf("submit --profile preview: exit %d\n%s\n%s\n%s", code, stdout, stderr, log)
	}
	log := f.logs(buildID(t, stdout+stderr))
	ipa := filepath.Join(out, "MyApp.ipa")
	embedded := zipFiles(t, ipa, "Payload/MyApp.app/embedded.mobileprovision", "Payload/MyApp.app/PlugIns/MyAppWidget.appex/embedded.mobileprovision")
	if !bytes.Equal(embedded[0], kit.Profiles["com.example.myapp"]) || !bytes.Equal(embedded[1], kit.Profiles["com.example.myapp.widget"]) {
		t.Errorf("the .ipa's bundles do not each embed their own profile\n%s", log)
	}
	for _, want := range []string{
		`▸ target MyApp (com.example.myapp, Release): provisioning profile "com.example.myapp Ad Hoc" (ad-hoc, team TEAM123456)`,
		`▸ target MyAppWidget (com.example.myapp.widget, Release): provisioning profile "com.example.myapp.widget Ad Hoc" (ad-hoc, team TEAM123456)`,
		"** ARCHIVE SUCCEEDED **", "** EXPORT SUCCEEDED **", "▸ deleted the temporary keychain",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("the log lacks %q:\n%s", want, log)
		}
	}
	if strings.Contains(log, "kit-p12-password") {
		t.Error("the p12 password is in the build log")
	}
	calls := fakexcodebuildtest.Calls(t, xlog)
	if len(calls) != 2 || calls[0][1] != "archive" || calls[1][1] != "-exportArchive" {
		t.Fatalf("xcodebuild ran %q", calls)
	}
	for _, arg := range calls[0] {
		if strings.Contains(arg, "=") && !strings.HasPrefix(arg, "generic/platform=") {
			t.Errorf("the archive was given a global build setting %q", arg)
		}
	}
	if entries, _ := os.ReadDir(filepath.Join(home, "Library", "MobileDevice", "Provisioning Profiles")); len(entries) != 0 {
		t.Errorf("profiles left installed after the build: %v", entries)
	}

	// The simulator build: no credentials, the .app as a .tar.gz.
	out = t.TempDir()
	code, stdout, stderr = expoBuild("", "build", dir, "--platform", "ios", "--profile", "simulator", "--non-interactive", "-o", out)
	if code != 0 {
		t.Fatalf("build --profile simulator: exit %d\n%s\n%s", code, stdout, stderr)
	}
	names := tarGzNames(t, filepath.Join(out, "MyApp.app.tar.gz"))
	if !slices.Contains(names, "MyApp.app/Info.plist") || !slices.Contains(names, "MyApp.app/MyApp") {
		t.Errorf("the simulator archive holds %v", names)
	}
	if calls := fakexcodebuildtest.Calls(t, xlog); len(calls) != 3 || calls[2][1] != "build" || !slices.Contains(calls[2], "generic/platform=iOS Simulator") {
		t.Errorf("the simulator build ran %q", calls[len(calls)-1])
	}
}

// iosGuest gives the guest VMs the stand-in Xcode tools on PATH: the
// strict fake xcodebuild (logging its command lines to xlog), `security`
// answering as a keychain with one distribution identity, and `pod`: the
// given script, or the stand-in pod install (fakepod) when "". It
// returns xlog. Each VM has its own HOME, where profiles are installed.
func (f *farm) iosGuest(t *testing.T, podScript string) (xlog string) {
	t.Helper()
	agentBin, _ := binaries(t)
	tools := t.TempDir()
	links := map[string]string{"xcodebuild": "fakexcodebuild"}
	if podScript == "" {
		links["pod"] = "fakepod"
	} else {
		writeScript(t, filepath.Join(tools, "pod"), podScript)
	}
	for name, bin := range links {
		if err := os.Symlink(filepath.Join(filepath.Dir(agentBin), bin), filepath.Join(tools, name)); err != nil {
			t.Fatal(err)
		}
	}
	writeScript(t, filepath.Join(tools, "security"), `#!/bin/sh
case "$1" in
find-identity) printf '  1) 0123456789ABCDEF0123456789ABCDEF01234567 "Apple Distribution: Example Ltd (TEAM123456)"\n     1 valid identities found\n' ;;
list-keychains) [ "$#" -eq 3 ] && printf '    "/Users/admin/Library/Keychains/login.keychain-db"\n' ;;
esac
exit 0
`)
	xlog = filepath.Join(t.TempDir(), "xcodebuild.log")
	f.guestEnv(map[string]string{"PATH": tools + ":" + os.Getenv("PATH"), "FREEAGENT_SECURITY": filepath.Join(tools, "security"),
		"FAKE_XCODEBUILD_LOG": xlog})
	return xlog
}

func writeScript(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
}

// zipFiles reads the named entries of a zip.
func zipFiles(t *testing.T, path string, names ...string) [][]byte {
	t.Helper()
	zr, err := zip.OpenReader(path)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	out := make([][]byte, len(names))
	for i, name := range names {
		rc, err := zr.Open(name)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out[i], _ = io.ReadAll(rc)
		rc.Close()
	}
	return out
}

func tarGzNames(t *testing.T, path string) []string {
	t.Helper()
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	gz, err := gzip.NewReader(fh)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	tr := tar.NewReader(gz)
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
