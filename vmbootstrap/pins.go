package vmbootstrap

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/internal/toolchain"
)

// applyPins holds the VM to the tool versions the profile pins (node;
// Android's ndk; iOS's cocoapods, bundler, fastlane). EAS installs each
// pinned version; a VM template brings them preinstalled, so the build
// uses the installed version that matches and fails, naming what the VM
// has, when none does. The controller routes a build with pins only to a
// worker whose template reported them (spec.requires), so that failure
// means the template changed since. yarn, pnpm and bun are installed at
// their pinned version by the install step (InstallCommands).
func (p *pipeline) applyPins(ctx context.Context) error {
	if err := p.checkNode(ctx); err != nil {
		return err
	}
	prof := p.spec.Profile
	if prof.Ndk != "" && p.spec.Platform == api.PlatformAndroid {
		if err := p.pickNDK(prof.Ndk); err != nil {
			return err
		}
	}
	if p.spec.Platform == api.PlatformIOS {
		for _, pin := range []struct{ key, want, bin string }{
			{toolchain.Cocoapods, prof.Cocoapods, "pod"},
			{toolchain.Bundler, prof.Bundler, "bundle"},
			{toolchain.Fastlane, prof.Fastlane, "fastlane"},
		} {
			if pin.want == "" {
				continue
			}
			if err := p.checkTool(ctx, pin.key, pin.want, pin.bin); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkNode puts the profile's "node" first on the build's PATH: the
// node on PATH when it matches, else the newest installed match (nvm's,
// Homebrew's node@N kegs: see toolchain.NodeDirs) with its npm and npx.
func (p *pipeline) checkNode(ctx context.Context) error {
	want := strings.TrimPrefix(strings.TrimSpace(p.spec.Profile.Node), "v")
	if want == "" {
		return nil
	}
	nodes := toolchain.Nodes(ctx, p.runner.env)
	if len(nodes) == 0 {
		return &ToolMissingError{Step: Step{Argv: []string{"node", "--version"}}, Err: fmt.Errorf("%q: %w in the build's PATH nor in %s", "node", exec.ErrNotFound, strings.Join(toolchain.NodeDirPatterns(p.runner.env), ", "))}
	}
	onPath, _ := toolchain.LookPath("node", p.runner.env)
	var best *toolchain.NodeInstall
	var have []string
	for i, n := range nodes {
		have = append(have, n.Version)
		if !api.VersionMatches(want, n.Version) {
			continue
		}
		if i == 0 && onPath != "" {
			fmt.Fprintf(p.runner.out, "\n▸ Node.js %s, as eas.json asks\n", n.Version)
			return nil
		}
		if best == nil || toolchain.CmpVersions(best.Version, n.Version) < 0 {
			best = &nodes[i]
		}
	}
	if best == nil {
		return fmt.Errorf("%w: eas.json asks for node %s but this VM has Node.js %s; remove \"node\" from the profile or use a VM template with Node.js %s (scripts/build-vm-template.sh --node)", errConfig, want, sortedVersions(have), want)
	}
	p.runner.env = mergeEnv(p.runner.env, "PATH="+best.Dir+string(os.PathListSeparator)+toolchain.EnvValue(p.runner.env, "PATH"))
	fmt.Fprintf(p.runner.out, "\n▸ Node.js %s from %s, as eas.json asks\n", best.Version, best.Dir)
	return nil
}

// pickNDK points the build at the Android NDK the profile pins
// (ANDROID_NDK_HOME, ANDROID_NDK_ROOT), the newest installed match.
func (p *pipeline) pickNDK(want string) error {
	want = strings.TrimPrefix(want, "v")
	ndks := toolchain.NDKs(p.runner.env)
	best := ""
	for v := range ndks {
		if api.VersionMatches(want, v) && (best == "" || toolchain.CmpVersions(best, v) < 0) {
			best = v
		}
	}
	if best == "" {
		return fmt.Errorf("%w: eas.json asks for ndk %s but this VM's Android SDK has NDK %s; remove \"ndk\" from the profile or install it in the VM template (sdkmanager \"ndk;%s\")",
			errConfig, want, sortedVersions(slices.Collect(maps.Keys(ndks))), want)
	}
	p.runner.env = mergeEnv(p.runner.env, "ANDROID_NDK_HOME="+ndks[best], "ANDROID_NDK_ROOT="+ndks[best])
	fmt.Fprintf(p.runner.out, "\n▸ Android NDK %s, as eas.json asks\n", best)
	return nil
}

// checkTool holds the build to an iOS tool's pinned version: the one on
// the build's PATH must be it (a template has one of each).
func (p *pipeline) checkTool(ctx context.Context, key, want, bin string) error {
	want = strings.TrimPrefix(want, "v")
	path, err := toolchain.LookPath(bin, p.runner.env)
	if err != nil {
		return fmt.Errorf("%w: eas.json asks for %s %s but this VM has no %s; remove %q from the profile or install it in the VM template", errConfig, key, want, bin, key)
	}
	have, err := toolchain.Version(ctx, path, "--version")
	if err != nil {
		return fmt.Errorf("%w: eas.json asks for %s %s: %w", errConfig, key, want, err)
	}
	if !api.VersionMatches(want, have) {
		return fmt.Errorf("%w: eas.json asks for %s %s but this VM has %s; remove %q from the profile or use a VM template with %s %s", errConfig, key, want, have, key, key, want)
	}
	fmt.Fprintf(p.runner.out, "\n▸ %s %s, as eas.json asks\n", key, have)
	return nil
}

// sortedVersions lists versions in ascending order, once each, or "none".
func sortedVersions(vs []string) string {
	if len(vs) == 0 {
		return "none"
	}
	vs = slices.Clone(vs)
	slices.SortFunc(vs, toolchain.CmpVersions)
	return strings.Join(slices.Compact(vs), ", ")
}
