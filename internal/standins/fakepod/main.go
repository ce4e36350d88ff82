// Command fakepod stands in for CocoaPods' `pod install`, which needs
// Ruby, the CocoaPods gem and the pods' downloads, for tests that build
// the real `expo prebuild` Xcode project with the stand-in xcodebuild
// (internal/standins/fakexcodebuild).
//
// It reads the real ios/Podfile: its `require` lines run their
// backtick commands as Ruby would (so a missing node_modules fails as
// it fails with CocoaPods), its `target 'Name' do` blocks name the
// targets to integrate, and Podfile.properties.json tells whether
// Hermes is the engine. It writes what the real install leaves that the
// build reads: <Project>.xcworkspace with the app's and the Pods
// project, Pods/Pods.xcodeproj with the aggregate target Pods-<Target>,
// the target's xcconfig per build configuration (PODS_ROOT and the other
// locations, and HERMES_CLI_PATH as hermes-engine's podspec sets it,
// pointing at the hermesc of the hermes-compiler npm package built for
// this machine's OS), Pods-<Target>-resources.sh, Podfile.lock and
// Pods/Manifest.lock, and integrates the app's project as CocoaPods
// does (each configuration based on its xcconfig). No pod is fetched or
// compiled: the Pods' resource bundles are missing from the app.
package main

import (
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"

	"github.com/freeagent-build/freeagent/internal/xcode"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// podError is a failure CocoaPods reports with "[!]" and exit status 1.
type podError string

func (e podError) Error() string { return string(e) }

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "install" {
		fmt.Fprintf(stderr, "[!] Free Agent's stand-in pod runs only `pod install`, not `pod %s`\n", strings.Join(args, " "))
		return 1
	}
	for _, a := range args[1:] {
		switch a {
		case "--verbose", "--deployment", "--repo-update", "--no-repo-update":
		default:
			fmt.Fprintf(stderr, "[!] Unknown option: `%s`\n", a)
			return 1
		}
	}
	dir, err := os.Getwd()
	if err == nil {
		err = install(dir, stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "[!] %v\n", err)
		return 1
	}
	return 0
}

var (
	reTarget = regexp.MustCompile(`(?m)^\s*target\s+['"]([^'"]+)['"]\s+do\b`)
	// require File.join(File.dirname(`cmd`), "rel"), as Expo's template
	// loads its autolinking and React Native's pod scripts.
	reRequire = regexp.MustCompile("(?m)^\\s*require\\s+File\\.join\\(File\\.dirname\\(`([^`]+)`\\),\\s*['\"]([^'\"]+)['\"]\\)")
)

// podfile is what the stand-in reads of a Podfile.
type podfile struct {
	text    string
	targets []string
	hermes  bool
}

func readPodfile(dir string) (podfile, error) {
	b, err := os.ReadFile(filepath.Join(dir, "Podfile"))
	if errors.Is(err, os.ErrNotExist) {
		return podfile{}, podError("No `Podfile' found in the project directory.")
	}
	if err != nil {
		return podfile{}, err
	}
	pf := podfile{text: string(b), hermes: true}
	for _, m := range reRequire.FindAllStringSubmatch(pf.text, -1) {
		// A failing backtick command gives Ruby its output, "" (no
		// exception): File.dirname("") is ".", and the require fails.
		out, _ := shell(dir, m[1])
		file := filepath.Dir(out) + "/" + m[2]
		if !filepath.IsAbs(file) {
			file = filepath.Join(dir, file)
		}
		if _, err := os.Stat(file + ".rb"); err != nil {
			return pf, podError(fmt.Sprintf("Invalid `Podfile` file: cannot load such file -- %s.", file))
		}
	}
	for _, m := range reTarget.FindAllStringSubmatch(pf.text, -1) {
		pf.targets = append(pf.targets, m[1])
	}
	if len(pf.targets) == 0 {
		return pf, podError("The Podfile does not contain any targets: add `target 'YourApp' do … end`.")
	}
	// The template's Podfile enables Hermes unless
	// Podfile.properties.json says expo.jsEngine is "jsc".
	if b, err := os.ReadFile(filepath.Join(dir, "Podfile.properties.json")); err == nil {
		var props map[string]any
		if err := json.Unmarshal(b, &props); err != nil {
			return pf, podError(fmt.Sprintf("Invalid `Podfile` file: Podfile.properties.json: %v.", err))
		}
		pf.hermes = props["expo.jsEngine"] == nil || props["expo.jsEngine"] == "hermes"
	}
	return pf, nil
}

// shell runs a Podfile's backtick command as Ruby does (with /bin/sh in
// the Podfile's directory, its standard error passed through) and
// returns its output, trimmed.
func shell(dir, command string) (string, error) {
	cmd := exec.Command("/bin/sh", "-c", command)
	cmd.Dir, cmd.Stderr = dir, os.Stderr
	out, err := cmd.Output()
	return strings.TrimSpace(string(out)), err
}

func install(dir string, stdout io.Writer) error {
	pf, err := readPodfile(dir)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, "Analyzing dependencies (Free Agent's stand-in pod install: no pod is downloaded or built)")
	projects, _ := filepath.Glob(filepath.Join(dir, "*.xcodeproj"))
	switch {
	case len(projects) == 0:
		return podError("No Xcode project found, please specify one")
	case len(projects) > 1:
		return podError("Could not automatically select an Xcode project. Specify one in your Podfile like so:\n\n    project 'path/to/Project.xcodeproj'")
	}
	projPath := projects[0]
	proj, err := xcode.LoadProject(projPath)
	if err != nil {
		return err
	}
	hermesc := ""
	if pf.hermes {
		if hermesc, err = hermescPath(dir); err != nil {
			return err
		}
	}
	fmt.Fprintln(stdout, "Generating Pods project")
	pods := filepath.Join(dir, "Pods")
	var aggregates []string
	for _, target := range pf.targets {
		t, err := findTarget(proj, target)
		if err != nil {
			return err
		}
		name := "Pods-" + target
		aggregates = append(aggregates, name)
		support := filepath.Join(pods, "Target Support Files", name)
		if err := os.MkdirAll(support, 0o755); err != nil {
			return err
		}
		for _, c := range t.Configurations {
			file := filepath.Join(support, name+"."+strings.ToLower(c)+".xcconfig")
			if err := os.WriteFile(file, []byte(xcconfig(pods, hermesc)), 0o644); err != nil {
				return err
			}
		}
		resources := "#!/bin/sh\necho \"Free Agent's stand-in pod: the Pods' resource bundles are not built, none copied\"\n"
		if err := os.WriteFile(filepath.Join(support, name+"-resources.sh"), []byte(resources), 0o755); err != nil {
			return err
		}
	}
	if err := writePodsProject(filepath.Join(pods, "Pods.xcodeproj"), aggregates); err != nil {
		return err
	}
	sum := sha1.Sum([]byte(pf.text))
	lock := fmt.Sprintf("PODFILE CHECKSUM: %s\n\nCOCOAPODS: 1.16.2\n", hex.EncodeToString(sum[:]))
	for _, f := range []string{filepath.Join(dir, "Podfile.lock"), filepath.Join(pods, "Manifest.lock")} {
		if err := os.WriteFile(f, []byte(lock), 0o644); err != nil {
			return err
		}
	}

	fmt.Fprintln(stdout, "Integrating client project")
	for _, target := range pf.targets {
		t, _ := findTarget(proj, target)
		for _, c := range t.Configurations {
			rel := filepath.Join("Target Support Files", "Pods-"+target, "Pods-"+target+"."+strings.ToLower(c)+".xcconfig")
			ok, err := proj.SetBaseConfiguration(target, c, filepath.Join("Pods", rel))
			if err != nil {
				return err
			}
			if !ok {
				fmt.Fprintf(stdout, "[!] CocoaPods did not set the base configuration of your project because your project already has a custom config set. In order for CocoaPods integration to work at all, please either set the base configurations of the target `%s` to `%s` or include the `%s` in your build configuration (`%s`).\n", target, rel, rel, c)
			}
		}
	}
	if err := proj.Save(projPath); err != nil {
		return err
	}
	name := strings.TrimSuffix(filepath.Base(projPath), ".xcodeproj")
	ws := filepath.Join(dir, name+".xcworkspace")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		return err
	}
	data := fmt.Sprintf("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Workspace\n   version = \"1.0\">\n   <FileRef\n      location = \"group:%s.xcodeproj\">\n   </FileRef>\n   <FileRef\n      location = \"group:Pods/Pods.xcodeproj\">\n   </FileRef>\n</Workspace>\n", name)
	if err := os.WriteFile(filepath.Join(ws, "contents.xcworkspacedata"), []byte(data), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Pod installation complete! (stand-in: %d target(s) integrated, no pods installed)\n", len(pf.targets))
	return nil
}

func findTarget(p *xcode.Project, name string) (xcode.Target, error) {
	for _, t := range p.Targets() {
		if t.Name == name {
			return t, nil
		}
	}
	return xcode.Target{}, podError(fmt.Sprintf("Unable to find a target named `%s` in project", name))
}

// hermescPath is the hermesc hermes-engine's podspec points
// HERMES_CLI_PATH at: the hermes-compiler package that react-native
// resolves, its binary for this OS (the podspec names osx-bin).
func hermescPath(dir string) (string, error) {
	rn, err := shell(dir, `node --print "require.resolve('react-native/package.json')"`)
	if err != nil {
		return "", podError("React Native is not installed: `node --print \"require.resolve('react-native/package.json')\"` failed; run your package manager's install first.")
	}
	pkg, err := shell(dir, fmt.Sprintf(`node -p 'require.resolve("hermes-compiler", {paths: [%q]})'`, filepath.Dir(rn)))
	if err != nil {
		return "", podError("hermes-engine: the hermes-compiler package is not installed next to react-native.")
	}
	bin := "linux64-bin"
	if runtime.GOOS == "darwin" {
		bin = "osx-bin"
	}
	hermesc := filepath.Join(filepath.Dir(pkg), "hermesc", bin, "hermesc")
	if _, err := os.Stat(hermesc); err != nil {
		return "", podError(fmt.Sprintf("hermes-engine: %s is missing.", hermesc))
	}
	return hermesc, nil
}

// xcconfig is an aggregate target's xcconfig, the settings of CocoaPods'
// that the build's scripts read.
func xcconfig(pods, hermesc string) string {
	s := `GCC_PREPROCESSOR_DEFINITIONS = $(inherited) COCOAPODS=1
PODS_BUILD_DIR = ${BUILD_DIR}
PODS_CONFIGURATION_BUILD_DIR = ${PODS_BUILD_DIR}/$(CONFIGURATION)$(EFFECTIVE_PLATFORM_NAME)
PODS_PODFILE_DIR_PATH = ${SRCROOT}/.
PODS_ROOT = ${SRCROOT}/Pods
PODS_XCFRAMEWORKS_BUILD_DIR = $(PODS_CONFIGURATION_BUILD_DIR)/XCFrameworkIntermediates
USE_RECURSIVE_SCRIPT_INPUTS_IN_SCRIPT_PHASES = YES
`
	if hermesc != "" {
		rel, err := filepath.Rel(pods, hermesc)
		if err != nil {
			rel = hermesc
		}
		s += "HERMES_CLI_PATH = $(PODS_ROOT)/" + filepath.ToSlash(rel) + "\n"
	}
	return s
}

// writePodsProject writes a Pods project holding the aggregate targets
// (static libraries, as CocoaPods makes them).
func writePodsProject(path string, aggregates []string) error {
	var objects, targetIDs strings.Builder
	for i, name := range aggregates {
		id := fmt.Sprintf("FA0D0000000000000000%04X", 2*i+1)
		list := fmt.Sprintf("FA0D0000000000000000%04X", 2*i+2)
		fmt.Fprintf(&objects, "\t\t%s = {isa = PBXNativeTarget; buildConfigurationList = %s; buildPhases = (); dependencies = (); name = %q; productName = %q; productType = \"com.apple.product-type.library.static\"; };\n", id, list, name, name)
		fmt.Fprintf(&objects, "\t\t%s = {isa = XCConfigurationList; buildConfigurations = (); };\n", list)
		fmt.Fprintf(&targetIDs, "\t\t\t\t%s,\n", id)
	}
	text := "// !$*UTF8*$!\n{\n\tarchiveVersion = 1;\n\tclasses = {\n\t};\n\tobjectVersion = 54;\n\tobjects = {\n" + objects.String() +
		"\t\tFA0D0000000000000000FFFF = {isa = PBXProject; targets = (\n" + targetIDs.String() + "\t\t\t); };\n\t};\n\trootObject = FA0D0000000000000000FFFF;\n}\n"
	if err := os.MkdirAll(path, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(path, "project.pbxproj"), []byte(text), 0o644)
}
