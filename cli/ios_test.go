package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/internal/provisioning/provisioningtest"
)

// iosApp copies the fixture app (its own ios/ with MyApp embedding the
// MyAppWidget extension) and adds files.
func iosApp(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("../vmbootstrap/testdata/ios-app")); err != nil {
		t.Fatal(err)
	}
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const iosEASJSON = `{"build":{
  "preview":{"distribution":"internal","credentialsSource":"local"},
  "store":{"credentialsSource":"local"},
  "simulator":{"ios":{"simulator":true}},
  "device":{}
}}`

// TestIOSSubmit: the iOS build is decided from the Xcode project (scheme,
// its archive configuration, the application target and the extension
// it embeds, bundle ids with their variables resolved); a two-target
// credentials.json is validated for them and travels sealed, never in
// the archive; a simulator build needs none; bad credentials and a device
// build without any are refused before anything is uploaded.
func TestIOSSubmit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	kit := provisioningtest.NewKit(t, "TEAM123456", "kit-p12-password", true, "com.example.myapp", "com.example.myapp.widget")
	appStore := provisioningtest.NewKit(t, "TEAM123456", "kit-p12-password", false, "com.example.myapp", "com.example.myapp.widget")
	credsJSON := `{"ios":{
  "MyApp":{"provisioningProfilePath":"certs/app.mobileprovision","distributionCertificate":{"path":"certs/dist.p12","password":"kit-p12-password"}},
  "MyAppWidget":{"provisioningProfilePath":"certs/widget.mobileprovision","distributionCertificate":{"path":"certs/dist.p12","password":"kit-p12-password"}}}}`
	files := func(k provisioningtest.Kit, creds string) map[string]string {
		return map[string]string{
			"eas.json": iosEASJSON, "credentials.json": creds, ".gitignore": "node_modules/\n",
			"certs/dist.p12": string(k.P12), "certs/app.mobileprovision": string(k.Profiles["com.example.myapp"]),
			"certs/widget.mobileprovision": string(k.Profiles["com.example.myapp.widget"]),
		}
	}
	dir := iosApp(t, files(kit, credsJSON))
	r := e.mustRun(0, nil, "build", "--no-wait", dir, "--platform", "ios", "--profile", "preview", "--json")
	if strings.Contains(r.stdout+r.stderr, "kit-p12-password") {
		t.Errorf("submit printed the p12 password\n%s", r)
	}
	id := queuedID(t, r)
	spec := e.storedSpec(t, id)
	sameJSON(t, "ios build", spec.IOS, `{"scheme":"MyApp","build_configuration":"Release",
		"targets":[{"name":"MyApp","bundle_identifier":"com.example.myapp"},{"name":"MyAppWidget","bundle_identifier":"com.example.myapp.widget"}],
		"application_archive_paths":["ios/build/*.ipa"]}`)
	sig := spec.Credentials.IOS
	if spec.Credentials.Source != api.CredentialsLocal || sig == nil || sig.ExportMethod != api.ExportAdHoc || sig.TeamID != "TEAM123456" || len(sig.Targets) != 2 {
		t.Fatalf("credentials %+v", spec.Credentials)
	}
	for i, want := range []string{"MyApp", "MyAppWidget"} {
		if got := sig.Targets[i]; got.Target != want || got.CertificateSHA1 != kit.CertSHA1 || got.ProfileType != api.ExportAdHoc {
			t.Errorf("target %d: %+v (certificate %s)", i, got, kit.CertSHA1)
		}
	}
	w := e.worker("ios")
	job, vm := w.claimAsVM(t, id)
	if vm.creds == nil || len(vm.creds.IOS) != 2 {
		t.Fatalf("the VM's credentials: %+v", vm.creds)
	}
	want := map[string]api.IOSTargetCredentials{
		"MyApp":       {ProvisioningProfile: kit.Profiles["com.example.myapp"], Certificate: kit.P12, CertificatePassword: "kit-p12-password"},
		"MyAppWidget": {ProvisioningProfile: kit.Profiles["com.example.myapp.widget"], Certificate: kit.P12, CertificatePassword: "kit-p12-password"},
	}
	if !reflect.DeepEqual(vm.creds.IOS, want) {
		t.Error("the VM's iOS credentials are not the files credentials.json names")
	}
	for name, body := range vm.files {
		if name == "credentials.json" || (strings.HasPrefix(name, "certs/") && name != "certs/") || strings.Contains(body, "kit-p12-password") || bytes.Contains([]byte(body), kit.P12) {
			t.Errorf("%s left the machine in the source archive", name)
		}
	}
	if _, ok := vm.files["ios/MyApp.xcodeproj/project.pbxproj"]; !ok {
		t.Error("the Xcode project is not in the source archive")
	}
	w.finish(job, false, "", nil)

	// Without ios/ (a managed project) the same build is decided from the
	// app config: the sanitized name and the declared app extensions.
	managed := iosApp(t, files(kit, credsJSON))
	os.RemoveAll(filepath.Join(managed, "ios"))
	spec = e.storedSpec(t, queuedID(t, e.mustRun(0, nil, "build", "--no-wait", managed, "--platform", "ios", "--profile", "preview", "--json")))
	sameJSON(t, "managed ios build", spec.IOS, `{"scheme":"MyApp","build_configuration":"Release",
		"targets":[{"name":"MyApp","bundle_identifier":"com.example.myapp"},{"name":"MyAppWidget","bundle_identifier":"com.example.myapp.widget"}],
		"application_archive_paths":["ios/build/*.ipa"]}`)

	// The simulator profile: no credentials, the .app as artifact.
	spec = e.storedSpec(t, queuedID(t, e.mustRun(0, nil, "build", "--no-wait", dir, "--platform", "ios", "--profile", "simulator", "--json")))
	if spec.IOS == nil || !spec.IOS.Simulator || len(spec.IOS.Targets) != 0 || spec.Credentials.IOS != nil ||
		!reflect.DeepEqual(spec.IOS.ApplicationArchivePaths, []string{api.IOSSimulatorArchivePath}) {
		t.Errorf("simulator spec: %+v, credentials %+v", spec.IOS, spec.Credentials)
	}

	// Refused before upload: exit 2 naming the file, the target and the fix.
	before := e.buildCount(t)
	p := e.proxy()
	for _, c := range []struct {
		name, profile string
		files         map[string]string
		want          []string
	}{
		{"wrong p12 password", "preview", files(kit, strings.ReplaceAll(credsJSON, `"password":"kit-p12-password"}},
  "MyAppWidget"`, `"password":"wrong"}},
  "MyAppWidget"`)), []string{"credentials.json", "MyApp", "password"}},
		{"missing target", "preview", files(kit, `{"ios":{"MyApp":{"provisioningProfilePath":"certs/app.mobileprovision","distributionCertificate":{"path":"certs/dist.p12","password":"kit-p12-password"}}}}`),
			[]string{"credentials.json", "MyAppWidget"}},
		{"profiles swapped", "preview", files(kit, strings.NewReplacer("certs/app.mobileprovision", "certs/widget.mobileprovision", "certs/widget.mobileprovision", "certs/app.mobileprovision").Replace(credsJSON)),
			[]string{"credentials.json", "com.example.myapp"}},
		{"App Store profile for internal", "preview", files(appStore, credsJSON), []string{"credentials.json", "MyApp", "internal"}},
		{"device build without credentials", "device", map[string]string{"eas.json": iosEASJSON}, []string{"credentials.json", "simulator"}},
	} {
		r := e.run(map[string]string{"EXPO_CONTROLLER_URL": p.URL}, "build", "--no-wait", iosApp(t, c.files), "--platform", "ios", "--profile", c.profile)
		if r.code != ExitUsage {
			t.Errorf("%s: want exit %d\n%s", c.name, ExitUsage, r)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(r.stderr, w) {
				t.Errorf("%s: stderr lacks %q\n%s", c.name, w, r)
			}
		}
		noSubmit(t, p, c.name)
	}
	// --platform all: the iOS side's refusal comes before the Android
	// side is uploaded.
	withAndroid := iosApp(t, map[string]string{"eas.json": iosEASJSON,
		"app.json": `{"expo":{"name":"My App","slug":"my-app","android":{"package":"com.example.myapp"},"ios":{"bundleIdentifier":"com.example.myapp"}}}`})
	if r := e.run(map[string]string{"EXPO_CONTROLLER_URL": p.URL}, "build", "--no-wait", withAndroid, "--platform", "all", "--profile", "device"); r.code != ExitUsage || !strings.Contains(r.stderr, "credentials.json") {
		t.Errorf("--platform all without iOS signing: want exit %d naming credentials.json\n%s", ExitUsage, r)
	}
	noSubmit(t, p, "--platform all")
	if n := e.buildCount(t); n != before {
		t.Errorf("%d builds after the refused submits, want %d", n, before)
	}
}
