package vmbootstrap

import (
	"encoding/base64"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/internal/toolchain"
)

// buildEnvironment is the environment a build's steps get beyond the VM's
// own: the farm's variables of the build's project and environment, under
// the profile's env (which wins, as in EAS), under EAS's built-in
// variables (facts about the build that nothing may override).
type buildEnvironment struct {
	vars []string // NAME=value, in that order of precedence (later wins)
	// secrets are the values to mask in the log.
	secrets []string
	// short names the masked variables whose values are too short to be
	// masked everywhere (set before the farm refused them).
	short []string
	// withheld names the secret EXPO_PUBLIC_ variables left out (set
	// before the farm refused them): Metro would inline them into the app.
	withheld []string
}

// newBuildEnvironment applies job to a build whose source tree (the archive
// root) is tree. File variables are written under filesDir (outside the
// project, 0600) and their variable holds the path.
func newBuildEnvironment(job api.BuildJob, buildID, tree, filesDir string) (buildEnvironment, error) {
	var e buildEnvironment
	spec := job.Spec
	for _, v := range job.Variables {
		if api.CheckPublicSecret(v.Name, v.Visibility) != nil {
			e.withheld = append(e.withheld, v.Name)
			continue
		}
		value := v.Value
		if v.Type == api.VariableFile {
			content, err := base64.StdEncoding.DecodeString(v.Value)
			if err != nil {
				return e, fmt.Errorf("file variable %s: its value is not base64: %w", v.Name, err)
			}
			if err := os.MkdirAll(filesDir, 0o700); err != nil {
				return e, fmt.Errorf("create the directory of file variables: %w", err)
			}
			path := filepath.Join(filesDir, safeName(v.Name))
			if err := os.WriteFile(path, content, 0o600); err != nil {
				return e, fmt.Errorf("write file variable %s: %w", v.Name, err)
			}
			if v.Visibility != api.VisibilityPlaintext {
				e.secrets = append(e.secrets, string(content))
				if len(content) < api.MinSecretLength {
					e.short = append(e.short, v.Name)
				}
			}
			value = path
		}
		if v.Visibility != api.VisibilityPlaintext {
			e.secrets = append(e.secrets, v.Value)
			if v.Type != api.VariableFile && len(v.Value) < api.MinSecretLength {
				e.short = append(e.short, v.Name)
			}
		}
		e.vars = append(e.vars, v.Name+"="+value)
	}
	if spec != nil {
		for _, k := range slices.Sorted(maps.Keys(spec.Profile.Env)) {
			e.vars = append(e.vars, k+"="+spec.Profile.Env[k])
		}
	}
	e.vars = lastWins(append(e.vars, easBuiltins(spec, buildID, tree)...))
	return e, nil
}

// lastWins drops every NAME=value entry that a later one of the same name
// replaces.
func lastWins(kvs []string) []string {
	seen := map[string]bool{}
	out := make([]string, 0, len(kvs))
	for i := len(kvs) - 1; i >= 0; i-- {
		name, _, _ := strings.Cut(kvs[i], "=")
		if !seen[name] {
			seen[name] = true
			out = append(out, kvs[i])
		}
	}
	slices.Reverse(out)
	return out
}

// easBuiltins are the variables EAS Build gives every build; app configs
// and scripts test them (EAS_BUILD, EAS_BUILD_PLATFORM, …).
func easBuiltins(spec *api.BuildSpec, buildID, tree string) []string {
	out := []string{
		"CI=1",
		"EAS_BUILD=true",
		"EAS_BUILD_ID=" + buildID,
		"EAS_BUILD_RUNNER=freeagent",
		"EAS_BUILD_WORKINGDIR=" + tree,
	}
	if spec != nil {
		out = append(out, "EAS_BUILD_PLATFORM="+spec.Platform, "EAS_BUILD_PROFILE="+spec.ProfileName)
		if spec.GitCommit != "" {
			out = append(out, "EAS_BUILD_GIT_COMMIT_HASH="+spec.GitCommit)
		}
	}
	return out
}

// npmrcForToken is the .npmrc EAS writes when the build has NPM_TOKEN: npm
// expands ${NPM_TOKEN} itself, so the token is never written to disk.
const npmrcForToken = "//registry.npmjs.org/:_authToken=${NPM_TOKEN}\n"

// writeNpmrc gives a build with NPM_TOKEN an .npmrc in the app's directory,
// unless the project has one there (EAS leaves it alone too). It reports
// whether it wrote one.
func writeNpmrc(appDir string, env []string) (bool, error) {
	if toolchain.EnvValue(env, "NPM_TOKEN") == "" {
		return false, nil
	}
	path := filepath.Join(appDir, ".npmrc")
	if _, err := os.Lstat(path); err == nil {
		return false, nil
	}
	if err := os.WriteFile(path, []byte(npmrcForToken), 0o600); err != nil {
		return false, fmt.Errorf("write .npmrc for NPM_TOKEN: %w", err)
	}
	return true, nil
}
