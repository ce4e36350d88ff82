package cli

import (
	"context"
	"testing"

	"github.com/freeagent-build/freeagent/api"
)

// TestRequirementsOfEASKeys: each resourceClass, image and pin has the
// meaning docs/build-spec.md ("Workers") gives it.
func TestRequirementsOfEASKeys(t *testing.T) {
	t.Parallel()
	offers := func(context.Context) ([]api.Offer, error) {
		return []api.Offer{{Platforms: []string{"ios"}, XcodeVersion: "16.4"}, {Platforms: []string{"ios"}, XcodeVersion: "26.1"},
			{Platforms: []string{"android"}, XcodeVersion: "99.0"}}, nil
	}
	for _, c := range []struct {
		platform string
		profile  api.BuildProfile
		want     string
	}{
		{"ios", api.BuildProfile{ResourceClass: "default", Image: "default"}, "nothing"},
		{"android", api.BuildProfile{Image: "auto"}, "nothing"},
		{"android", api.BuildProfile{Image: "latest"}, "nothing"},
		{"android", api.BuildProfile{Image: "sdk-55"}, "nothing"},
		{"ios", api.BuildProfile{ResourceClass: "m-medium"}, "4 CPU cores, 8 GB of memory"},
		{"ios", api.BuildProfile{ResourceClass: "large"}, "8 CPU cores, 16 GB of memory"},
		{"android", api.BuildProfile{ResourceClass: "medium"}, "4 CPU cores, 16 GB of memory"},
		{"android", api.BuildProfile{ResourceClass: "large"}, "8 CPU cores, 32 GB of memory"},
		{"ios", api.BuildProfile{Image: "latest"}, "Xcode 26.1"},
		{"ios", api.BuildProfile{Image: "sdk-55"}, "Xcode 26"},
		{"ios", api.BuildProfile{Image: "sdk-52"}, "Xcode 16"},
		{"ios", api.BuildProfile{Image: "macos-sequoia-15.5-xcode-16.4"}, "Xcode 16.4"},
		{"android", api.BuildProfile{Image: "ubuntu-24.04-jdk-17-ndk-r27b"}, "ndk 27.1"},
		{"android", api.BuildProfile{Image: "ubuntu-22.04-jdk-17-ndk-r26", Ndk: "26.3.11579264"}, "ndk 26.3.11579264"},
		{"android", api.BuildProfile{Image: "ghcr.io/acme/freeagent-template:2"}, "image ghcr.io/acme/freeagent-template:2"},
		{"ios", api.BuildProfile{Node: "v20.19.4", Cocoapods: "1.16.2", Bundler: "2.5.11", Fastlane: "2.226.0", Yarn: "4.5.0"},
			"bundler 2.5.11, cocoapods 1.16.2, fastlane 2.226.0, node 20.19.4"},
		{"android", api.BuildProfile{Ndk: "27.1.12297006", Cocoapods: "1.16.2"}, "ndk 27.1.12297006"},
	} {
		r, err := requirements(context.Background(), c.profile, c.platform, offers)
		if err != nil {
			t.Errorf("%s %+v: %v", c.platform, c.profile, err)
			continue
		}
		if got := r.String(); got != c.want {
			t.Errorf("%s %+v: requires %q, want %q", c.platform, c.profile, got, c.want)
		}
	}
	if _, err := requirements(context.Background(), api.BuildProfile{Image: "sdk-12"}, "ios", offers); err == nil {
		t.Error("image sdk-12: no error")
	}
}
