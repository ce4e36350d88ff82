package cli

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/internal/toolchain"
)

// resourceClasses are eas.json's resource classes as the least a worker's
// build VM must have (CPU cores, GB of memory), by platform; "default" asks
// nothing. EAS's medium and large (Android), m-medium and large (iOS, and
// their deprecated names) keep their order: large needs the bigger worker.
var resourceClasses = map[string]map[string][2]int{
	api.PlatformAndroid: {"medium": {4, 16}, "large": {8, 32}},
	api.PlatformIOS: {"medium": {4, 8}, "m-medium": {4, 8}, "m1-medium": {4, 8},
		"large": {8, 16}, "m-large": {8, 16}},
}

// sdkXcode is the Xcode major version of EAS's iOS image for each Expo
// SDK (image "sdk-NN").
var sdkXcode = map[int]string{49: "15", 50: "15", 51: "15", 52: "16", 53: "16", 54: "26", 55: "26"}

var (
	sdkImageRe     = regexp.MustCompile(`^sdk-([0-9]+)$`)
	easIOSImageRe  = regexp.MustCompile(`^macos-.+-xcode-([0-9]+(?:\.[0-9]+)*)$`)
	easNDKImageRe  = regexp.MustCompile(`^ubuntu-.+-ndk-r([0-9]+)([a-z]?)$`)
	iosPinnedTools = []string{toolchain.Cocoapods, toolchain.Bundler, toolchain.Fastlane}
)

// requirements derives what a worker must offer to run the profile: its
// resourceClass (CPU and memory), image (a template by name, or an Xcode
// or NDK version) and tool pins (node; Android's ndk; iOS's cocoapods,
// bundler, fastlane), each as docs/build-spec.md ("Workers") defines it.
// offers is asked only for image "latest". nil: any worker of the
// platform. yarn, pnpm, bun and corepack need no worker: the install step
// sets up the pinned version (vmbootstrap.InstallCommands).
func requirements(ctx context.Context, p api.BuildProfile, platform string, offers func(context.Context) ([]api.Offer, error)) (*api.Requirements, error) {
	var r api.Requirements
	if rc := p.ResourceClass; rc != "" && rc != "default" {
		size, ok := resourceClasses[platform][rc]
		if !ok {
			return nil, usageErr("eas.json: resourceClass %q is not one EAS has for %s builds", rc, platform)
		}
		r.CPUCores, r.MemoryGB = size[0], size[1]
	}
	tool := func(name, version string) {
		if version = strings.TrimPrefix(strings.TrimSpace(version), "v"); version != "" {
			if r.Tools == nil {
				r.Tools = map[string]string{}
			}
			r.Tools[name] = version
		}
	}
	switch image := p.Image; {
	case image == "" || image == "default" || image == "auto":
	case image == "latest":
		if platform == api.PlatformIOS {
			newest, err := newestXcode(ctx, offers)
			if err != nil {
				return nil, err
			}
			r.Xcode = newest
		}
	case sdkImageRe.MatchString(image):
		n, _ := strconv.Atoi(sdkImageRe.FindStringSubmatch(image)[1])
		xcode, ok := sdkXcode[n]
		switch {
		case !ok:
			known := make([]string, 0, len(sdkXcode))
			for sdk := range sdkXcode {
				known = append(known, "sdk-"+strconv.Itoa(sdk))
			}
			slices.Sort(known)
			return nil, usageErr("eas.json: image %q names an Expo SDK this expo-build does not know; use one of %s, latest, or an image by name", image, strings.Join(known, ", "))
		case platform == api.PlatformIOS:
			r.Xcode = xcode
		}
	case easIOSImageRe.MatchString(image) && platform == api.PlatformIOS:
		r.Xcode = easIOSImageRe.FindStringSubmatch(image)[1]
	case easNDKImageRe.MatchString(image) && platform == api.PlatformAndroid:
		m := easNDKImageRe.FindStringSubmatch(image)
		minor := 0
		if m[2] != "" {
			minor = int(m[2][0] - 'a')
		}
		tool(toolchain.NDK, m[1]+"."+strconv.Itoa(minor))
	default:
		r.Image = image
	}
	tool(toolchain.Node, p.Node)
	if platform == api.PlatformAndroid {
		tool(toolchain.NDK, p.Ndk) // an explicit pin over the image's NDK
	}
	if platform == api.PlatformIOS {
		for i, v := range []string{p.Cocoapods, p.Bundler, p.Fastlane} {
			tool(iosPinnedTools[i], v)
		}
	}
	if r.CPUCores == 0 && r.MemoryGB == 0 && r.Image == "" && r.Xcode == "" && len(r.Tools) == 0 {
		return nil, nil
	}
	return &r, nil
}

// newestXcode is the newest Xcode the farm's online iOS workers report.
func newestXcode(ctx context.Context, offers func(context.Context) ([]api.Offer, error)) (string, error) {
	list, err := offers(ctx)
	if err != nil {
		return "", err
	}
	newest := ""
	for _, o := range list {
		if slices.Contains(o.Platforms, api.PlatformIOS) && o.XcodeVersion != "" &&
			(newest == "" || toolchain.CmpVersions(newest, o.XcodeVersion) < 0) {
			newest = o.XcodeVersion
		}
	}
	if newest == "" {
		return "", usageErr("eas.json: image \"latest\" builds with the newest Xcode the farm has, but no online iOS worker reports its Xcode (a template built by scripts/build-vm-template.sh does); remove image or set \"default\"%s", describeOffers(list, api.PlatformIOS))
	}
	return newest, nil
}

// checkOffered refuses, before the upload, a build no online worker of
// its platform can run, naming what the farm offers.
func checkOffered(ctx context.Context, spec api.BuildSpec, offers func(context.Context) ([]api.Offer, error)) error {
	if spec.Requires == nil {
		return nil
	}
	list, err := offers(ctx)
	if err != nil {
		return err
	}
	for _, o := range list {
		if slices.Contains(o.Platforms, spec.Platform) && len(spec.Requires.Unmet(o.Capabilities())) == 0 {
			return nil
		}
	}
	return &cliError{code: ExitUsage,
		msg: fmt.Sprintf("eas.json: build profile %q needs a %s worker with %s (%s), and no online worker of project %q's pools has it: nothing was uploaded%s",
			spec.ProfileName, spec.Platform, spec.Requires, profileKeys(spec.Profile), spec.BuildProject(), describeOffers(list, spec.Platform)),
		hint: "change or remove those keys in eas.json, or bring a worker that has them online (scripts/build-vm-template.sh --node installs Node.js versions; `freeagent run --cpu/--memory-mb` sizes its VMs)"}
}

// profileKeys names the profile's keys that make requirements.
func profileKeys(p api.BuildProfile) string {
	var out []string
	for _, kv := range [][2]string{{"resourceClass", p.ResourceClass}, {"image", p.Image}, {"node", p.Node}, {"ndk", p.Ndk},
		{"cocoapods", p.Cocoapods}, {"bundler", p.Bundler}, {"fastlane", p.Fastlane}} {
		if kv[1] != "" {
			out = append(out, fmt.Sprintf("%s %q", kv[0], kv[1]))
		}
	}
	return strings.Join(out, ", ")
}

// describeOffers lists what the online workers of platform offer.
func describeOffers(list []api.Offer, platform string) string {
	var b strings.Builder
	for _, o := range list {
		if !slices.Contains(o.Platforms, platform) {
			continue
		}
		fmt.Fprintf(&b, "\n    %d × %d CPU cores, %d GB", o.Workers, o.CPUCores, o.MemoryGB)
		if o.Image != "" {
			fmt.Fprintf(&b, ", image %s", o.Image)
		}
		if o.XcodeVersion != "" {
			fmt.Fprintf(&b, ", Xcode %s", o.XcodeVersion)
		}
		for _, name := range toolchain.Names {
			if vs := o.Tools[name]; len(vs) > 0 {
				fmt.Fprintf(&b, ", %s %s", name, strings.Join(vs, "/"))
			}
		}
	}
	if b.Len() == 0 {
		return fmt.Sprintf("\n  The farm has no online %s worker.", platform)
	}
	return fmt.Sprintf("\n  The farm's online %s workers offer:%s", platform, b.String())
}
