package vmbootstrap

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/freeagent-build/freeagent/api"
)

// CustomBuildScript is the npm script that replaces the default pipeline.
const CustomBuildScript = api.CustomBuildScript

// maxProjectDepth bounds the search for the project root.
const maxProjectDepth = 8

// ErrNoProject: the source holds no package.json.
var ErrNoProject = errors.New("no package.json in the source")

// FindProjectRoot returns the directory of the project inside an extracted
// source tree: the shallowest directory whose package.json defines the
// freeagent:build script; else the shallowest holding package.json and an
// Expo app config (app.json or app.config.*); else the shallowest holding a
// package.json. Ties at one depth go to the first in name order.
// node_modules, hidden directories and symlinks are not searched.
func FindProjectRoot(tree string) (string, error) {
	var withConfig, plain string
	level := []string{tree}
	for depth := 0; depth <= maxProjectDepth && len(level) > 0; depth++ {
		var next []string
		for _, dir := range level {
			entries, err := os.ReadDir(dir)
			if err != nil {
				return "", fmt.Errorf("search the project root: %w", err)
			}
			hasPkg, hasConfig := false, false
			for _, e := range entries {
				name := e.Name()
				switch {
				case e.Type().IsRegular() && name == "package.json":
					hasPkg = true
				case e.Type().IsRegular() && (name == "app.json" || strings.HasPrefix(name, "app.config.")):
					hasConfig = true
				case e.IsDir() && name != "node_modules" && !strings.HasPrefix(name, "."):
					next = append(next, filepath.Join(dir, name))
				}
			}
			if !hasPkg {
				continue
			}
			pkg, err := readPackageJSON(dir)
			if err == nil && pkg.customBuild() {
				return dir, nil
			}
			if hasConfig && withConfig == "" {
				withConfig = dir
			}
			if plain == "" {
				plain = dir
			}
		}
		if withConfig != "" {
			// Deeper directories cannot be shallower candidates; a custom
			// script deeper down does not outrank an app found here.
			return withConfig, nil
		}
		level = next
	}
	if plain != "" {
		return plain, nil
	}
	return "", fmt.Errorf("%w (searched %d levels deep, outside node_modules and hidden directories)", ErrNoProject, maxProjectDepth)
}

type packageJSON struct {
	Scripts map[string]string `json:"scripts"`
	// Raw: a malformed dependency list must not stop the scripts' use.
	Dependencies    json.RawMessage `json:"dependencies"`
	DevDependencies json.RawMessage `json:"devDependencies"`
}

// dependencyVersion is the version of a dependency (devDependencies
// second) with its range stripped, as EAS Build reads package.json: ""
// when it is not there or either list is not an object of strings.
func (p packageJSON) dependencyVersion(name string) string {
	var deps, dev map[string]string
	for _, l := range []struct {
		raw json.RawMessage
		m   *map[string]string
	}{{p.Dependencies, &deps}, {p.DevDependencies, &dev}} {
		if string(l.raw) == "null" || len(l.raw) > 0 && json.Unmarshal(l.raw, l.m) != nil {
			return ""
		}
	}
	v, ok := deps[name]
	if !ok {
		v = dev[name]
	}
	return coerceVersion(v)
}

// customBuild reports whether the project defines the script that
// replaces the default pipeline: a non-empty command, as expo-build
// decides it.
func (p packageJSON) customBuild() bool { return p.Scripts[CustomBuildScript] != "" }

func readPackageJSON(dir string) (packageJSON, error) {
	var p packageJSON
	b, err := os.ReadFile(filepath.Join(dir, "package.json"))
	if err != nil {
		return p, fmt.Errorf("read package.json: %w", err)
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return p, fmt.Errorf("parse %s: %w", filepath.Join(dir, "package.json"), err)
	}
	return p, nil
}
