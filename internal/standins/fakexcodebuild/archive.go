package main

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/freeagent-build/freeagent/internal/plist"
	"github.com/freeagent-build/freeagent/internal/xcode"
)

// workspace is what the fake needs of an .xcworkspace.
type workspace struct {
	path     string
	name     string
	appProj  string // path of the app's .xcodeproj
	podsProj string // path of Pods.xcodeproj, "" when absent
}

func loadWorkspace(path string) (workspace, error) {
	if abs, err := filepath.Abs(path); err == nil {
		path = abs // Xcode gives the build absolute paths
	}
	data, err := os.ReadFile(filepath.Join(path, "contents.xcworkspacedata"))
	if err != nil {
		return workspace{}, fmt.Errorf("'%s' does not exist.", path)
	}
	var x struct {
		FileRefs []struct {
			Location string `xml:"location,attr"`
		} `xml:"FileRef"`
	}
	if err := xml.Unmarshal(data, &x); err != nil {
		return workspace{}, fmt.Errorf("the workspace file at '%s' is corrupted: %v", path, err)
	}
	w := workspace{path: path, name: strings.TrimSuffix(filepath.Base(path), ".xcworkspace")}
	base := filepath.Dir(path)
	for _, ref := range x.FileRefs {
		kind, loc, _ := strings.Cut(ref.Location, ":")
		if kind != "absolute" {
			loc = filepath.Join(base, loc)
		}
		if !strings.HasSuffix(loc, ".xcodeproj") {
			continue
		}
		if filepath.Base(loc) == "Pods.xcodeproj" {
			w.podsProj = loc
		} else if w.appProj == "" {
			w.appProj = loc
		}
	}
	if w.appProj == "" {
		return workspace{}, fmt.Errorf("the workspace named \"%s\" contains no project", w.name)
	}
	return w, nil
}

// signedTarget is a target of the archive with its resolved signing.
type signedTarget struct {
	target   xcode.Target
	bundleID string
	settings map[string]string
	profile  profile
}

// loadBuild reads the workspace, scheme and project of an archive or a
// build and returns the app target with its dependencies.
func loadBuild(inv invocation) (workspace, *xcode.Project, xcode.Scheme, []xcode.Target, string, error) {
	wsPath := inv.flags["-workspace"]
	if wsPath == "" {
		return workspace{}, nil, xcode.Scheme{}, nil, "", errors.New("the fake xcodebuild needs -workspace")
	}
	ws, err := loadWorkspace(wsPath)
	if err != nil {
		return ws, nil, xcode.Scheme{}, nil, "", err
	}
	name := inv.flags["-scheme"]
	if name == "" {
		return ws, nil, xcode.Scheme{}, nil, "", fmt.Errorf("The workspace named \"%s\" does not contain a scheme named \"\". The \"-list\" option can be used to find the names of the schemes in the workspace.", ws.name)
	}
	scheme, err := xcode.LoadScheme(ws.appProj, name)
	if err != nil {
		return ws, nil, xcode.Scheme{}, nil, "", fmt.Errorf("The workspace named \"%s\" does not contain a scheme named \"%s\". The \"-list\" option can be used to find the names of the schemes in the workspace.", ws.name, name)
	}
	p, err := xcode.LoadProject(ws.appProj)
	if err != nil {
		return ws, nil, scheme, nil, "", err
	}
	targets, err := xcode.AppTargets(p, scheme)
	if err != nil {
		return ws, nil, scheme, nil, "", err
	}
	configuration := inv.flags["-configuration"]
	if configuration == "" {
		configuration = scheme.ArchiveConfiguration
	}
	return ws, p, scheme, targets, configuration, nil
}

func archive(inv invocation, stdout, stderr io.Writer) int {
	fail := func(msgs ...string) int {
		for _, m := range msgs {
			fmt.Fprintf(stderr, "error: %s\n", m)
		}
		fmt.Fprintln(stdout, "\n** ARCHIVE FAILED **")
		return exitFailed
	}
	if d := inv.flags["-destination"]; d != "generic/platform=iOS" {
		return fail(fmt.Sprintf("the fake xcodebuild archives only for -destination generic/platform=iOS, not %q", d))
	}
	archivePath := inv.flags["-archivePath"]
	if archivePath == "" {
		return fail("the fake xcodebuild needs -archivePath")
	}
	ws, p, scheme, targets, configuration, err := loadBuild(inv)
	if err != nil {
		fmt.Fprintf(stderr, "xcodebuild: error: %v\n", err)
		return exitFailed
	}
	// Global signing settings reach every target, CocoaPods' too.
	if ws.podsProj != "" {
		for _, key := range []string{"PROVISIONING_PROFILE_SPECIFIER", "PROVISIONING_PROFILE", "CODE_SIGN_STYLE"} {
			if _, ok := inv.overrides[key]; !ok {
				continue
			}
			pods, err := xcode.LoadProject(ws.podsProj)
			if err != nil {
				return fail(err.Error())
			}
			name := inv.overrides["PROVISIONING_PROFILE_SPECIFIER"]
			if name == "" {
				name = inv.overrides["PROVISIONING_PROFILE"]
			}
			var msgs []string
			for _, t := range pods.Targets() {
				msgs = append(msgs, fmt.Sprintf("%s does not support provisioning profiles, but provisioning profile %s has been manually specified. Set the provisioning profile value to \"Automatic\" in the build settings editor. (in target '%s' from project 'Pods')", t.Name, name, t.Name))
			}
			if len(msgs) > 0 {
				return fail(msgs...)
			}
			break
		}
	}
	project := strings.TrimSuffix(filepath.Base(ws.appProj), ".xcodeproj")
	bc := newBuildContext(inv, ws, scheme.Name, configuration, "iphoneos", "install")
	installed := installedProfiles()
	var signed []signedTarget
	var msgs []string
	for _, t := range targets {
		in := fmt.Sprintf("(in target '%s' from project '%s')", t.Name, project)
		settings, err := bc.targetSettings(p, t)
		if err != nil {
			msgs = append(msgs, fmt.Sprintf("%v %s", err, in))
			continue
		}
		bundleID := settings["PRODUCT_BUNDLE_IDENTIFIER"]
		if bundleID == "" {
			msgs = append(msgs, fmt.Sprintf("target %q has no PRODUCT_BUNDLE_IDENTIFIER in its %q configuration; set the bundle identifier in Xcode %s", t.Name, configuration, in))
			continue
		}
		if settings["CODE_SIGN_STYLE"] != "Manual" {
			msgs = append(msgs, fmt.Sprintf("No profiles for '%s' were found: Xcode couldn't find any iOS App Development provisioning profiles matching '%s'. Automatic signing is disabled and unable to generate a profile. To enable automatic signing, pass -allowProvisioningUpdates to xcodebuild. %s", bundleID, bundleID, in))
			continue
		}
		team := settings["DEVELOPMENT_TEAM"]
		if team == "" {
			msgs = append(msgs, fmt.Sprintf("Signing for \"%s\" requires a development team. Select a development team in the Signing & Capabilities editor. %s", t.Name, in))
			continue
		}
		spec := settings["PROVISIONING_PROFILE_SPECIFIER"]
		if spec == "" {
			msgs = append(msgs, fmt.Sprintf("\"%s\" requires a provisioning profile. Select a provisioning profile in the Signing & Capabilities editor. %s", t.Name, in))
			continue
		}
		var found *profile
		for _, pr := range installed {
			if (pr.Name == spec || strings.EqualFold(pr.UUID, spec)) && pr.TeamID == team {
				found = &pr
				break
			}
		}
		if found == nil {
			msgs = append(msgs, fmt.Sprintf("No profile for team '%s' matching '%s' found: Xcode couldn't find any provisioning profiles matching '%s/%s'. Install the profile (by dragging and dropping it onto Xcode's dock item) or select a different one in the Signing & Capabilities tab of the target editor. %s", team, spec, team, spec, in))
			continue
		}
		if !found.Matches(bundleID) {
			msgs = append(msgs, fmt.Sprintf("Provisioning profile \"%s\" has app ID \"%s\", which does not match the bundle ID \"%s\". %s", found.Name, found.BundleID, bundleID, in))
			continue
		}
		{
			identity := settings["CODE_SIGN_IDENTITY"]
			switch ok, generic := found.signingCertificate(identity); {
			case !ok && generic:
				class := identityClass(identity)
				msgs = append(msgs, fmt.Sprintf("No signing certificate \"%s\" found: No \"%s\" signing certificate matching team ID \"%s\" with a private key was found. %s", class, class, team, in))
				continue
			case !ok:
				msgs = append(msgs, fmt.Sprintf("Provisioning profile \"%s\" doesn't include signing certificate \"%s\". %s", found.Name, identity, in))
				continue
			}
		}
		signed = append(signed, signedTarget{target: t, bundleID: bundleID, settings: settings, profile: *found})
	}
	if len(msgs) > 0 {
		return fail(msgs...)
	}
	products, err := bc.buildProducts(p, targets, stdout)
	if err != nil {
		return reportFailure(stdout, stderr, "ARCHIVE", err)
	}
	if err := writeArchive(archivePath, scheme.Name, products, signed); err != nil {
		return fail(err.Error())
	}
	fmt.Fprintln(stdout, "** ARCHIVE SUCCEEDED **")
	return 0
}

// writeArchive lays out an .xcarchive of the built products: the app
// (its extensions inside) with each signed bundle's profile embedded, an
// empty dSYMs and the archive's Info.plist.
func writeArchive(path, scheme string, products []product, signed []signedTarget) error {
	if err := os.RemoveAll(path); err != nil {
		return err
	}
	app := products[0]
	appDir := filepath.Join(path, "Products", "Applications", filepath.Base(app.dir))
	if err := os.CopyFS(appDir, os.DirFS(app.dir)); err != nil {
		return err
	}
	for _, st := range signed {
		dir := appDir
		if st.target.Name != app.target.Name {
			dir = filepath.Join(appDir, "PlugIns", st.settings["WRAPPER_NAME"])
		}
		data, err := os.ReadFile(st.profile.Path)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, "embedded.mobileprovision"), data, 0o644); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(filepath.Join(path, "dSYMs"), 0o755); err != nil {
		return err
	}
	var appInfo struct {
		ShortVersion string `plist:"CFBundleShortVersionString"`
		Version      string `plist:"CFBundleVersion"`
	}
	data, err := os.ReadFile(filepath.Join(appDir, "Info.plist"))
	if err != nil {
		return err
	}
	if _, err := plist.Unmarshal(data, &appInfo); err != nil {
		return err
	}
	identity := signed[0].settings["CODE_SIGN_IDENTITY"]
	info, err := plist.Marshal(map[string]any{
		"ApplicationProperties": map[string]any{
			"ApplicationPath":            "Applications/" + filepath.Base(app.dir),
			"CFBundleIdentifier":         signed[0].bundleID,
			"CFBundleShortVersionString": appInfo.ShortVersion,
			"CFBundleVersion":            appInfo.Version,
			"SigningIdentity":            identity,
			"Team":                       signed[0].profile.TeamID,
		},
		"ArchiveVersion": 2,
		"CreationDate":   time.Now().UTC(),
		"Name":           scheme,
		"SchemeName":     scheme,
	})
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(path, "Info.plist"), info, 0o644)
}

// buildSimulator is EAS's simulator build: no signing.
func buildSimulator(inv invocation, stdout, stderr io.Writer) int {
	dest, sdk := inv.flags["-destination"], inv.flags["-sdk"]
	if dest != "generic/platform=iOS Simulator" && sdk != "iphonesimulator" && !strings.Contains(dest, "platform=iOS Simulator") {
		fmt.Fprintf(stderr, "xcodebuild: error: the fake xcodebuild builds only for the simulator (-destination 'generic/platform=iOS Simulator' or -sdk iphonesimulator)\n")
		return exitUsage
	}
	ws, p, scheme, targets, configuration, err := loadBuild(inv)
	if err != nil {
		fmt.Fprintf(stderr, "xcodebuild: error: %v\n", err)
		return exitFailed
	}
	if inv.flags["-derivedDataPath"] == "" {
		fmt.Fprintln(stderr, "xcodebuild: error: the fake xcodebuild needs -derivedDataPath")
		return exitUsage
	}
	bc := newBuildContext(inv, ws, scheme.Name, configuration, "iphonesimulator", "build")
	if _, err := bc.buildProducts(p, targets, stdout); err != nil {
		return reportFailure(stdout, stderr, "BUILD", err)
	}
	fmt.Fprintln(stdout, "** BUILD SUCCEEDED **")
	return 0
}

// bundlesOf lists the bundle ids of an archive's app and its plug-ins,
// with their paths relative to the archive's Products/Applications.
func bundlesOf(archivePath string) (appName string, bundles map[string]string, err error) {
	apps, _ := filepath.Glob(filepath.Join(archivePath, "Products", "Applications", "*.app"))
	if len(apps) != 1 {
		return "", nil, fmt.Errorf("archive at path '%s' is malformed", archivePath)
	}
	bundles = map[string]string{}
	dirs := []string{apps[0]}
	exts, _ := filepath.Glob(filepath.Join(apps[0], "PlugIns", "*.appex"))
	dirs = append(dirs, exts...)
	for _, d := range dirs {
		var info struct {
			ID string `plist:"CFBundleIdentifier"`
		}
		data, err := os.ReadFile(filepath.Join(d, "Info.plist"))
		if err != nil {
			return "", nil, fmt.Errorf("archive at path '%s' is malformed: %v", archivePath, err)
		}
		if _, err := plist.Unmarshal(data, &info); err != nil {
			return "", nil, err
		}
		rel, _ := filepath.Rel(filepath.Dir(apps[0]), d)
		bundles[info.ID] = rel
	}
	return filepath.Base(apps[0]), bundles, nil
}

// sortedKeys returns a map's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
