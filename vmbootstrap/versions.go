package vmbootstrap

import (
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/internal/appversion"
	"github.com/freeagent-build/freeagent/internal/xcode"
)

// The VM applies a remote-source build's build version, decided by the
// controller at the submit, where EAS Build does: in the app config
// before prebuild for a managed app (app.json), in the native files for a
// bare one (and for a managed app whose config only JavaScript can
// write). The local source needs nothing: expo-build bumped the files the
// archive holds.

// remoteBuildVersion is the build version to apply; "" when the project's
// own files decide. A remote-source spec without one is refused: the
// build is never made with a guessed number.
func (p *pipeline) remoteBuildVersion() (string, error) {
	v := p.spec.Versions
	if !v.Remote() {
		return "", nil
	}
	if err := api.CheckBuildVersion(p.spec.Platform, v.BuildVersion); err != nil {
		return "", fmt.Errorf("%w: the spec asks for the farm's build version but carries none the controller decided (%v); submit again with an up-to-date controller", errConfig, err)
	}
	return v.BuildVersion, nil
}

// versionsBeforePrebuild writes the build version into app.json before
// expo prebuild generates the native project from it; it reports whether
// it did (a dynamic config is left to versionsInNative).
func (p *pipeline) versionsBeforePrebuild() (bool, error) {
	bv, err := p.remoteBuildVersion()
	if bv == "" || err != nil || p.spec.App.ConfigSource != "app.json" {
		return false, err
	}
	var path string
	for _, name := range []string{"app.config.json", "app.json"} {
		if fileExists(filepath.Join(p.root, name)) {
			path = filepath.Join(p.root, name)
			break
		}
	}
	if path == "" {
		return false, nil
	}
	edit := appversion.AppJSONEdit{Path: []string{"ios", "buildNumber"}}
	edit.Value, _ = json.Marshal(bv) // a string always marshals
	if p.spec.Platform == api.PlatformAndroid {
		edit = appversion.AppJSONEdit{Path: []string{"android", "versionCode"}, Value: json.RawMessage(bv)}
	}
	if err := appversion.EditAppJSON(path, edit); err != nil {
		return false, fmt.Errorf("%w: set the build version in %s: %v", errConfig, filepath.Base(path), err)
	}
	fmt.Fprintf(p.runner.out, "\n▸ %s %s (remote version source) set in %s\n", api.BuildVersionName(p.spec.Platform), bv, filepath.Base(path))
	return true, nil
}

// androidVersionsInNative sets versionCode in android/app/build.gradle.
func (p *pipeline) androidVersionsInNative(dir string) error {
	bv, err := p.remoteBuildVersion()
	if bv == "" || err != nil {
		return err
	}
	gradle, err := appversion.GradleFile(dir)
	if err == nil {
		err = appversion.SetGradleVersions(gradle, bv, "")
	}
	if err != nil {
		return fmt.Errorf("%w: set versionCode %s (remote version source): %v", errConfig, bv, err)
	}
	fmt.Fprintf(p.runner.out, "\n▸ versionCode %s (remote version source) set in %s\n", bv, relOrDot(p.tree, gradle))
	return nil
}

// iosVersionsInNative sets CFBundleVersion in the Info.plist of each
// target the build signs (or, for the simulator, of the scheme's app).
func (p *pipeline) iosVersionsInNative(dir, scheme, config string) error {
	bv, err := p.remoteBuildVersion()
	if bv == "" || err != nil {
		return err
	}
	xcodeproj, err := xcode.FindProject(dir)
	if err != nil {
		return fmt.Errorf("%w: %v", errConfig, err)
	}
	proj, err := xcode.LoadProject(xcodeproj)
	if err != nil {
		return fmt.Errorf("%w: %v", errConfig, err)
	}
	targets, err := p.signedTargetNames(proj, xcodeproj, scheme)
	if err != nil {
		return err
	}
	plists, err := appversion.InfoPlists(dir, xcodeproj, targets, config)
	if err != nil {
		return fmt.Errorf("%w: set buildNumber %s (remote version source): %v", errConfig, bv, err)
	}
	for _, pl := range plists {
		if err := pl.SetVersions(bv, ""); err != nil {
			return fmt.Errorf("%w: set buildNumber %s (remote version source): %v", errConfig, bv, err)
		}
		fmt.Fprintf(p.runner.out, "\n▸ CFBundleVersion %s (remote version source) set in %s\n", bv, relOrDot(p.tree, pl.Path))
	}
	return nil
}
