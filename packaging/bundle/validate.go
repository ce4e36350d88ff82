package bundle

import (
	"debug/macho"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/freeagent-build/freeagent/internal/plist"
	"github.com/freeagent-build/freeagent/launchd"
)

// Check says what Validate requires beyond the layout and Info.plist.
type Check struct {
	Archs  []string // GOARCH names the host executable must contain: "arm64", "amd64" (both: universal)
	Signed bool     // every Mach-O file must carry a code signature
}

// the only paths a bundle may hold (signing adds _CodeSignature; stapling
// a notarization ticket adds Contents/CodeResources).
var layout = map[string]bool{
	"Contents":                                 true,
	"Contents/Info.plist":                      true,
	"Contents/PkgInfo":                         true,
	"Contents/MacOS":                           true,
	"Contents/MacOS/" + Executable:             true,
	"Contents/Resources":                       true,
	"Contents/Resources/" + GuestBinary:        true,
	"Contents/Resources/" + IconName + ".icns": true,
	"Contents/_CodeSignature":                  true,
	"Contents/_CodeSignature/CodeResources":    true,
	"Contents/CodeResources":                   true,
}

var (
	shortVersionRE = regexp.MustCompile(`^\d+\.\d+\.\d+$`)
	buildVersionRE = regexp.MustCompile(`^\d+(\.\d+){0,3}$`)
)

// Validate checks a built FreeAgent.app and returns every problem found.
func Validate(app string, c Check) error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	if filepath.Base(app) != AppName {
		fail("bundle is named %s, want %s", filepath.Base(app), AppName)
	}
	err := filepath.WalkDir(app, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(app, path)
		if rel == "." {
			return nil
		}
		if !layout[filepath.ToSlash(rel)] {
			fail("unexpected %s in the bundle", rel)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("read the bundle %s: %w", app, err)
	}
	contents := filepath.Join(app, "Contents")

	info, err := readInfo(filepath.Join(contents, "Info.plist"))
	if err != nil {
		fail("%v", err)
	} else {
		for _, kv := range []struct{ key, got, want string }{
			{"CFBundleIdentifier", info.CFBundleIdentifier, launchd.BundleID},
			{"CFBundleExecutable", info.CFBundleExecutable, Executable},
			{"CFBundlePackageType", info.CFBundlePackageType, "APPL"},
			{"CFBundleIconFile", info.CFBundleIconFile, IconName},
			{"CFBundleInfoDictionaryVersion", info.CFBundleInfoDictionaryVersion, "6.0"},
			{"LSMinimumSystemVersion", info.LSMinimumSystemVersion, MinimumMacOS},
		} {
			if kv.got != kv.want {
				fail("Info.plist %s is %q, want %q", kv.key, kv.got, kv.want)
			}
		}
		if !info.LSUIElement {
			fail("Info.plist LSUIElement is not true: the app would get a Dock icon")
		}
		if !shortVersionRE.MatchString(info.CFBundleShortVersionString) {
			fail("Info.plist CFBundleShortVersionString %q is not three numbers", info.CFBundleShortVersionString)
		}
		if !buildVersionRE.MatchString(info.CFBundleVersion) {
			fail("Info.plist CFBundleVersion %q is not dot-separated numbers", info.CFBundleVersion)
		}
		if strings.TrimSpace(info.NSLocalNetworkUsageDescription) == "" {
			fail("Info.plist has no NSLocalNetworkUsageDescription: on macOS 15 and later a controller on the local network would be refused without a prompt")
		}
		if info.CFBundleName == "" || info.CFBundleDisplayName == "" {
			fail("Info.plist has no CFBundleName or CFBundleDisplayName")
		}
	}
	if b, err := os.ReadFile(filepath.Join(contents, "PkgInfo")); err != nil || string(b) != "APPL????" {
		fail("Contents/PkgInfo is missing or not APPL???? (%q, %v)", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(contents, "Resources", IconName+".icns")); err != nil {
		fail("no icon: %v", err)
	} else if err := checkIcon(b); err != nil {
		fail("Resources/%s.icns: %v", IconName, err)
	}
	if err := checkMachO(filepath.Join(contents, "MacOS", Executable), c.Archs, c.Signed); err != nil {
		fail("%v", err)
	}
	if err := checkMachO(filepath.Join(contents, "Resources", GuestBinary), []string{"arm64"}, c.Signed); err != nil {
		fail("%v", err)
	}
	return errors.Join(errs...)
}

func readInfo(path string) (Info, error) {
	var info Info
	b, err := os.ReadFile(path)
	if err != nil {
		return info, fmt.Errorf("no Info.plist: %w", err)
	}
	format, err := plist.Unmarshal(b, &info)
	if err != nil {
		return info, fmt.Errorf("Info.plist does not parse: %w", err)
	}
	if format != plist.XML && format != plist.Binary {
		return info, fmt.Errorf("Info.plist is in the old OpenStep format")
	}
	return info, nil
}

var cpus = map[string]macho.Cpu{"arm64": macho.CpuArm64, "amd64": macho.CpuAmd64}

const (
	loadCodeSignature   = 0x1d // LC_CODE_SIGNATURE
	loadVersionMinMacOS = 0x24 // LC_VERSION_MIN_MACOSX (older linkers)
	loadBuildVersion    = 0x32 // LC_BUILD_VERSION
)

// checkMachO verifies an executable: mode, exactly the wanted
// architectures, a signature when asked, and a minimum macOS no newer
// than the bundle's.
func checkMachO(path string, archs []string, signed bool) error {
	name := filepath.Join(filepath.Base(filepath.Dir(path)), filepath.Base(path))
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if st.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%s is not executable (mode %v)", name, st.Mode().Perm())
	}
	files, closeFiles, err := openMachO(path, name)
	if err != nil {
		return err
	}
	defer closeFiles()

	var got []string
	var errs []error
	for _, f := range files {
		arch := archName(f)
		got = append(got, arch)
		if f.Type != macho.TypeExec {
			errs = append(errs, fmt.Errorf("%s (%s) is not an executable (Mach-O type %v)", name, arch, f.Type))
		}
		if signed && !hasLoad(f, loadCodeSignature) {
			errs = append(errs, fmt.Errorf("%s (%s) is not signed", name, arch))
		}
		if err := checkMinimumOS(f, name); err != nil {
			errs = append(errs, err)
		}
	}
	slices.Sort(got)
	want := slices.Sorted(slices.Values(archs))
	if !slices.Equal(got, want) {
		errs = append(errs, fmt.Errorf("%s holds %s, want %s", name, strings.Join(got, "+"), strings.Join(want, "+")))
	}
	return errors.Join(errs...)
}

// CheckMinimumOS verifies that every architecture of the Mach-O file at
// path records the macOS it needs (LC_BUILD_VERSION's minos) and that it is
// no newer than MinimumMacOS: a cgo binary linked without
// MACOSX_DEPLOYMENT_TARGET needs the build Mac's own version.
func CheckMinimumOS(path string) error {
	files, closeFiles, err := openMachO(path, path)
	if err != nil {
		return err
	}
	defer closeFiles()
	var errs []error
	for _, f := range files {
		errs = append(errs, checkMinimumOS(f, path))
	}
	return errors.Join(errs...)
}

func checkMinimumOS(f *macho.File, name string) error {
	arch := archName(f)
	minos := minimumOS(f)
	switch {
	case minos == "":
		return fmt.Errorf("%s (%s) records no minimum macOS (no LC_BUILD_VERSION): it cannot be checked against the bundle's %s", name, arch, MinimumMacOS)
	case newerThan(minos, MinimumMacOS):
		return fmt.Errorf("%s (%s) needs macOS %s, but the bundle says %s: build it with MACOSX_DEPLOYMENT_TARGET=%s", name, arch, minos, MinimumMacOS, MinimumMacOS)
	}
	return nil
}

// openMachO opens a thin or universal Mach-O file and returns each
// architecture's part.
func openMachO(path, name string) ([]*macho.File, func(), error) {
	fat, err := macho.OpenFat(path)
	if err == nil {
		var files []*macho.File
		for _, a := range fat.Arches {
			files = append(files, a.File)
		}
		return files, func() { fat.Close() }, nil
	}
	if !errors.Is(err, macho.ErrNotFat) {
		return nil, nil, fmt.Errorf("%s is not a Mach-O file: %w", name, err)
	}
	f, err := macho.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("%s is not a Mach-O file: %w", name, err)
	}
	return []*macho.File{f}, func() { f.Close() }, nil
}

// archName is the GOARCH name of f's CPU, or the Mach-O one.
func archName(f *macho.File) string {
	for n, c := range cpus {
		if c == f.Cpu {
			return n
		}
	}
	return f.Cpu.String()
}

func hasLoad(f *macho.File, cmd uint32) bool {
	for _, l := range f.Loads {
		if raw := l.Raw(); len(raw) >= 8 && f.ByteOrder.Uint32(raw) == cmd {
			return true
		}
	}
	return false
}

// minimumOS is the "major.minor" macOS f needs, from LC_BUILD_VERSION
// (minos at offset 12) or the older LC_VERSION_MIN_MACOSX (offset 8); ""
// when neither is there.
func minimumOS(f *macho.File) string {
	for _, l := range f.Loads {
		raw := l.Raw()
		if len(raw) < 16 {
			continue
		}
		var v uint32
		switch f.ByteOrder.Uint32(raw) {
		case loadBuildVersion:
			v = f.ByteOrder.Uint32(raw[12:16])
		case loadVersionMinMacOS:
			v = f.ByteOrder.Uint32(raw[8:12])
		default:
			continue
		}
		return fmt.Sprintf("%d.%d", v>>16, (v>>8)&0xff)
	}
	return ""
}

// newerThan compares "major.minor" versions.
func newerThan(a, b string) bool {
	var am, an, bm, bn int
	fmt.Sscanf(a, "%d.%d", &am, &an)
	fmt.Sscanf(b, "%d.%d", &bm, &bn)
	return am > bm || (am == bm && an > bn)
}

// CheckEntitlements verifies the entitlements codesign gets: a dictionary
// of booleans, nothing that weakens the hardened runtime or allows a
// debugger to attach, and the network access the agent needs.
func CheckEntitlements(b []byte) error {
	var m map[string]any
	if _, err := plist.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("entitlements do not parse: %w", err)
	}
	var errs []error
	for k, v := range m {
		on, ok := v.(bool)
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("entitlement %s is %T, want a boolean", k, v))
		case on && (k == "com.apple.security.get-task-allow" || strings.HasPrefix(k, "com.apple.security.cs.")):
			errs = append(errs, fmt.Errorf("entitlement %s weakens the hardened runtime; Go binaries do not need it", k))
		}
	}
	for _, k := range []string{"com.apple.security.network.client", "com.apple.security.network.server"} {
		if m[k] != true {
			errs = append(errs, fmt.Errorf("entitlement %s missing", k))
		}
	}
	return errors.Join(errs...)
}
