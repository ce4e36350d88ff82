// Package appversion reads and writes an app's versions where EAS keeps
// them: app.json (expo.version, expo.android.versionCode,
// expo.ios.buildNumber), android/app/build.gradle (versionCode,
// versionName) and the targets' Info.plist (CFBundleVersion,
// CFBundleShortVersionString). expo-build bumps them for the local
// version source and syncs them from the farm; freeagent-vm applies a
// build's decided versions with it.
package appversion

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/freeagent-build/freeagent/internal/boundedfile"
	"github.com/freeagent-build/freeagent/internal/plist"
	"github.com/freeagent-build/freeagent/internal/xcode"
)

// maxFileSize bounds the reads of the files edited here.
const maxFileSize = 8 << 20

// readFile reads one of the app's files, bounded.
func readFile(path string) ([]byte, error) {
	b, err := boundedfile.Read(path, maxFileSize)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", filepath.Base(path), err)
	}
	return b, nil
}

// writeFile replaces path's content, keeping its mode.
func writeFile(path string, data []byte) error {
	mode := os.FileMode(0o644)
	if fi, err := os.Stat(path); err == nil {
		mode = fi.Mode().Perm()
	}
	if err := os.WriteFile(path, data, mode); err != nil {
		return fmt.Errorf("write %s: %w", filepath.Base(path), err)
	}
	return nil
}

// AppJSONEdit is one value to set in app.json's Expo config: Path is
// its keys below the config ("android", "versionCode"), Value its JSON.
type AppJSONEdit struct {
	Path  []string
	Value json.RawMessage
}

// EditAppJSON sets values in the app.json (or app.config.json) at path,
// under "expo" when the file has it, as eas-cli's updateAppJsonConfigAsync
// does; every other byte of the file is kept.
func EditAppJSON(path string, edits ...AppJSONEdit) error {
	data, err := readFile(path)
	if err != nil {
		return err
	}
	var root map[string]json.RawMessage
	if err := json.Unmarshal(data, &root); err != nil {
		return fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	var prefix []string
	if _, ok := root["expo"]; ok {
		prefix = []string{"expo"}
	}
	for _, e := range edits {
		if data, err = setJSON(data, append(append([]string{}, prefix...), e.Path...), e.Value); err != nil {
			return fmt.Errorf("%s: %w", filepath.Base(path), err)
		}
	}
	return writeFile(path, data)
}

// Gradle's versionCode and versionName assignments (Groovy or Kotlin).
var (
	gradleVersionCode = regexp.MustCompile(`\bversionCode\b[ \t]*=?[ \t]*([^\s]+)`)
	gradleVersionName = regexp.MustCompile(`\bversionName\b[ \t]*=?[ \t]*["']([^"'\n]*)["']`)
	gradleFlavors     = regexp.MustCompile(`\b(productFlavors|flavorDimensions)\b`)
)

// GradleFile is the app module's build script, build.gradle or
// build.gradle.kts, under the app's android directory.
func GradleFile(androidDir string) (string, error) {
	for _, name := range []string{"build.gradle", "build.gradle.kts"} {
		p := filepath.Join(androidDir, "app", name)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", errors.New("android/app/build.gradle is missing")
}

// GradleVersions are the first versionCode and versionName of the build
// script ("" for one it does not state as a literal).
func GradleVersions(path string) (versionCode, versionName string, err error) {
	data, err := readFile(path)
	if err != nil {
		return "", "", err
	}
	if m := gradleVersionCode.FindSubmatch(data); m != nil && isDigits(string(m[1])) {
		versionCode = string(m[1])
	}
	if m := gradleVersionName.FindSubmatch(data); m != nil {
		versionName = string(m[1])
	}
	return versionCode, versionName, nil
}

// MultiFlavor reports whether the build script declares product flavors,
// whose versions eas-cli does not bump.
func MultiFlavor(path string) (bool, error) {
	data, err := readFile(path)
	if err != nil {
		return false, err
	}
	return gradleFlavors.Match(data), nil
}

// SetGradleVersions sets every versionCode and versionName the build
// script assigns; "" leaves that one as it is.
func SetGradleVersions(path, versionCode, versionName string) error {
	data, err := readFile(path)
	if err != nil {
		return err
	}
	if versionCode != "" {
		if !gradleVersionCode.Match(data) {
			return fmt.Errorf("%s assigns no versionCode to set to %s", filepath.Base(path), versionCode)
		}
		data = gradleVersionCode.ReplaceAllFunc(data, func(m []byte) []byte {
			sub := gradleVersionCode.FindSubmatchIndex(m)
			return append(append(bytes.Clone(m[:sub[2]]), versionCode...), m[sub[3]:]...)
		})
	}
	if versionName != "" {
		data = gradleVersionName.ReplaceAllFunc(data, func(m []byte) []byte {
			sub := gradleVersionName.FindSubmatchIndex(m)
			return append(append(bytes.Clone(m[:sub[2]]), versionName...), m[sub[3]:]...)
		})
	}
	return writeFile(path, data)
}

func isDigits(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}

// InfoPlists are the Info.plist files of the targets' configuration in the
// Xcode project xcodeproj (under iosDir), with each one's build settings
// for evaluating $(VAR) references, application target first, each file
// once.
func InfoPlists(iosDir, xcodeproj string, targets []string, configuration string) ([]InfoPlist, error) {
	proj, err := xcode.LoadProject(xcodeproj)
	if err != nil {
		return nil, err
	}
	var out []InfoPlist
	seen := map[string]bool{}
	for _, t := range targets {
		settings, err := proj.BuildSettings(t, configuration)
		if err != nil {
			return nil, err
		}
		for k, v := range proj.ProjectBuildSettings(configuration) {
			if _, ok := settings[k]; !ok {
				settings[k] = v
			}
		}
		file := settings["INFOPLIST_FILE"]
		if file == "" {
			return nil, fmt.Errorf("target %q (%s) has no INFOPLIST_FILE", t, configuration)
		}
		settings["SRCROOT"] = iosDir
		p := evaluate(strings.Trim(file, `"`), settings)
		if !filepath.IsAbs(p) {
			p = filepath.Join(iosDir, p)
		}
		p = filepath.Clean(p)
		if !seen[p] {
			seen[p] = true
			out = append(out, InfoPlist{Path: p, Settings: settings})
		}
	}
	return out, nil
}

// InfoPlist is one target's Info.plist and its build settings.
type InfoPlist struct {
	Path     string
	Settings map[string]string
}

var settingRef = regexp.MustCompile(`\$\((\w+)\)`)

// evaluate replaces $(VAR) with its setting, leaving unknown ones, as
// eas-cli's evaluateTemplateString does.
func evaluate(s string, settings map[string]string) string {
	return settingRef.ReplaceAllStringFunc(s, func(m string) string {
		if v, ok := settings[m[2:len(m)-1]]; ok {
			return strings.Trim(v, `"`)
		}
		return m
	})
}

// Versions reads CFBundleVersion and CFBundleShortVersionString, their
// $(VAR) references evaluated.
func (p InfoPlist) Versions() (buildNumber, shortVersion string, err error) {
	dict, err := readPlist(p.Path)
	if err != nil {
		return "", "", err
	}
	buildNumber, _ = dict["CFBundleVersion"].(string)
	shortVersion, _ = dict["CFBundleShortVersionString"].(string)
	return evaluate(buildNumber, p.Settings), evaluate(shortVersion, p.Settings), nil
}

// SetVersions sets CFBundleVersion and, when shortVersion is not "",
// CFBundleShortVersionString, rewriting the file as eas-cli does.
func (p InfoPlist) SetVersions(buildNumber, shortVersion string) error {
	dict, err := readPlist(p.Path)
	if err != nil {
		return err
	}
	if buildNumber != "" {
		dict["CFBundleVersion"] = buildNumber
	}
	if shortVersion != "" {
		dict["CFBundleShortVersionString"] = shortVersion
	}
	out, err := plist.Marshal(dict)
	if err != nil {
		return fmt.Errorf("encode %s: %w", p.Path, err)
	}
	return writeFile(p.Path, out)
}

func readPlist(path string) (map[string]any, error) {
	data, err := readFile(path)
	if err != nil {
		return nil, err
	}
	v, err := plist.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	dict, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s does not hold a dictionary", path)
	}
	return dict, nil
}
