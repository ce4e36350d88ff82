// Package xcode reads and edits the parts of an Xcode project that a
// build of an Expo / React Native app needs: the targets of
// project.pbxproj with their build settings and bundle identifiers,
// per-target manual signing, and the shared schemes. It behaves as
// @expo/config-plugins (IOSConfig.Target, IOSConfig.BuildScheme,
// IOSConfig.ProvisioningProfile, IOSConfig.XcodeUtils) and eas-cli do,
// because EAS Build is the specification of what a build signs; the
// differential tests in this package compare the two on many projects.
//
// The stand-in xcodebuild (internal/standins/fakexcodebuild) reads
// projects with this same package, so a parser bug could hide in both the
// code under test and the fake: the differential tests against
// @expo/config-plugins and its `xcode` parser are what guard the parser.
package xcode

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/freeagent-build/freeagent/internal/boundedfile"
)

// maxProjectSize bounds the read of a project.pbxproj; the largest real
// projects are a few MiB.
const maxProjectSize = 64 << 20

// Project is a parsed project.pbxproj that can be edited in place: edits
// splice the original text (comments, order and formatting of everything
// else are kept byte for byte).
type Project struct {
	data    []byte
	root    *node
	objects *node // the root's "objects" dict
}

// Target is a PBXNativeTarget of the project.
type Target struct {
	Name           string
	ProductType    string   // "com.apple.product-type.application", "...app-extension", ...
	Dependencies   []string // names of the targets it depends on (PBXTargetDependency → target)
	Configurations []string // its build configurations' names
}

// Product types EAS and config-plugins tell apart.
const (
	ProductTypeApplication  = "com.apple.product-type.application"
	ProductTypeAppExtension = "com.apple.product-type.app-extension"
	ProductTypeFramework    = "com.apple.product-type.framework"
)

// LoadProject reads and parses <xcodeproj>/project.pbxproj.
func LoadProject(xcodeproj string) (*Project, error) {
	path := filepath.Join(xcodeproj, "project.pbxproj")
	data, err := boundedfile.Read(path, maxProjectSize)
	var tooLarge *boundedfile.TooLargeError
	if errors.As(err, &tooLarge) {
		return nil, fmt.Errorf("%s is larger than %d MiB, which no real Xcode project is", path, maxProjectSize>>20)
	}
	if err != nil {
		return nil, fmt.Errorf("reading the Xcode project: %w", err)
	}
	p, err := ParseProject(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// ParseProject parses the text of a project.pbxproj. Errors give the
// line and column.
func ParseProject(data []byte) (*Project, error) {
	root, err := parsePlist(data)
	if err != nil {
		return nil, err
	}
	if root.kind != kindDict {
		return nil, errors.New("project.pbxproj: the top-level value is not a dictionary")
	}
	objects := root.get("objects")
	if objects == nil || objects.kind != kindDict {
		return nil, errors.New(`project.pbxproj: there is no "objects" dictionary; is this an Xcode project?`)
	}
	return &Project{data: data, root: root, objects: objects}, nil
}

// Bytes returns the project's current text.
func (p *Project) Bytes() []byte { return bytes.Clone(p.data) }

// Save writes the project back to <xcodeproj>/project.pbxproj, through a
// temporary file renamed over it so that a crash never leaves half a
// project.
func (p *Project) Save(xcodeproj string) error {
	path := filepath.Join(xcodeproj, "project.pbxproj")
	mode := os.FileMode(0o644)
	if fi, err := os.Stat(path); err == nil {
		mode = fi.Mode().Perm()
	}
	tmp, err := os.CreateTemp(xcodeproj, ".project.pbxproj.*")
	if err != nil {
		return fmt.Errorf("saving the Xcode project: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(p.data); err != nil {
		tmp.Close()
		return fmt.Errorf("saving the Xcode project: %w", err)
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return fmt.Errorf("saving the Xcode project: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("saving the Xcode project: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("saving the Xcode project: %w", err)
	}
	return nil
}

// object returns the object with the given id, nil when absent.
func (p *Project) object(id string) *node {
	o := p.objects.get(id)
	if o == nil || o.kind != kindDict {
		return nil
	}
	return o
}

// rootProject returns the PBXProject object and its id.
func (p *Project) rootProject() (string, *node) {
	id := p.root.getString("rootObject")
	if o := p.object(id); o != nil && o.getString("isa") == "PBXProject" {
		return id, o
	}
	for _, e := range p.objects.entries {
		if e.val.kind == kindDict && e.val.getString("isa") == "PBXProject" {
			return e.key.str, e.val
		}
	}
	return "", nil
}

// nativeTarget is a PBXNativeTarget with its id.
type nativeTarget struct {
	id   string
	node *node
}

// nativeTargets lists the PBXNativeTargets in the order of the
// PBXProject's targets, then any the PBXProject does not list in the
// order of the objects section.
func (p *Project) nativeTargets() []nativeTarget {
	var out []nativeTarget
	seen := map[string]bool{}
	if _, proj := p.rootProject(); proj != nil {
		for _, id := range proj.get("targets").strings() {
			if o := p.object(id); o != nil && o.getString("isa") == "PBXNativeTarget" && !seen[id] {
				seen[id] = true
				out = append(out, nativeTarget{id, o})
			}
		}
	}
	for _, e := range p.objects.entries {
		if e.val.kind == kindDict && e.val.getString("isa") == "PBXNativeTarget" && !seen[e.key.str] {
			seen[e.key.str] = true
			out = append(out, nativeTarget{e.key.str, e.val})
		}
	}
	return out
}

func (p *Project) findTarget(name string) (nativeTarget, error) {
	for _, t := range p.nativeTargets() {
		if t.node.getString("name") == name {
			return t, nil
		}
	}
	return nativeTarget{}, fmt.Errorf("there is no target %q in the Xcode project (its targets: %s)", name, strings.Join(p.targetNames(), ", "))
}

func (p *Project) targetNames() []string {
	var names []string
	for _, t := range p.nativeTargets() {
		names = append(names, t.node.getString("name"))
	}
	return names
}

// dependencyIDs resolves a target's PBXTargetDependency objects to the
// ids of the targets they name ("" for one naming no target of this
// project, e.g. a target of another project).
func (p *Project) dependencyIDs(t *node) []string {
	var ids []string
	for _, depID := range t.get("dependencies").strings() {
		dep := p.object(depID)
		ids = append(ids, dep.getString("target"))
	}
	return ids
}

// configurations returns the XCBuildConfigurations of a configuration
// list, in its order.
func (p *Project) configurations(listID string) []*node {
	list := p.object(listID)
	var out []*node
	for _, id := range list.get("buildConfigurations").strings() {
		if c := p.object(id); c != nil && c.getString("isa") == "XCBuildConfiguration" {
			out = append(out, c)
		}
	}
	return out
}

func (p *Project) toTarget(t nativeTarget) Target {
	out := Target{Name: t.node.getString("name"), ProductType: t.node.getString("productType")}
	for _, id := range p.dependencyIDs(t.node) {
		if d := p.object(id); d != nil && d.getString("isa") == "PBXNativeTarget" {
			out.Dependencies = append(out.Dependencies, d.getString("name"))
		}
	}
	for _, c := range p.configurations(t.node.getString("buildConfigurationList")) {
		out.Configurations = append(out.Configurations, c.getString("name"))
	}
	return out
}

// Targets returns the project's PBXNativeTargets in the project's order.
func (p *Project) Targets() []Target {
	var out []Target
	for _, t := range p.nativeTargets() {
		out = append(out, p.toTarget(t))
	}
	return out
}

// buildConfiguration finds a target's XCBuildConfiguration by name.
func (p *Project) buildConfiguration(target, configuration string) (*node, error) {
	t, err := p.findTarget(target)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, c := range p.configurations(t.node.getString("buildConfigurationList")) {
		if c.getString("name") == configuration {
			return c, nil
		}
		names = append(names, c.getString("name"))
	}
	return nil, fmt.Errorf("target %q has no build configuration %q (its configurations: %s)", target, configuration, strings.Join(names, ", "))
}

// settingsMap flattens a buildSettings dict: values unquoted, a list
// setting's items joined by spaces as Xcode expands them.
func settingsMap(settings *node) map[string]string {
	out := map[string]string{}
	if settings == nil || settings.kind != kindDict {
		return out
	}
	for _, e := range settings.entries {
		switch e.val.kind {
		case kindString:
			out[e.key.str] = e.val.str
		case kindArray:
			out[e.key.str] = strings.Join(e.val.strings(), " ")
		}
	}
	return out
}

// BuildSettings returns the buildSettings of target's configuration,
// values unquoted (list settings joined by spaces). Settings inherited
// from the project level are not included.
func (p *Project) BuildSettings(target, configuration string) (map[string]string, error) {
	c, err := p.buildConfiguration(target, configuration)
	if err != nil {
		return nil, err
	}
	return settingsMap(c.get("buildSettings")), nil
}

// ProjectBuildSettings returns the project-level buildSettings of the
// configuration (what every target inherits), empty when there is none.
func (p *Project) ProjectBuildSettings(configuration string) map[string]string {
	_, proj := p.rootProject()
	if proj == nil {
		return map[string]string{}
	}
	for _, c := range p.configurations(proj.getString("buildConfigurationList")) {
		if c.getString("name") == configuration {
			return settingsMap(c.get("buildSettings"))
		}
	}
	return map[string]string{}
}

// BundleID is PRODUCT_BUNDLE_IDENTIFIER of target/configuration with
// $(VAR), ${VAR}, $(VAR:rfc1034identifier) etc. resolved from the
// target's own settings, then the project-level configuration's (then
// TARGET_NAME), as getBundleIdentifierFromPbxproj does for the target's
// own; an unknown variable resolves to "" as in Xcode.
func (p *Project) BundleID(target, configuration string) (string, error) {
	settings, err := p.BuildSettings(target, configuration)
	if err != nil {
		return "", err
	}
	raw := settings["PRODUCT_BUNDLE_IDENTIFIER"]
	if raw == "" {
		return "", fmt.Errorf("target %q has no PRODUCT_BUNDLE_IDENTIFIER in its %q configuration; set the bundle identifier in Xcode", target, configuration)
	}
	projectLevel := p.ProjectBuildSettings(configuration)
	lookup := func(name string) string {
		if v, ok := settings[name]; ok {
			return v
		}
		if v, ok := projectLevel[name]; ok {
			return v
		}
		if name == "TARGET_NAME" {
			return target
		}
		return ""
	}
	id := resolveSetting(raw, lookup, 0)
	if id == "" {
		return "", fmt.Errorf("the PRODUCT_BUNDLE_IDENTIFIER %q of target %q (%s) resolves to nothing", raw, target, configuration)
	}
	return id, nil
}

// Signing is what SetManualSigning writes for a target.
type Signing struct {
	TeamID      string
	ProfileName string // PROVISIONING_PROFILE_SPECIFIER is the profile's name, as EAS sets it
	Identity    string // CODE_SIGN_IDENTITY; "" means "iPhone Distribution" as config-plugins does
}

// SetManualSigning does what config-plugins'
// setProvisioningProfileForPbxproj does for one target and one build
// configuration: the XCBuildConfiguration's buildSettings get
// CODE_SIGN_STYLE = Manual, DEVELOPMENT_TEAM, PROVISIONING_PROFILE_SPECIFIER
// and CODE_SIGN_IDENTITY, and the project's TargetAttributes for that
// target get DevelopmentTeam and ProvisioningStyle = Manual. Like it, it
// leaves other settings (e.g. "CODE_SIGN_IDENTITY[sdk=iphoneos*]") alone.
// Unlike it, it creates TargetAttributes when the project has none
// (config-plugins throws), and it fails when the configuration does not
// exist (config-plugins silently changes nothing).
func (p *Project) SetManualSigning(target, configuration string, s Signing) error {
	if s.TeamID == "" || s.ProfileName == "" {
		return fmt.Errorf("signing target %q needs a team id and a provisioning profile name", target)
	}
	identity := s.Identity
	if identity == "" {
		identity = "iPhone Distribution"
	}
	t, err := p.findTarget(target)
	if err != nil {
		return err
	}
	if _, err := p.buildConfiguration(target, configuration); err != nil {
		return err
	}
	// Every configuration of that name in the target's list, as
	// config-plugins does (Xcode allows only one).
	settings := []struct{ key, value string }{
		{"PROVISIONING_PROFILE_SPECIFIER", s.ProfileName},
		{"DEVELOPMENT_TEAM", s.TeamID},
		{"CODE_SIGN_IDENTITY", identity},
		{"CODE_SIGN_STYLE", "Manual"},
	}
	for _, kv := range settings {
		for i := 0; ; {
			t, err := p.findTarget(target)
			if err != nil {
				return err
			}
			var matching []*node
			for _, c := range p.configurations(t.node.getString("buildConfigurationList")) {
				if c.getString("name") == configuration {
					matching = append(matching, c)
				}
			}
			if i >= len(matching) {
				break
			}
			c := matching[i]
			bs := c.get("buildSettings")
			if bs == nil {
				if err := p.setKey(c, "buildSettings", "{\n}", true); err != nil {
					return err
				}
				continue // re-find after the edit
			}
			if err := p.setKey(bs, kv.key, quote(kv.value), false); err != nil {
				return err
			}
			i++
		}
	}
	// TargetAttributes of every PBXProject (there is one).
	for _, attr := range []struct{ key, value string }{{"DevelopmentTeam", s.TeamID}, {"ProvisioningStyle", "Manual"}} {
		for range 4 { // each pass creates at most one missing level
			_, proj := p.rootProject()
			if proj == nil {
				return errors.New("the Xcode project has no PBXProject object")
			}
			attrs := proj.get("attributes")
			if attrs == nil {
				if err := p.setKey(proj, "attributes", "{\n}", true); err != nil {
					return err
				}
				continue
			}
			ta := attrs.get("TargetAttributes")
			if ta == nil {
				if err := p.setKey(attrs, "TargetAttributes", "{\n}", true); err != nil {
					return err
				}
				continue
			}
			entry := ta.get(t.id)
			if entry == nil {
				if err := p.setKey(ta, t.id, "{\n}", true); err != nil {
					return err
				}
				continue
			}
			if err := p.setKey(entry, attr.key, quote(attr.value), false); err != nil {
				return err
			}
			break
		}
	}
	return nil
}

// setKey sets key to the already encoded value text in dict d: it
// replaces the value's span when the key exists, else inserts a new entry
// (in sorted position when the dict's keys are sorted, as Xcode keeps
// them), then re-parses. A multi-line value "{\n}" is laid out at the new
// entry's indentation.
func (p *Project) setKey(d *node, key, value string, multiline bool) error {
	if d.kind != kindDict {
		return fmt.Errorf("cannot set %s: its parent is not a dictionary", key)
	}
	for _, e := range d.entries {
		if e.key.str == key {
			return p.splice(e.val.start, e.val.end, value)
		}
	}
	// Where: before the first greater key if the keys are sorted.
	sorted := sort.SliceIsSorted(d.entries, func(i, j int) bool { return d.entries[i].key.str < d.entries[j].key.str })
	at := -1
	if sorted {
		for _, e := range d.entries {
			if e.key.str > key {
				at = e.start
				break
			}
		}
	}
	closing := d.end - 1 // the '}'
	lineStart := func(i int) int {
		for i > 0 && p.data[i-1] != '\n' {
			i--
		}
		return i
	}
	onlySpaceBefore := func(i int) bool {
		for j := lineStart(i); j < i; j++ {
			if p.data[j] != ' ' && p.data[j] != '\t' {
				return false
			}
		}
		return true
	}
	indentOf := func(i int) string { return string(p.data[lineStart(i):i]) }
	// Layout: one entry per line when the dict's closing brace (or first
	// entry) starts a line.
	blockLayout := onlySpaceBefore(closing) || (len(d.entries) > 0 && onlySpaceBefore(d.entries[0].start))
	var indent string
	switch {
	case len(d.entries) > 0 && onlySpaceBefore(d.entries[0].start):
		indent = indentOf(d.entries[0].start)
	case onlySpaceBefore(closing):
		indent = indentOf(closing) + "\t"
	default:
		indent = ""
	}
	if multiline {
		if blockLayout {
			value = "{\n" + indent + "}"
		} else {
			value = "{}"
		}
	}
	text := quote(key) + " = " + value + ";"
	switch {
	case blockLayout && at >= 0 && onlySpaceBefore(at):
		ls := lineStart(at)
		return p.splice(ls, ls, indent+text+"\n")
	case blockLayout && at < 0 && onlySpaceBefore(closing):
		ls := lineStart(closing)
		return p.splice(ls, ls, indent+text+"\n")
	case at >= 0:
		return p.splice(at, at, text+" ")
	default:
		// Single-line dict (or brace after the last entry): before '}'.
		pre := " "
		if closing > 0 && (p.data[closing-1] == ' ' || p.data[closing-1] == '\n' || p.data[closing-1] == '\t') {
			pre = ""
			return p.splice(closing, closing, text+" ")
		}
		return p.splice(closing, closing, pre+text+" ")
	}
}

// splice replaces data[start:end] with text and re-parses.
func (p *Project) splice(start, end int, text string) error {
	data := make([]byte, 0, len(p.data)-(end-start)+len(text))
	data = append(data, p.data[:start]...)
	data = append(data, text...)
	data = append(data, p.data[end:]...)
	np, err := ParseProject(data)
	if err != nil {
		return fmt.Errorf("editing the Xcode project produced an unreadable project (a bug): %w", err)
	}
	*p = *np
	return nil
}
