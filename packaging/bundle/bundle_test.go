package bundle

import (
	"debug/macho"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/freeagent-build/freeagent/internal/plist"
)

func TestVersions(t *testing.T) {
	for _, c := range []struct{ in, short, build string }{
		{"v1.4.0", "1.4.0", "1.4.0"},
		{"v1.4.0-3-g1a2b3c4", "1.4.0", "1.4.0.3"},
		{"v1.4.0-3-g1a2b3c4-dirty", "1.4.0", "1.4.0.3"},
		{"v2.1", "2.1.0", "2.1.0"},
		{"1.02.3", "1.2.3", "1.2.3"},
		{"v1.5.0-rc.1-7-gdeadbee", "1.5.0", "1.5.0.7"},
		{"1a2b3c4", "0.0.0", "0.0.0"},
		{"1234567", "0.0.0", "0.0.0"}, // an all-digit commit hash
		{"1234567-dirty", "0.0.0", "0.0.0"},
		{"", "0.0.0", "0.0.0"},
		{"release-candidate", "0.0.0", "0.0.0"},
	} {
		if s, b := Versions(c.in); s != c.short || b != c.build {
			t.Errorf("Versions(%q) = %q, %q; want %q, %q", c.in, s, b, c.short, c.build)
		}
	}
}

func TestInfoPlist(t *testing.T) {
	b, err := NewInfo("v1.4.0-3-g1a2b3c4").Render()
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if format, err := plist.Unmarshal(b, &got); err != nil || format != plist.XML {
		t.Fatalf("Info.plist: format %d, %v\n%s", format, err, b)
	}
	want := map[string]any{
		"CFBundleDevelopmentRegion":      "en",
		"CFBundleDisplayName":            "Free Agent",
		"CFBundleExecutable":             "freeagent",
		"CFBundleIconFile":               "FreeAgent",
		"CFBundleIdentifier":             "build.freeagent.FreeAgent",
		"CFBundleInfoDictionaryVersion":  "6.0",
		"CFBundleName":                   "FreeAgent",
		"CFBundlePackageType":            "APPL",
		"CFBundleShortVersionString":     "1.4.0",
		"CFBundleVersion":                "1.4.0.3",
		"LSApplicationCategoryType":      "public.app-category.developer-tools",
		"LSMinimumSystemVersion":         "13.0",
		"LSUIElement":                    true,
		"NSHighResolutionCapable":        true,
		"NSHumanReadableCopyright":       "Free Agent contributors",
		"NSLocalNetworkUsageDescription": "Free Agent connects to your build controller and to this Mac's build VMs on the local network to receive builds and report their results.",
		"FreeAgentSourceVersion":         "v1.4.0-3-g1a2b3c4",
	}
	if !reflect.DeepEqual(got, want) {
		for k := range want {
			if !reflect.DeepEqual(got[k], want[k]) {
				t.Errorf("%s = %#v, want %#v", k, got[k], want[k])
			}
		}
		for k := range got {
			if _, ok := want[k]; !ok {
				t.Errorf("unexpected key %s", k)
			}
		}
	}
}

func TestIcon(t *testing.T) {
	b, err := Icon()
	if err != nil {
		t.Fatal(err)
	}
	if err := checkIcon(b); err != nil {
		t.Fatal(err)
	}
	if len(b) > 200<<10 {
		t.Fatalf("icon is %d bytes: keep it small", len(b))
	}
	broken := append([]byte{}, b...)
	binary.BigEndian.PutUint32(broken[4:8], uint32(len(b)+1))
	if checkIcon(broken) == nil {
		t.Fatal("a wrong total length passed")
	}
	if checkIcon(b[:len(b)/2]) == nil {
		t.Fatal("a truncated icon passed")
	}
}

// darwinBinaries builds a tiny program for darwin/arm64 and darwin/amd64
// once per test run.
var darwinBinaries = sync.OnceValues(func() (map[string]string, error) {
	dir, err := os.MkdirTemp("", "bundle-test-")
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, arch := range []string{"arm64", "amd64"} {
		path := filepath.Join(dir, "hello-"+arch)
		cmd := exec.Command("go", "build", "-o", path, "./testdata/hello")
		cmd.Env = append(os.Environ(), "GOOS=darwin", "GOARCH="+arch, "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			return nil, &exec.ExitError{Stderr: b}
		}
		out[arch] = path
	}
	return out, nil
})

func bins(t *testing.T) map[string]string {
	t.Helper()
	b, err := darwinBinaries()
	if err != nil {
		t.Fatalf("build the darwin test binaries: %v", err)
	}
	return b
}

// writeFat joins thin Mach-O files into a universal one, as lipo does.
func writeFat(t *testing.T, out string, thin ...string) {
	t.Helper()
	const align = 14 // 16 KiB, lipo's alignment for arm64
	hdr := make([]byte, 8+20*len(thin))
	binary.BigEndian.PutUint32(hdr, macho.MagicFat)
	binary.BigEndian.PutUint32(hdr[4:], uint32(len(thin)))
	body := []byte{}
	offset := uint32(1 << align)
	for i, p := range thin {
		f, err := macho.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(p)
		e := hdr[8+20*i:]
		binary.BigEndian.PutUint32(e, uint32(f.Cpu))
		binary.BigEndian.PutUint32(e[4:], f.SubCpu)
		binary.BigEndian.PutUint32(e[8:], offset)
		binary.BigEndian.PutUint32(e[12:], uint32(len(b)))
		binary.BigEndian.PutUint32(e[16:], align)
		f.Close()
		body = append(body, make([]byte, int(offset)-len(hdr)-len(body))...)
		body = append(body, b...)
		offset = (uint32(len(hdr)+len(body)) + 1<<align - 1) &^ (1<<align - 1)
	}
	if err := os.WriteFile(out, append(hdr, body...), 0o755); err != nil {
		t.Fatal(err)
	}
}

func assemble(t *testing.T, host string) string {
	t.Helper()
	app, err := Assemble(Spec{Dir: t.TempDir(), Describe: "v0.3.0-2-gabcdef0", Freeagent: host, FreeagentVM: bins(t)["arm64"]})
	if err != nil {
		t.Fatal(err)
	}
	return app
}

func wantErr(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one containing %q", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Fatalf("error %q does not contain %q", err, p)
		}
	}
}

func TestAssembleThinBundles(t *testing.T) {
	b := bins(t)
	arm := assemble(t, b["arm64"])
	// The Go linker signs darwin/arm64 binaries ad hoc itself.
	if err := Validate(arm, Check{Archs: []string{"arm64"}, Signed: true}); err != nil {
		t.Fatal(err)
	}
	wantErr(t, Validate(arm, Check{Archs: []string{"arm64", "amd64"}}), "MacOS/freeagent holds arm64, want amd64+arm64")

	amd := assemble(t, b["amd64"])
	if err := Validate(amd, Check{Archs: []string{"amd64"}}); err != nil {
		t.Fatal(err)
	}
	// ... but not darwin/amd64 ones: that is what quill is for.
	wantErr(t, Validate(amd, Check{Archs: []string{"amd64"}, Signed: true}), "MacOS/freeagent (amd64) is not signed")
	for _, rel := range []string{"Contents/Info.plist", "Contents/PkgInfo", "Contents/MacOS/freeagent", "Contents/Resources/freeagent-vm", "Contents/Resources/FreeAgent.icns"} {
		if _, err := os.Stat(filepath.Join(amd, rel)); err != nil {
			t.Errorf("%s: %v", rel, err)
		}
	}
}

func TestUniversalBundle(t *testing.T) {
	b := bins(t)
	fat := filepath.Join(t.TempDir(), "freeagent")
	writeFat(t, fat, b["arm64"], b["amd64"])
	app := assemble(t, fat)
	if err := Validate(app, Check{Archs: []string{"arm64", "amd64"}}); err != nil {
		t.Fatal(err)
	}
	wantErr(t, Validate(app, Check{Archs: []string{"arm64"}}), "holds amd64+arm64, want arm64")
	wantErr(t, Validate(app, Check{Archs: []string{"arm64", "amd64"}, Signed: true}), "(amd64) is not signed")
}

func TestValidateFindsBrokenBundles(t *testing.T) {
	b := bins(t)
	check := Check{Archs: []string{"arm64"}}
	for _, c := range []struct {
		name   string
		break_ func(app string)
		want   []string
	}{
		{"stray file", func(app string) { os.WriteFile(filepath.Join(app, "Contents", "Resources", ".DS_Store"), nil, 0o644) }, []string{"unexpected Contents/Resources/.DS_Store"}},
		{"dock icon", func(app string) { rewriteInfo(t, app, func(i *Info) { i.LSUIElement = false }) }, []string{"LSUIElement"}},
		{"bundle id", func(app string) { rewriteInfo(t, app, func(i *Info) { i.CFBundleIdentifier = "com.example.x" }) }, []string{`CFBundleIdentifier is "com.example.x", want "build.freeagent.FreeAgent"`}},
		{"local network", func(app string) { rewriteInfo(t, app, func(i *Info) { i.NSLocalNetworkUsageDescription = "" }) }, []string{"NSLocalNetworkUsageDescription"}},
		{"version", func(app string) { rewriteInfo(t, app, func(i *Info) { i.CFBundleShortVersionString = "v1.0" }) }, []string{"CFBundleShortVersionString"}},
		{"not executable", func(app string) { os.Chmod(filepath.Join(app, "Contents", "MacOS", "freeagent"), 0o644) }, []string{"MacOS/freeagent is not executable"}},
		{"guest for Intel", func(app string) { copyFile(t, b["amd64"], filepath.Join(app, "Contents", "Resources", "freeagent-vm")) }, []string{"Resources/freeagent-vm holds amd64, want arm64"}},
		{"not Mach-O", func(app string) {
			os.WriteFile(filepath.Join(app, "Contents", "MacOS", "freeagent"), []byte("#!/bin/sh\n"), 0o755)
		}, []string{"MacOS/freeagent is not a Mach-O file"}},
		{"icon", func(app string) {
			os.WriteFile(filepath.Join(app, "Contents", "Resources", "FreeAgent.icns"), []byte("icns"), 0o644)
		}, []string{"FreeAgent.icns"}},
		{"no Info.plist", func(app string) { os.Remove(filepath.Join(app, "Contents", "Info.plist")) }, []string{"no Info.plist"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			app := assemble(t, b["arm64"])
			if err := Validate(app, check); err != nil {
				t.Fatalf("before breaking it: %v", err)
			}
			c.break_(app)
			wantErr(t, Validate(app, check), c.want...)
		})
	}
}

func rewriteInfo(t *testing.T, app string, edit func(*Info)) {
	t.Helper()
	path := filepath.Join(app, "Contents", "Info.plist")
	info, err := readInfo(path)
	if err != nil {
		t.Fatal(err)
	}
	edit(&info)
	b, _ := info.Render()
	os.WriteFile(path, b, 0o644)
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(to, b, 0o755)
}

func TestEntitlements(t *testing.T) {
	b, err := os.ReadFile("../FreeAgent.entitlements")
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckEntitlements(b); err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(string(b), "<dict>", "<dict><key>com.apple.security.get-task-allow</key><true/><key>com.apple.security.cs.allow-jit</key><true/>", 1)
	wantErr(t, CheckEntitlements([]byte(bad)), "get-task-allow", "allow-jit")
	wantErr(t, CheckEntitlements([]byte("<plist><dict></dict></plist>")), "network.client missing")
}

// withBuildVersion copies the thin Mach-O file in to a new file with its
// LC_BUILD_VERSION load command edited, as a cgo build linked for another
// macOS would have it.
func withBuildVersion(t *testing.T, in string, edit func(order binary.ByteOrder, cmd []byte)) string {
	t.Helper()
	f, err := macho.Open(in)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := os.ReadFile(in)
	if err != nil {
		t.Fatal(err)
	}
	off, found := 32, false // the 64-bit Mach-O header
	for _, l := range f.Loads {
		raw := l.Raw()
		if f.ByteOrder.Uint32(raw) == loadBuildVersion {
			edit(f.ByteOrder, b[off:off+len(raw)])
			found = true
		}
		off += len(raw)
	}
	if !found {
		t.Fatalf("%s has no LC_BUILD_VERSION", in)
	}
	out := filepath.Join(t.TempDir(), filepath.Base(in))
	if err := os.WriteFile(out, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestMinimumMacOS(t *testing.T) {
	b := bins(t)
	for _, arch := range []string{"arm64", "amd64"} {
		if err := CheckMinimumOS(b[arch]); err != nil {
			t.Fatalf("the Go linker's own binary: %v", err)
		}
	}
	// Linked by clang on a macOS 15 build Mac without MACOSX_DEPLOYMENT_TARGET.
	sequoia := withBuildVersion(t, b["arm64"], func(o binary.ByteOrder, cmd []byte) { o.PutUint32(cmd[12:], 15<<16) })
	wantErr(t, CheckMinimumOS(sequoia), "(arm64) needs macOS 15.0, but the bundle says 13.0", "MACOSX_DEPLOYMENT_TARGET=13.0")
	wantErr(t, Validate(assemble(t, sequoia), Check{Archs: []string{"arm64"}}), "MacOS/freeagent (arm64) needs macOS 15.0")
	ventura := withBuildVersion(t, b["arm64"], func(o binary.ByteOrder, cmd []byte) { o.PutUint32(cmd[12:], 13<<16) })
	if err := CheckMinimumOS(ventura); err != nil {
		t.Fatalf("built for 13.0: %v", err)
	}
	// A binary that does not say which macOS it needs is not waved through.
	unknown := withBuildVersion(t, b["arm64"], func(o binary.ByteOrder, cmd []byte) { o.PutUint32(cmd, 0x7ff) })
	wantErr(t, CheckMinimumOS(unknown), "records no minimum macOS")
	wantErr(t, Validate(assemble(t, unknown), Check{Archs: []string{"arm64"}}), "MacOS/freeagent (arm64) records no minimum macOS")
	wantErr(t, CheckMinimumOS("bundle_test.go"), "not a Mach-O file")
}
