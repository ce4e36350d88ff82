package xcode

import (
	"encoding/xml"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf16"

	"github.com/freeagent-build/freeagent/internal/boundedfile"
)

// maxSchemeSize bounds the read of an .xcscheme (they are a few KiB).
const maxSchemeSize = 4 << 20

// FindProject returns the app's .xcodeproj in iosDir (the one that is not
// Pods.xcodeproj); an error if there is none or several.
func FindProject(iosDir string) (string, error) {
	return findBundle(iosDir, ".xcodeproj", true)
}

// FindWorkspace returns the app's .xcworkspace in iosDir (not Pods'), ""
// with a nil error when there is none.
func FindWorkspace(iosDir string) (string, error) {
	return findBundle(iosDir, ".xcworkspace", false)
}

func findBundle(iosDir, ext string, required bool) (string, error) {
	entries, err := os.ReadDir(iosDir)
	if err != nil {
		return "", fmt.Errorf("looking for the %s in %s: %w", ext, iosDir, err)
	}
	var found []string
	for _, e := range entries {
		if e.IsDir() && strings.HasSuffix(e.Name(), ext) && e.Name() != "Pods"+ext {
			found = append(found, e.Name())
		}
	}
	switch {
	case len(found) == 1:
		return filepath.Join(iosDir, found[0]), nil
	case len(found) == 0 && !required:
		return "", nil
	case len(found) == 0:
		return "", fmt.Errorf("there is no %s in %s; run `npx expo prebuild` or check the project's ios directory", ext, iosDir)
	default:
		return "", fmt.Errorf("%s has several %s (%s); keep only the app's", iosDir, ext, strings.Join(found, ", "))
	}
}

// Schemes returns the shared schemes of the project
// (<xcodeproj>/xcshareddata/xcschemes/*.xcscheme), sorted.
func Schemes(xcodeproj string) ([]string, error) {
	dir := filepath.Join(xcodeproj, "xcshareddata", "xcschemes")
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing the shared schemes: %w", err)
	}
	var names []string
	for _, e := range entries {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".xcscheme") {
			names = append(names, strings.TrimSuffix(e.Name(), ".xcscheme"))
		}
	}
	slices.SortFunc(names, compareUTF16)
	return names, nil
}

// compareUTF16 orders strings as JavaScript's default sort does: by
// UTF-16 code units.
func compareUTF16(a, b string) int {
	ua, ub := utf16.Encode([]rune(a)), utf16.Encode([]rune(b))
	return slices.Compare(ua, ub)
}

// ErrNoSchemes is PickScheme's answer for a project without shared
// schemes; its text is eas-cli's.
var ErrNoSchemes = errors.New(`We did not find any schemes in the Xcode project, make sure that at least one scheme is marked as "shared" in Xcode, and that it's listed in the output of "xcodebuild -list" command`)

// PickScheme is eas-cli's non-interactive selectSchemeAsync: none → an
// error with EAS's hint about shared schemes; one → it; several → sorted,
// the first whose name does not contain "tvOS", else the first.
func PickScheme(schemes []string) (string, error) {
	switch len(schemes) {
	case 0:
		return "", ErrNoSchemes
	case 1:
		return schemes[0], nil
	}
	sorted := slices.Clone(schemes)
	slices.SortStableFunc(sorted, compareUTF16)
	for _, s := range sorted {
		if !strings.Contains(s, "tvOS") {
			return s, nil
		}
	}
	return sorted[0], nil
}

// Scheme is what a build needs from a shared scheme.
type Scheme struct {
	Name                 string
	BuildTargets         []string // BlueprintName of the BuildAction's BuildActionEntries
	ArchiveConfiguration string   // ArchiveAction buildConfiguration (getArchiveBuildConfigurationForSchemeAsync); "" when the scheme has none
	// AppTarget is the BuildAction entry that builds the app, as
	// getApplicationTargetNameForSchemeAsync finds it: the only entry, or
	// the first whose BuildableName ends in ".app"; "" when neither.
	AppTarget string
}

type xmlScheme struct {
	BuildAction struct {
		Entries []struct {
			Ref struct {
				BuildableName string `xml:"BuildableName,attr"`
				BlueprintName string `xml:"BlueprintName,attr"`
			} `xml:"BuildableReference"`
		} `xml:"BuildActionEntries>BuildActionEntry"`
	} `xml:"BuildAction"`
	ArchiveAction struct {
		BuildConfiguration string `xml:"buildConfiguration,attr"`
	} `xml:"ArchiveAction"`
}

// LoadScheme reads the shared scheme name of the project. Like
// config-plugins it also finds the scheme when the file name differs in
// case.
func LoadScheme(xcodeproj, name string) (Scheme, error) {
	dir := filepath.Join(xcodeproj, "xcshareddata", "xcschemes")
	names, err := Schemes(xcodeproj)
	if err != nil {
		return Scheme{}, err
	}
	file := ""
	for _, n := range names {
		if n == name {
			file = n
			break
		}
		if file == "" && strings.EqualFold(n, name) {
			file = n
		}
	}
	if file == "" {
		return Scheme{}, fmt.Errorf("scheme '%s' does not exist, make sure it's marked as shared (the shared schemes: %s)", name, strings.Join(names, ", "))
	}
	path := filepath.Join(dir, file+".xcscheme")
	data, err := boundedfile.Read(path, maxSchemeSize)
	var tooLarge *boundedfile.TooLargeError
	if errors.As(err, &tooLarge) {
		return Scheme{}, fmt.Errorf("%s is larger than %d MiB, which no real scheme is", path, maxSchemeSize>>20)
	}
	if err != nil {
		return Scheme{}, fmt.Errorf("reading the scheme %s: %w", name, err)
	}
	var x xmlScheme
	if err := xml.Unmarshal(data, &x); err != nil {
		return Scheme{}, fmt.Errorf("%s.xcscheme seems to be corrupted: %w", name, err)
	}
	s := Scheme{Name: file, ArchiveConfiguration: x.ArchiveAction.BuildConfiguration}
	for _, e := range x.BuildAction.Entries {
		s.BuildTargets = append(s.BuildTargets, e.Ref.BlueprintName)
	}
	if len(x.BuildAction.Entries) == 1 {
		s.AppTarget = x.BuildAction.Entries[0].Ref.BlueprintName
	} else {
		for _, e := range x.BuildAction.Entries {
			if strings.HasSuffix(e.Ref.BuildableName, ".app") {
				s.AppTarget = e.Ref.BlueprintName
				break
			}
		}
	}
	return s, nil
}

// maxDependencyDepth bounds the walk of target dependencies (Xcode
// forbids cycles; a corrupt project must not loop).
const maxDependencyDepth = 16

// AppTargets is IOSConfig.Target.findApplicationTargetWithDependenciesAsync
// followed by eas-cli's resolveBareProjectDependenciesAsync: the scheme's
// application target first, then the targets it depends on that are
// signed (every product type but frameworks, as EAS keeps them; a
// framework's own dependencies are not visited), depth first in the
// order of the dependencies.
func AppTargets(p *Project, s Scheme) ([]Target, error) {
	name := s.AppTarget
	if name == "" && len(s.BuildTargets) == 1 {
		name = s.BuildTargets[0]
	}
	if name == "" {
		return nil, fmt.Errorf("%s.xcscheme seems to be corrupted: its BuildAction builds no .app", s.Name)
	}
	app, err := p.findTarget(name)
	if err != nil {
		return nil, fmt.Errorf("scheme %s: %w", s.Name, err)
	}
	out := []Target{p.toTarget(app)}
	var walk func(t nativeTarget, depth int) error
	walk = func(t nativeTarget, depth int) error {
		if depth > maxDependencyDepth {
			return fmt.Errorf("the dependencies of target %q are nested deeper than %d levels (a cycle?)", t.node.getString("name"), maxDependencyDepth)
		}
		for _, id := range p.dependencyIDs(t.node) {
			dep := p.object(id)
			if dep == nil || dep.getString("isa") != "PBXNativeTarget" {
				return fmt.Errorf("target %q depends on a target (id %q) that is not a target of this project; make it a dependency in Xcode again", t.node.getString("name"), id)
			}
			if dep.getString("productType") == ProductTypeFramework {
				continue
			}
			d := nativeTarget{id, dep}
			out = append(out, p.toTarget(d))
			if err := walk(d, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(app, 0); err != nil {
		return nil, err
	}
	return out, nil
}
