package hostcheck

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// fakeHost is a host whose PATH holds exactly tools and whose environment is env.
func fakeHost(goos string, env map[string]string, tools ...string) Toolchain {
	return Toolchain{GOOS: goos,
		LookPath: func(name string) (string, error) {
			if slices.Contains(tools, name) {
				return "/usr/bin/" + name, nil
			}
			return "", exec.ErrNotFound
		},
		Getenv: func(k string) string { return env[k] },
		IsDir:  func(p string) bool { return strings.HasSuffix(p, "sdk") },
		IsFile: func(p string) bool { return strings.HasPrefix(p, "/jdk/") },
		// java_home finds a JDK when JAVA_HOME would name one.
		Succeeds: func(name string, _ ...string) bool {
			return name == "/usr/libexec/java_home" && env["JDK_INSTALLED"] != ""
		},
	}
}

func TestLocalPlatforms(t *testing.T) {
	sdk := map[string]string{"ANDROID_HOME": "/opt/android-sdk"}
	for _, c := range []struct {
		name       string
		configured []string
		host       Toolchain
		want       []string
		severity   Severity
		says       []string
		fix        string
	}{
		{"linux with the Android tools", nil, fakeHost("linux", sdk, "java"), []string{"android"}, Warn,
			[]string{"building android on this host", "not ios: builds run on this linux host"}, "Mac with Xcode"},
		{"linux, SDK under ANDROID_SDK_ROOT, JDK under JAVA_HOME", nil,
			fakeHost("linux", map[string]string{"ANDROID_SDK_ROOT": "/opt/sdk", "JAVA_HOME": "/jdk/17"}), []string{"android"}, Warn,
			[]string{"building android"}, ""},
		{"linux without a JDK", nil, fakeHost("linux", sdk), nil, Fail,
			[]string{"takes no builds", "not android: this host has no JDK"}, "install JDK 17"},
		{"linux without an SDK", nil, fakeHost("linux", nil, "java"), nil, Fail,
			[]string{"not android: this host has no Android SDK (neither ANDROID_HOME nor ANDROID_SDK_ROOT"}, "set ANDROID_HOME"},
		{"ANDROID_HOME naming no directory", nil, fakeHost("linux", map[string]string{"ANDROID_HOME": "/nowhere"}, "java"), nil, Fail,
			[]string{"no Android SDK"}, ""},
		{"linux, android set without the tools", []string{"android"}, fakeHost("linux", nil), []string{"android"}, OK,
			[]string{"building android on this host", "android as set, though this host has no JDK"}, ""},
		{"linux, ios asked for", []string{"ios", "android"}, fakeHost("linux", sdk, "java", "xcodebuild"), []string{"android"}, Warn,
			[]string{"building android", "not ios"}, ""},
		{"linux, ios only", []string{"ios"}, fakeHost("linux", sdk, "java", "xcodebuild"), nil, Fail, []string{"takes no builds"}, ""},
		{"mac without Xcode or Android", nil, fakeHost("darwin", nil), nil, Fail,
			[]string{"not ios: builds run on this Mac, which has no xcodebuild", "not android"}, "xcode-select"},
		{"mac with Xcode only", nil, fakeHost("darwin", nil, "xcodebuild"), []string{"ios"}, Warn,
			[]string{"building ios", "not android: this host has no JDK"}, "ANDROID_HOME"},
		{"mac with both", nil, fakeHost("darwin", map[string]string{"ANDROID_HOME": "/opt/sdk", "JDK_INSTALLED": "1"}, "xcodebuild", "java"),
			[]string{"ios", "android"}, OK, []string{"building ios, android on this host"}, ""},
		{"mac whose java is Apple's stub, no JDK", nil, fakeHost("darwin", sdk, "xcodebuild", "java"), []string{"ios"}, Warn,
			[]string{"not android: this host has no JDK"}, ""},
	} {
		got, r := LocalPlatforms(c.configured, c.host)
		if !slices.Equal(got, c.want) || r.Severity != c.severity || r.ID != IDPlatforms || !strings.Contains(r.Fix, c.fix) {
			t.Errorf("%s: %v %+v; want %v %s, fix naming %q", c.name, got, r, c.want, c.severity, c.fix)
		}
		for _, s := range c.says {
			if !strings.Contains(r.Message, s) {
				t.Errorf("%s: %q does not say %q", c.name, r.Message, s)
			}
		}
		if r.Severity == OK && r.Fix != "" {
			t.Errorf("%s: a fix with nothing to fix: %q", c.name, r.Fix)
		}
	}
}

// On this very host, with a PATH and environment made in a temporary
// directory: ThisHost reads the real PATH, environment and files.
func TestLocalPlatformsOfThisHost(t *testing.T) {
	bin, sdk := t.TempDir(), t.TempDir()
	t.Setenv("PATH", bin)
	t.Setenv("JAVA_HOME", "")
	t.Setenv("ANDROID_SDK_ROOT", "")
	t.Setenv("ANDROID_HOME", sdk)
	if got, r := LocalPlatforms(nil, ThisHost()); slices.Contains(got, "android") || !strings.Contains(r.Message, "no JDK") {
		t.Errorf("no java on the PATH: %v %+v", got, r)
	}
	if err := os.WriteFile(filepath.Join(bin, "java"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	got, r := LocalPlatforms(nil, ThisHost())
	if !slices.Contains(got, "android") {
		t.Errorf("java on the PATH and ANDROID_HOME set: %v %+v", got, r)
	}
	if slices.Contains(got, "ios") {
		t.Errorf("no xcodebuild on the PATH (%s): %v", runtime.GOOS, got)
	}
	t.Setenv("ANDROID_HOME", filepath.Join(sdk, "missing"))
	if got, r := LocalPlatforms(nil, ThisHost()); slices.Contains(got, "android") {
		t.Errorf("ANDROID_HOME naming no directory: %v %+v", got, r)
	}
}
