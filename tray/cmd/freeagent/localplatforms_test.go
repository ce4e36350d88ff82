package main

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
)

// toolchainHost makes this process's PATH a temporary directory holding
// only the tools named (empty shell scripts) and sets ANDROID_HOME to a
// real directory when sdk is true; JAVA_HOME and ANDROID_SDK_ROOT are unset.
func toolchainHost(t *testing.T, sdk bool, tools ...string) {
	t.Helper()
	bin := t.TempDir()
	for _, name := range tools {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", bin)
	t.Setenv("JAVA_HOME", "")
	t.Setenv("ANDROID_SDK_ROOT", "")
	t.Setenv("ANDROID_HOME", "")
	if sdk {
		t.Setenv("ANDROID_HOME", t.TempDir())
	}
}

// A worker with the local driver advertises only what this host builds:
// never ios without macOS and xcodebuild, android only with a
// JDK and an Android SDK unless --platforms names it; the log says why.
func TestLocalWorkerAdvertisesWhatTheHostBuilds(t *testing.T) {
	advertised := func(set string) ([]string, string) {
		var logBuf bytes.Buffer
		log := logrus.New()
		log.SetOutput(&logBuf)
		cfg := &Config{VMDriver: "local", Platforms: set}
		return cfg.capabilities(log).Platforms, logBuf.String()
	}
	toolchainHost(t, false)
	for _, set := range []string{"", "ios"} {
		if got, log := advertised(set); len(got) != 0 || !strings.Contains(log, "this worker takes no builds") {
			t.Errorf("no tools, --platforms %q: advertises %v\n%s", set, got, log)
		}
	}
	if got, log := advertised("android"); !slices.Equal(got, []string{"android"}) {
		t.Errorf("no tools, --platforms android (the owner's word wins): advertises %v\n%s", got, log)
	}
	toolchainHost(t, true, "java")
	for _, set := range []string{"", "ios,android"} {
		got, log := advertised(set)
		if !slices.Equal(got, []string{"android"}) || !strings.Contains(log, "not ios") {
			t.Errorf("java and an SDK, no xcodebuild, --platforms %q: advertises %v\n%s", set, got, log)
		}
	}
	if runtime.GOOS == "darwin" {
		toolchainHost(t, true, "java", "xcodebuild")
		if got, log := advertised(""); !slices.Equal(got, []string{"ios", "android"}) {
			t.Errorf("a Mac with Xcode, java and an SDK: advertises %v\n%s", got, log)
		}
	}
}

// `freeagent doctor` with the local driver prints a platforms line: what
// the worker takes and, for each platform it will not, why and the fix.
func TestDoctorSaysWhichPlatforms(t *testing.T) {
	url, workerKey := controller(t)
	t.Setenv("FREEAGENT_API_KEY", workerKey)
	signals := filepath.Join(t.TempDir(), "signals.json")
	os.WriteFile(signals, []byte(`{"idle_seconds": 3600}`), 0o600)
	t.Setenv("FREEAGENT_HOST_SIGNALS", signals)
	doctor := func(extra ...string) (int, string) {
		var stdout, stderr bytes.Buffer
		code := run(append([]string{"doctor", "--data-dir", t.TempDir(), "--controller-url", url, "--vm-driver", "local", "--min-free-gb", "0"}, extra...),
			strings.NewReader(""), &stdout, &stderr)
		return code, stdout.String() + stderr.String()
	}
	line := func(out string) string {
		for l := range strings.SplitSeq(out, "\n") {
			if strings.Contains(l, "platforms") {
				return l
			}
		}
		return ""
	}

	toolchainHost(t, false)
	code, out := doctor()
	if l := line(out); code != 1 || !strings.HasPrefix(l, "✗ platforms   this worker takes no builds: not ios: ") ||
		!strings.Contains(l, "not android: this host has no JDK (java is not on the PATH and JAVA_HOME names none) and no Android SDK") ||
		!strings.Contains(out, "fix: ") || !strings.Contains(out, "install JDK 17 and the Android SDK and set ANDROID_HOME") {
		t.Errorf("no toolchain: %d\n%s", code, out)
	}
	code, out = doctor("--platforms", "android")
	if l := line(out); code != 0 || !strings.HasPrefix(l, "✓ platforms   building android on this host (local driver) (android as set, though this host has no JDK") {
		t.Errorf("no toolchain, android set: %d\n%s", code, out)
	}

	toolchainHost(t, true, "java")
	code, out = doctor()
	if l := line(out); code != 0 || !strings.HasPrefix(l, "! platforms   building android on this host (local driver); not ios: ") ||
		strings.Contains(l, "not android") || !strings.Contains(out, "fix: ") {
		t.Errorf("java and an Android SDK: %d\n%s", code, out)
	}
}
