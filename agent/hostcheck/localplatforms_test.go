package hostcheck

import (
	"errors"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"testing"
)

func TestLocalPlatforms(t *testing.T) {
	found := func(string) (string, error) { return "/usr/bin/xcodebuild", nil }
	missing := func(string) (string, error) { return "", exec.ErrNotFound }
	for _, c := range []struct {
		name       string
		configured []string
		goos       string
		lookPath   func(string) (string, error)
		want       []string
		severity   Severity
		says       string
	}{
		{"linux, default", nil, "linux", found, []string{"android"}, Warn, "not advertising ios: builds run on this linux host"},
		{"linux, ios asked for", []string{"ios", "android"}, "linux", found, []string{"android"}, Warn, "advertising android"},
		{"linux, ios only", []string{"ios"}, "linux", found, nil, Fail, "takes no builds"},
		{"linux, android", []string{"android"}, "linux", missing, []string{"android"}, OK, "building android"},
		{"mac without Xcode", nil, "darwin", missing, []string{"android"}, Warn, "no xcodebuild"},
		{"mac with Xcode", nil, "darwin", found, []string{"ios", "android"}, OK, "building ios, android"},
	} {
		got, r := LocalPlatforms(c.configured, c.goos, c.lookPath)
		if !slices.Equal(got, c.want) || r.Severity != c.severity || !strings.Contains(r.Message, c.says) || r.ID != IDPlatforms {
			t.Errorf("%s: %v %+v; want %v %s %q", c.name, got, r, c.want, c.severity, c.says)
		}
	}
	// On this very host, with the real PATH: iOS only where xcodebuild is.
	got, _ := LocalPlatforms(nil, runtime.GOOS, exec.LookPath)
	_, err := exec.LookPath("xcodebuild")
	canIOS := runtime.GOOS == "darwin" && !errors.Is(err, exec.ErrNotFound) && err == nil
	if slices.Contains(got, "ios") != canIOS {
		t.Errorf("this host (%s, xcodebuild: %v) advertises %v", runtime.GOOS, err, got)
	}
}
