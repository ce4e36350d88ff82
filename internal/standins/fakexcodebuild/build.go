package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/freeagent-build/freeagent/internal/boundedfile"
	"github.com/freeagent-build/freeagent/internal/plist"
	"github.com/freeagent-build/freeagent/internal/xcode"
)

// product is a target built into its bundle under TARGET_BUILD_DIR.
type product struct {
	target   xcode.Target
	settings map[string]string
	dir      string // the .app or .appex
}

// buildFailure is a failed build command, reported as xcodebuild reports
// it under "The following build commands failed:".
type buildFailure struct {
	command string // "PhaseScriptExecution Bundle\ React\ Native… (in target 'X' from project 'Y')"
	err     error
}

func (f *buildFailure) Error() string { return f.err.Error() }

// buildProducts builds each target as Xcode would with nothing to
// compile: the extensions first (the app depends on them), each bundle
// with its processed Info.plist and a stand-in executable, its run script
// phases run in order (the real scripts: React Native's bundling among
// them), then the extensions embedded in the app's PlugIns. The app's
// product comes first.
func (bc buildContext) buildProducts(p *xcode.Project, targets []xcode.Target, stdout io.Writer) ([]product, error) {
	order := append(append([]xcode.Target{}, targets[1:]...), targets[0])
	built := map[string]product{}
	for _, t := range order {
		settings, err := bc.targetSettings(p, t)
		if err != nil {
			return nil, err
		}
		pr := product{target: t, settings: settings, dir: filepath.Join(settings["TARGET_BUILD_DIR"], settings["WRAPPER_NAME"])}
		if err := os.RemoveAll(pr.dir); err != nil {
			return nil, err
		}
		if err := writeBundle(pr); err != nil {
			return nil, err
		}
		if err := bc.compileResources(p, pr, stdout); err != nil {
			return nil, err
		}
		if err := bc.runScriptPhases(p, pr, stdout); err != nil {
			return nil, err
		}
		built[t.Name] = pr
	}
	app := built[targets[0].Name]
	out := []product{app}
	for _, t := range targets[1:] {
		ext := built[t.Name]
		dst := filepath.Join(app.dir, "PlugIns", filepath.Base(ext.dir))
		if err := os.CopyFS(dst, os.DirFS(ext.dir)); err != nil {
			return nil, fmt.Errorf("embed %s: %w", filepath.Base(ext.dir), err)
		}
		ext.dir = dst
		out = append(out, ext)
	}
	return out, nil
}

// standInExecutable is what stands for the compiled Mach-O binary.
const standInExecutable = "Free Agent's stand-in xcodebuild (internal/standins/fakexcodebuild) compiles nothing: this is not a Mach-O executable, and this bundle does not run on a device. Its JavaScript bundle, resources and Info.plist are real.\n"

// writeBundle makes a product's bundle: the processed Info.plist and the
// stand-in executable.
func writeBundle(pr product) error {
	if err := os.MkdirAll(pr.dir, 0o755); err != nil {
		return err
	}
	info, err := processedInfoPlist(pr.settings)
	if err != nil {
		return err
	}
	data, err := plist.Marshal(info)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(pr.dir, "Info.plist"), data, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(pr.dir, pr.settings["EXECUTABLE_NAME"]), []byte(standInExecutable), 0o755)
}

// maxInfoPlistSize bounds the read of a target's Info.plist.
const maxInfoPlistSize = 8 << 20

// processedInfoPlist is the target's INFOPLIST_FILE with its build
// setting references expanded, as Xcode's ProcessInfoPlistFile does. With
// GENERATE_INFOPLIST_FILE, or without the file (where Xcode would fail:
// the hand-written test projects have none), the generated keys it lacks
// are added: the bundle id, name, executable, package type,
// MARKETING_VERSION and CURRENT_PROJECT_VERSION.
func processedInfoPlist(settings map[string]string) (map[string]any, error) {
	info := map[string]any{}
	generate := settings["GENERATE_INFOPLIST_FILE"] == "YES"
	if name := settings["INFOPLIST_FILE"]; name == "" {
		generate = true
	} else {
		if !filepath.IsAbs(name) {
			name = filepath.Join(settings["SRCROOT"], name)
		}
		data, err := boundedfile.Read(name, maxInfoPlistSize)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			generate = true
		case err != nil:
			return nil, err
		default:
			if _, err := plist.Unmarshal(data, &info); err != nil {
				return nil, fmt.Errorf("unable to read the Info.plist %s: %v", name, err)
			}
		}
	}
	lookup := func(k string) string { return settings[k] }
	info = expandPlist(info, lookup).(map[string]any)
	generated := map[string]string{
		"CFBundleIdentifier": settings["PRODUCT_BUNDLE_IDENTIFIER"], "CFBundleName": settings["PRODUCT_NAME"],
		"CFBundleExecutable": settings["EXECUTABLE_NAME"], "CFBundlePackageType": settings["PRODUCT_BUNDLE_PACKAGE_TYPE"],
		"CFBundleShortVersionString": settings["MARKETING_VERSION"], "CFBundleVersion": settings["CURRENT_PROJECT_VERSION"],
	}
	for k, v := range generated {
		if _, ok := info[k]; generate && !ok && v != "" {
			info[k] = v
		}
	}
	return info, nil
}

// expandPlist expands build setting references in every string of a
// property list value.
func expandPlist(v any, lookup func(string) string) any {
	switch x := v.(type) {
	case string:
		return xcode.ExpandSettings(x, lookup)
	case map[string]any:
		for k, e := range x {
			x[k] = expandPlist(e, lookup)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = expandPlist(e, lookup)
		}
		return x
	}
	return v
}

// runScriptPhases runs a product's PBXShellScriptBuildPhases as Xcode
// does: the script written to $(TARGET_TEMP_DIR)/Script-<id>.sh and run
// by the phase's shell from the project's directory, with every build
// setting in the environment, the phase's input and output paths as
// SCRIPT_INPUT_FILE_n / SCRIPT_OUTPUT_FILE_n (their directories made),
// its output passed through. Phases marked "for install builds only" run
// only in an archive. macOS's /bin/sh is bash, so a /bin/sh phase runs
// with bash (the phases Xcode templates write use [[ ]] and source).
func (bc buildContext) runScriptPhases(p *xcode.Project, pr product, stdout io.Writer) error {
	phases, err := p.ShellScriptPhases(pr.target.Name)
	if err != nil {
		return err
	}
	project := strings.TrimSuffix(filepath.Base(bc.projectPath), ".xcodeproj")
	lookup := func(k string) string { return pr.settings[k] }
	for _, ph := range phases {
		if ph.InstallOnly && bc.action != "install" {
			continue
		}
		script := filepath.Join(pr.settings["TARGET_TEMP_DIR"], "Script-"+ph.ID+".sh")
		command := fmt.Sprintf("PhaseScriptExecution %s %s (in target '%s' from project '%s')", shellEscape(ph.Name), shellEscape(script), pr.target.Name, project)
		if err := os.MkdirAll(filepath.Dir(script), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(script, []byte("#!"+ph.ShellPath+"\n"+ph.Script+"\n"), 0o755); err != nil {
			return err
		}
		env := os.Environ()
		for k, v := range pr.settings {
			env = append(env, k+"="+v)
		}
		for kind, paths := range map[string][]string{"INPUT": ph.InputPaths, "OUTPUT": ph.OutputPaths} {
			env = append(env, fmt.Sprintf("SCRIPT_%s_FILE_COUNT=%d", kind, len(paths)))
			for i, raw := range paths {
				path := xcode.ExpandSettings(raw, lookup)
				env = append(env, fmt.Sprintf("SCRIPT_%s_FILE_%d=%s", kind, i, path))
				if kind == "OUTPUT" && path != "" {
					if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
						return err
					}
				}
			}
		}
		shell := ph.ShellPath
		if shell == "/bin/sh" {
			shell = "bash"
		}
		fmt.Fprintf(stdout, "\n%s\n    cd %s\n    %s -c %s\n", command, pr.settings["PROJECT_DIR"], ph.ShellPath, shellEscape(script))
		cmd := exec.Command(shell, script)
		cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = pr.settings["PROJECT_DIR"], env, stdout, stdout
		if err := cmd.Run(); err != nil {
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				return &buildFailure{command: command, err: errors.New("Command PhaseScriptExecution failed with a nonzero exit code")}
			}
			return &buildFailure{command: command, err: fmt.Errorf("Command PhaseScriptExecution could not start %s: %v", shell, err)}
		}
	}
	return nil
}

// shellEscape escapes spaces and shell metacharacters with backslashes, as
// Xcode's build log writes paths.
func shellEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(" \\'\"()&;$`*?[]{}|<>!#", r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// reportFailure prints a failed build as xcodebuild does and returns its
// exit status: the error, the banner, then the failed command.
func reportFailure(stdout, stderr io.Writer, banner string, err error) int {
	fmt.Fprintf(stderr, "error: %v\n", err)
	fmt.Fprintf(stdout, "\n** %s FAILED **\n", banner)
	var bf *buildFailure
	if errors.As(err, &bf) {
		fmt.Fprintf(stdout, "\n\nThe following build commands failed:\n\t%s\n(1 failure)\n", bf.command)
	}
	return exitFailed
}
