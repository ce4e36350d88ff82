package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/freeagent-build/freeagent/internal/boundedfile"
	"github.com/freeagent-build/freeagent/internal/xcode"
)

// buildContext is one xcodebuild run: what every target's settings
// share.
type buildContext struct {
	projectPath   string // the app's .xcodeproj
	configuration string
	sdk           string // iphoneos or iphonesimulator
	action        string // "install" for archive, "build"
	buildDir      string // BUILD_DIR: products go to $(BUILD_DIR)/$(CONFIGURATION)$(EFFECTIVE_PLATFORM_NAME)
	objRoot       string // OBJROOT: intermediates
	overrides     map[string]string
}

// newBuildContext lays out the derived data as Xcode does: under
// -derivedDataPath, else $HOME/Library/Developer/Xcode/DerivedData/
// <workspace>-<hash>; an archive's products and intermediates under
// ArchiveIntermediates/<scheme>.
func newBuildContext(inv invocation, ws workspace, scheme, configuration, sdk, action string) buildContext {
	derived, _ := filepath.Abs(inv.flags["-derivedDataPath"])
	if inv.flags["-derivedDataPath"] == "" {
		home, _ := os.UserHomeDir()
		sum := sha256.Sum256([]byte(ws.path))
		derived = filepath.Join(home, "Library", "Developer", "Xcode", "DerivedData", ws.name+"-"+hex.EncodeToString(sum[:])[:28])
	}
	bc := buildContext{projectPath: ws.appProj, configuration: configuration, sdk: sdk, action: action, overrides: inv.overrides,
		buildDir: filepath.Join(derived, "Build", "Products"), objRoot: filepath.Join(derived, "Build", "Intermediates.noindex")}
	if action == "install" {
		base := filepath.Join(derived, "Build", "Intermediates.noindex", "ArchiveIntermediates", scheme)
		bc.buildDir, bc.objRoot = filepath.Join(base, "BuildProductsPath"), filepath.Join(base, "IntermediateBuildFilesPath")
	}
	return bc
}

// builtinSettings are the settings Xcode defines for every target, below
// the project's own: names, build locations and bundle layout (iOS
// bundles are flat: resources beside the executable).
func (bc buildContext) builtinSettings(t xcode.Target) map[string]string {
	srcRoot := filepath.Dir(bc.projectPath)
	ext, pkgType, installPath := "app", "APPL", "/Applications"
	if t.ProductType == xcode.ProductTypeAppExtension {
		ext, pkgType, installPath = "appex", "XPC!", "/Applications/$(PRODUCT_NAME).app/PlugIns"
	}
	return map[string]string{
		"ACTION": bc.action, "CONFIGURATION": bc.configuration, "PLATFORM_NAME": bc.sdk, "SDK_NAME": bc.sdk, "EFFECTIVE_PLATFORM_NAME": "-" + bc.sdk,
		"PROJECT_NAME": strings.TrimSuffix(filepath.Base(bc.projectPath), ".xcodeproj"), "PROJECT_FILE_PATH": bc.projectPath,
		"PROJECT_DIR": srcRoot, "SRCROOT": srcRoot, "SOURCE_ROOT": srcRoot,
		"TARGET_NAME": t.Name, "TARGETNAME": t.Name, "PRODUCT_NAME": "$(TARGET_NAME)", "PRODUCT_TYPE": t.ProductType,
		"WRAPPER_EXTENSION": ext, "PRODUCT_BUNDLE_PACKAGE_TYPE": pkgType, "INSTALL_PATH": installPath,
		"FULL_PRODUCT_NAME": "$(PRODUCT_NAME).$(WRAPPER_EXTENSION)", "WRAPPER_NAME": "$(FULL_PRODUCT_NAME)",
		"EXECUTABLE_NAME": "$(PRODUCT_NAME)", "CONTENTS_FOLDER_PATH": "$(WRAPPER_NAME)", "EXECUTABLE_FOLDER_PATH": "$(CONTENTS_FOLDER_PATH)",
		"EXECUTABLE_PATH": "$(EXECUTABLE_FOLDER_PATH)/$(EXECUTABLE_NAME)", "UNLOCALIZED_RESOURCES_FOLDER_PATH": "$(CONTENTS_FOLDER_PATH)",
		"INFOPLIST_PATH": "$(CONTENTS_FOLDER_PATH)/Info.plist", "DEVELOPMENT_LANGUAGE": "en",
		"BUILD_DIR": bc.buildDir, "BUILD_ROOT": bc.buildDir, "SYMROOT": bc.buildDir, "OBJROOT": bc.objRoot,
		"CONFIGURATION_BUILD_DIR": "$(BUILD_DIR)/$(CONFIGURATION)$(EFFECTIVE_PLATFORM_NAME)", "BUILT_PRODUCTS_DIR": "$(CONFIGURATION_BUILD_DIR)",
		"TARGET_BUILD_DIR":       "$(CONFIGURATION_BUILD_DIR)",
		"PROJECT_TEMP_DIR":       "$(OBJROOT)/$(PROJECT_NAME).build",
		"CONFIGURATION_TEMP_DIR": "$(PROJECT_TEMP_DIR)/$(CONFIGURATION)$(EFFECTIVE_PLATFORM_NAME)",
		"TARGET_TEMP_DIR":        "$(CONFIGURATION_TEMP_DIR)/$(TARGET_NAME).build", "TEMP_DIR": "$(TARGET_TEMP_DIR)",
		"DERIVED_FILE_DIR": "$(TARGET_TEMP_DIR)/DerivedSources", "DERIVED_FILES_DIR": "$(DERIVED_FILE_DIR)", "DERIVED_SOURCES_DIR": "$(DERIVED_FILE_DIR)",
		"DWARF_DSYM_FOLDER_PATH": "$(CONFIGURATION_BUILD_DIR)", "DWARF_DSYM_FILE_NAME": "$(FULL_PRODUCT_NAME).dSYM",
	}
}

// targetSettings resolves target's settings as Xcode does: built-ins,
// the project's xcconfig, the project's settings, the target's xcconfig
// (CocoaPods'), the target's settings, the command line, each level's
// $(inherited) being the levels below; within a level a setting
// conditional on the SDK ("KEY[sdk=iphoneos*]") wins over the plain one.
// Every value comes back expanded; a reference to no setting expands to
// the environment variable of that name, else "".
func (bc buildContext) targetSettings(p *xcode.Project, t xcode.Target) (map[string]string, error) {
	srcRoot := filepath.Dir(bc.projectPath)
	levels := []map[string]string{bc.builtinSettings(t)}
	for _, target := range []string{"", t.Name} {
		base, err := p.BaseConfigurationPath(target, bc.configuration)
		if err != nil {
			return nil, err
		}
		if base != "" {
			if !filepath.IsAbs(base) {
				base = filepath.Join(srcRoot, base)
			}
			xc, err := readXCConfig(base, 0)
			if err != nil {
				return nil, err
			}
			levels = append(levels, xc)
		}
		if target == "" {
			levels = append(levels, p.ProjectBuildSettings(bc.configuration))
			continue
		}
		own, err := p.BuildSettings(target, bc.configuration)
		if err != nil {
			return nil, err
		}
		levels = append(levels, own)
	}
	levels = append(levels, bc.overrides)

	merged := map[string]string{}
	for _, level := range levels {
		plain, conditional := map[string]string{}, map[string]string{}
		for k, v := range level {
			key, cond, ok := strings.Cut(k, "[")
			switch {
			case !ok:
				plain[k] = v
			case bc.conditionHolds(strings.TrimSuffix(cond, "]")):
				conditional[key] = v
			}
		}
		for _, set := range []map[string]string{plain, conditional} {
			for k, v := range set {
				inherited := merged[k]
				v = strings.ReplaceAll(v, "$(inherited)", inherited)
				merged[k] = strings.ReplaceAll(v, "${inherited}", inherited)
			}
		}
	}
	lookup := func(name string) string {
		if v, ok := merged[name]; ok {
			return v
		}
		return os.Getenv(name)
	}
	out := make(map[string]string, len(merged))
	for k, v := range merged {
		out[k] = xcode.ExpandSettings(v, lookup)
	}
	return out, nil
}

// conditionHolds evaluates a setting's condition ("sdk=iphoneos*",
// "config=Release"; several joined by "]["): a device build is arm64.
func (bc buildContext) conditionHolds(cond string) bool {
	for _, c := range strings.Split(cond, "][") {
		k, pattern, _ := strings.Cut(c, "=")
		var value string
		switch k {
		case "sdk":
			value = bc.sdk
		case "arch":
			value = "arm64"
		case "config":
			value = bc.configuration
		default:
			return false
		}
		if ok, _ := path.Match(pattern, value); !ok {
			return false
		}
	}
	return true
}

// maxXCConfigSize bounds an .xcconfig read; CocoaPods' are a few KiB.
const maxXCConfigSize = 1 << 20

// readXCConfig reads an .xcconfig as Xcode does: `KEY = value` lines
// (an optional trailing `;`), `//` comments, `#include "file"` (and
// `#include?`, which may be missing) relative to the including file.
func readXCConfig(file string, depth int) (map[string]string, error) {
	if depth > 16 {
		return nil, fmt.Errorf("%s: #include nests too deep", file)
	}
	data, err := boundedfile.Read(file, maxXCConfigSize)
	if err != nil {
		return nil, fmt.Errorf("unable to open base configuration reference file '%s': %w", file, err)
	}
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		if i := strings.Index(line, "//"); i >= 0 {
			line = line[:i]
		}
		line = strings.TrimSpace(line)
		if inc, ok := strings.CutPrefix(line, "#include"); ok {
			optional := strings.HasPrefix(inc, "?")
			name := strings.Trim(strings.TrimSpace(strings.TrimPrefix(inc, "?")), `"`)
			if !filepath.IsAbs(name) {
				name = filepath.Join(filepath.Dir(file), name)
			}
			included, err := readXCConfig(name, depth+1)
			if err != nil {
				if optional && errors.Is(err, fs.ErrNotExist) {
					continue
				}
				return nil, err
			}
			for k, v := range included {
				out[k] = v
			}
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		out[strings.TrimSpace(k)] = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), ";"))
	}
	return out, sc.Err()
}
