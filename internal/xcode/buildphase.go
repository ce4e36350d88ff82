package xcode

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"strings"
)

// ShellScriptPhase is a PBXShellScriptBuildPhase of a target, what Xcode
// runs as a "Run Script" build phase.
type ShellScriptPhase struct {
	ID          string
	Name        string
	ShellPath   string // "/bin/sh" when the project leaves it out, as Xcode
	Script      string
	InputPaths  []string // as written: build setting references unexpanded
	OutputPaths []string
	// InstallOnly is runOnlyForDeploymentPostprocessing: the phase runs
	// only when installing (archive), never in a plain build.
	InstallOnly bool
}

// ShellScriptPhases returns target's run script phases in the order of
// its buildPhases.
func (p *Project) ShellScriptPhases(target string) ([]ShellScriptPhase, error) {
	t, err := p.findTarget(target)
	if err != nil {
		return nil, err
	}
	var out []ShellScriptPhase
	for _, id := range t.node.get("buildPhases").strings() {
		o := p.object(id)
		if o == nil || o.getString("isa") != "PBXShellScriptBuildPhase" {
			continue
		}
		ph := ShellScriptPhase{ID: id, Name: o.getString("name"), ShellPath: o.getString("shellPath"), Script: o.getString("shellScript"),
			InputPaths: o.get("inputPaths").strings(), OutputPaths: o.get("outputPaths").strings(),
			InstallOnly: o.getString("runOnlyForDeploymentPostprocessing") == "1"}
		if ph.ShellPath == "" {
			ph.ShellPath = "/bin/sh"
		}
		if ph.Name == "" {
			ph.Name = "Run Script"
		}
		out = append(out, ph)
	}
	return out, nil
}

// ResourcePaths returns the files of target's Copy Bundle Resources
// phases (PBXResourcesBuildPhase), relative to the project's directory as
// fileRefPath places them; a reference that cannot be placed is left out.
func (p *Project) ResourcePaths(target string) ([]string, error) {
	t, err := p.findTarget(target)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, id := range t.node.get("buildPhases").strings() {
		o := p.object(id)
		if o == nil || o.getString("isa") != "PBXResourcesBuildPhase" {
			continue
		}
		for _, fileID := range o.get("files").strings() {
			bf := p.object(fileID)
			if bf == nil {
				continue
			}
			if path := p.fileRefPath(bf.getString("fileRef")); path != "" {
				out = append(out, path)
			}
		}
	}
	return out, nil
}

// ExpandSettings expands the build setting references in value ($(VAR),
// ${VAR}, with Xcode's modifiers) through lookup, as BundleID does; an
// unknown setting expands to "".
func ExpandSettings(value string, lookup func(string) string) string {
	return resolveSetting(value, lookup, 0)
}

// fileRefPath is the path of a PBXFileReference relative to the
// project's directory (SRCROOT), following its groups as Xcode does;
// absolute for sourceTree "<absolute>", "" when it cannot be placed.
func (p *Project) fileRefPath(id string) string {
	parent := map[string]string{}
	for _, e := range p.objects.entries {
		if e.val.kind != kindDict {
			continue
		}
		switch e.val.getString("isa") {
		case "PBXGroup", "PBXVariantGroup", "XCVersionGroup":
			for _, c := range e.val.get("children").strings() {
				parent[c] = e.key.str
			}
		}
	}
	var parts []string
	for cur, depth := id, 0; cur != "" && depth < maxDepth; cur, depth = parent[cur], depth+1 {
		o := p.object(cur)
		if o == nil {
			return ""
		}
		path := o.getString("path")
		switch o.getString("sourceTree") {
		case "<group>", "":
			if path != "" {
				parts = append([]string{path}, parts...)
			}
		case "<absolute>", "SOURCE_ROOT": // SOURCE_ROOT: relative to the project's directory already
			return filepath.Join(append([]string{path}, parts...)...)
		default: // SDKROOT, BUILT_PRODUCTS_DIR…: nothing in the source tree
			return ""
		}
	}
	return filepath.Join(parts...)
}

// BaseConfigurationPath is the .xcconfig file target's configuration is
// based on (its baseConfigurationReference, what CocoaPods sets), relative
// to the project's directory; "" when it has none. An empty target names
// the project level.
func (p *Project) BaseConfigurationPath(target, configuration string) (string, error) {
	c, err := p.levelConfiguration(target, configuration)
	if err != nil || c == nil {
		return "", err
	}
	ref := c.getString("baseConfigurationReference")
	if ref == "" {
		return "", nil
	}
	path := p.fileRefPath(ref)
	if path == "" {
		return "", fmt.Errorf("the base configuration %s of %q (%s) is not a file of the project", ref, target, configuration)
	}
	return path, nil
}

// levelConfiguration is target's XCBuildConfiguration named
// configuration, or the project's when target is "" (nil when the
// project has none).
func (p *Project) levelConfiguration(target, configuration string) (*node, error) {
	if target != "" {
		return p.buildConfiguration(target, configuration)
	}
	_, proj := p.rootProject()
	if proj == nil {
		return nil, nil
	}
	for _, c := range p.configurations(proj.getString("buildConfigurationList")) {
		if c.getString("name") == configuration {
			return c, nil
		}
	}
	return nil, nil
}

// objectID makes a 24-digit object id from seed, as Xcode's ids look;
// the same seed gives the same id, so a repeated edit does not pile up
// objects.
func objectID(seed string) string {
	sum := sha1.Sum([]byte(seed))
	return strings.ToUpper(hex.EncodeToString(sum[:12]))
}

// SetBaseConfiguration bases target's configuration on the .xcconfig at
// path (relative to the project's directory), as CocoaPods integrates a
// user project: a file reference in a group named after the path's first
// element ("Pods") under the main group, and the configuration's
// baseConfigurationReference. It returns false, changing nothing, when
// the configuration is already based on another file (CocoaPods then
// warns and leaves it).
func (p *Project) SetBaseConfiguration(target, configuration, path string) (bool, error) {
	current, err := p.BaseConfigurationPath(target, configuration)
	if err != nil {
		return false, err
	}
	if current == filepath.Clean(path) {
		return true, nil
	}
	if current != "" {
		return false, nil
	}
	groupName, rest, ok := strings.Cut(filepath.ToSlash(path), "/")
	if !ok {
		return false, fmt.Errorf("the base configuration %q must be in a folder of the project's directory", path)
	}
	_, proj := p.rootProject()
	if proj == nil {
		return false, fmt.Errorf("the Xcode project has no PBXProject object")
	}
	groupID, refID := objectID("group "+groupName), objectID("file "+path)
	if p.object(groupID) == nil {
		main := proj.getString("mainGroup")
		if p.object(main) == nil {
			return false, fmt.Errorf("the Xcode project has no main group")
		}
		if err := p.setKey(p.objects, groupID, fmt.Sprintf("{isa = PBXGroup; children = (); name = %s; path = %s; sourceTree = \"<group>\"; }", quote(groupName), quote(groupName)), false); err != nil {
			return false, err
		}
		if err := p.appendItem(p.object(main).get("children"), groupID); err != nil {
			return false, err
		}
	}
	if p.object(refID) == nil {
		if err := p.setKey(p.objects, refID, fmt.Sprintf("{isa = PBXFileReference; includeInIndex = 1; lastKnownFileType = text.xcconfig; name = %s; path = %s; sourceTree = \"<group>\"; }", quote(filepath.Base(path)), quote(rest)), false); err != nil {
			return false, err
		}
		if err := p.appendItem(p.object(groupID).get("children"), refID); err != nil {
			return false, err
		}
	}
	c, err := p.levelConfiguration(target, configuration)
	if err != nil {
		return false, err
	}
	return true, p.setKey(c, "baseConfigurationReference", refID, false)
}

// appendItem appends a string to an array, one item a line when the
// array is laid out so (as Xcode writes lists).
func (p *Project) appendItem(arr *node, item string) error {
	if arr == nil || arr.kind != kindArray {
		return fmt.Errorf("cannot add %s: not an array", item)
	}
	closing := arr.end - 1 // the ')'
	ls := closing
	for ls > 0 && (p.data[ls-1] == ' ' || p.data[ls-1] == '\t') {
		ls--
	}
	if ls > 0 && p.data[ls-1] == '\n' {
		indent := string(p.data[ls:closing]) + "\t"
		return p.splice(ls, ls, indent+quote(item)+",\n")
	}
	sep := ""
	if n := len(arr.items); n > 0 && !strings.Contains(string(p.data[arr.items[n-1].end:closing]), ",") {
		sep = ", "
	}
	return p.splice(closing, closing, sep+quote(item)+", ")
}
