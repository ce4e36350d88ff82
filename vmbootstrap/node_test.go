package vmbootstrap

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/internal/toolchain"
)

// TestNodeIsChosenAmongInstalledVersions: a template with several Node.js
// versions (nvm's under HOME, Homebrew's kegs) builds with the one eas.json names,
// put first on PATH; it fails only when none matches.
func TestNodeIsChosenAmongInstalledVersions(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	pathBin := t.TempDir() // the node first on PATH: 24
	writeExecutable(t, filepath.Join(pathBin, "node"), "#!/bin/sh\necho v24.11.1\n")
	brew := t.TempDir() // HOMEBREW_PREFIX
	kegs := filepath.Join(brew, "opt")
	for v, dir := range map[string]string{
		"20.19.5": filepath.Join(home, ".nvm", "versions", "node", "v20.19.5", "bin"),
		"22.9.0":  filepath.Join(home, ".nvm", "versions", "node", "v22.9.0", "bin"),
		"22.21.1": filepath.Join(kegs, "node@22", "bin"),
	} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		writeExecutable(t, filepath.Join(dir, "node"), "#!/bin/sh\necho v"+v+"\n")
	}
	// Homebrew's unversioned node, a link to a keg: seen once.
	if err := os.Symlink("node@22", filepath.Join(kegs, "node")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		want, version string // version "": the build fails
		dir           string // first on PATH afterwards
	}{
		{"24.11.1", "24.11.1", pathBin},
		{"24", "24.11.1", pathBin},
		{"22", "22.21.1", filepath.Join(kegs, "node@22", "bin")}, // the newest 22, numerically
		{"22.9.0", "22.9.0", filepath.Join(home, ".nvm/versions/node/v22.9.0/bin")},
		{"v20.19", "20.19.5", filepath.Join(home, ".nvm/versions/node/v20.19.5/bin")},
		{"18.19.0", "", ""},
		{"2", "", ""}, // a prefix of components, not of characters
	} {
		p, out, _ := newTestPipeline(t, api.PlatformAndroid, map[string]string{"package.json": `{}`}, nil)
		p.runner.env = mergeEnv(p.runner.env, "HOME="+home, "HOMEBREW_PREFIX="+brew, "PATH="+pathBin+":"+toolchain.EnvValue(p.runner.env, "PATH"))
		p.spec.Profile.Node = c.want
		err := p.checkNode(context.Background())
		if c.version == "" {
			if !errors.Is(err, errConfig) || !strings.Contains(err.Error(), "20.19.5, 22.9.0, 22.21.1, 24.11.1") {
				t.Errorf("node %q: want a configuration error listing every installed version, got %v", c.want, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("node %q: %v", c.want, err)
			continue
		}
		if first := strings.SplitN(toolchain.EnvValue(p.runner.env, "PATH"), ":", 2)[0]; first != c.dir {
			t.Errorf("node %q: PATH starts with %s, want %s", c.want, first, c.dir)
		}
		if !strings.Contains(out.String(), "Node.js "+c.version) {
			t.Errorf("node %q: log %q does not name %s", c.want, out, c.version)
		}
	}
}

func TestNodeIsMissing(t *testing.T) {
	t.Parallel()
	p, _, _ := newTestPipeline(t, api.PlatformAndroid, map[string]string{"package.json": `{}`}, nil)
	p.runner.env = mergeEnv(p.runner.env, "HOME="+t.TempDir(), "HOMEBREW_PREFIX="+t.TempDir(), "PATH="+t.TempDir())
	p.spec.Profile.Node = "22"
	var tm *ToolMissingError
	if err := p.checkNode(context.Background()); !errors.As(err, &tm) {
		t.Fatalf("no node anywhere: %v", err)
	}
}

// TestToolPinsAreApplied: eas.json's ndk points the build at that NDK of
// the SDK (the newest match); cocoapods, bundler and fastlane must be the
// versions on the build's PATH. A pin the VM lacks fails the build,
// naming what it has.
func TestToolPinsAreApplied(t *testing.T) {
	t.Parallel()
	sdk := t.TempDir()
	for _, v := range []string{"26.3.11579264", "27.1.12297006", "27.0.12077973"} {
		if err := os.MkdirAll(filepath.Join(sdk, "ndk", v), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	p, out, _ := newTestPipeline(t, api.PlatformAndroid, map[string]string{"package.json": `{}`}, nil)
	p.runner.env = mergeEnv(p.runner.env, "ANDROID_HOME="+sdk)
	p.spec.Profile.Ndk = "27.1.12297006"
	if err := p.applyPins(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := toolchain.EnvValue(p.runner.env, "ANDROID_NDK_HOME"); got != filepath.Join(sdk, "ndk", "27.1.12297006") {
		t.Errorf("ANDROID_NDK_HOME = %q", got)
	}
	if !strings.Contains(out.String(), "Android NDK 27.1.12297006") {
		t.Errorf("log: %s", out)
	}
	p.spec.Profile.Ndk = "25.2.9519653"
	if err := p.applyPins(context.Background()); !errors.Is(err, errConfig) || !strings.Contains(err.Error(), "26.3.11579264, 27.0.12077973, 27.1.12297006") {
		t.Errorf("a missing NDK: %v", err)
	}

	bin := t.TempDir()
	writeExecutable(t, filepath.Join(bin, "pod"), "#!/bin/sh\necho 1.16.2\n")
	writeExecutable(t, filepath.Join(bin, "bundle"), "#!/bin/sh\necho Bundler version 2.5.11\n")
	ios, out, _ := newTestPipeline(t, api.PlatformIOS, map[string]string{"package.json": `{}`}, nil)
	ios.runner.env = mergeEnv(ios.runner.env, "PATH="+bin)
	ios.spec.Profile.Cocoapods, ios.spec.Profile.Bundler = "1.16.2", "2.5.11"
	if err := ios.applyPins(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "cocoapods 1.16.2") || !strings.Contains(out.String(), "bundler 2.5.11") {
		t.Errorf("log: %s", out)
	}
	ios.spec.Profile.Cocoapods = "1.15.2"
	if err := ios.applyPins(context.Background()); !errors.Is(err, errConfig) || !strings.Contains(err.Error(), "this VM has 1.16.2") {
		t.Errorf("another cocoapods: %v", err)
	}
	ios.spec.Profile.Cocoapods, ios.spec.Profile.Fastlane = "", "2.226.0"
	if err := ios.applyPins(context.Background()); !errors.Is(err, errConfig) || !strings.Contains(err.Error(), "no fastlane") {
		t.Errorf("no fastlane: %v", err)
	}
}
