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

	"howett.net/plist"

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
	if format != plist.XMLFormat && format != plist.BinaryFormat {
		return info, fmt.Errorf("Info.plist is in the old OpenStep format")
	}
	return info, nil
}

var cpus = map[string]macho.Cpu{"arm64": macho.CpuArm64, "amd64": macho.CpuAmd64}

const (
	loadCodeSignature = 0x1d // LC_CODE_SIGNATURE
	loadBuildVersion  = 0x32 // LC_BUILD_VERSION
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
	var files []*macho.File
	if fat, err := macho.OpenFat(path); err == nil {
		defer fat.Close()
		for _, a := range fat.Arches {
			files = append(files, a.File)
		}
	} else if errors.Is(err, macho.ErrNotFat) {
		f, err := macho.Open(path)
		if err != nil {
			return fmt.Errorf("%s is not a Mach-O file: %w", name, err)
		}
		defer f.Close()
		files = append(files, f)
	} else {
		return fmt.Errorf("%s is not a Mach-O file: %w", name, err)
	}

	var got []string
	var errs []error
	for _, f := range files {
		arch := f.Cpu.String()
		for n, c := range cpus {
			if c == f.Cpu {
				arch = n
			}
		}
		got = append(got, arch)
		if f.Type != macho.TypeExec {
			errs = append(errs, fmt.Errorf("%s (%s) is not an executable (Mach-O type %v)", name, arch, f.Type))
		}
		sig, minos := false, ""
		for _, l := range f.Loads {
			raw := l.Raw()
			if len(raw) < 8 {
				continue
			}
			switch f.ByteOrder.Uint32(raw) {
			case loadCodeSignature:
				sig = true
			case loadBuildVersion:
				if len(raw) >= 16 {
					v := f.ByteOrder.Uint32(raw[12:16])
					minos = fmt.Sprintf("%d.%d", v>>16, (v>>8)&0xff)
				}
			}
		}
		if signed && !sig {
			errs = append(errs, fmt.Errorf("%s (%s) is not signed", name, arch))
		}
		if minos != "" && newerThan(minos, MinimumMacOS) {
			errs = append(errs, fmt.Errorf("%s (%s) needs macOS %s, but the bundle says %s", name, arch, minos, MinimumMacOS))
		}
	}
	slices.Sort(got)
	want := slices.Sorted(slices.Values(archs))
	if !slices.Equal(got, want) {
		errs = append(errs, fmt.Errorf("%s holds %s, want %s", name, strings.Join(got, "+"), strings.Join(want, "+")))
	}
	return errors.Join(errs...)
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
