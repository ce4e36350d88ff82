package vmbootstrap

import (
	"regexp"
	"strings"

	"github.com/freeagent-build/freeagent/api"
)

// This file turns the project's decided layout (api.Project, chosen once by
// expo-build) into the commands EAS Build runs for it: the dependency
// install at the workspace root, the re-install after prebuild, the
// package.json hooks and the project's Expo CLI. The functions only build
// argv; they never look at the source again, so the VM cannot re-decide.

// Command is one command of the JavaScript side of a build.
type Command struct {
	Argv []string
	// Dir is where it runs, relative to the archive root with forward
	// slashes: "" (the workspace root) or the app's directory.
	Dir string
}

// EAS Build's package.json hooks, in the order a build meets them.
const (
	HookPreInstall  = "eas-build-pre-install"
	HookPostInstall = "eas-build-post-install"
	// HookPreUploadArtifacts is deprecated in EAS and still run.
	HookPreUploadArtifacts = "eas-build-pre-upload-artifacts"
	HookOnBuildSuccess     = "eas-build-on-success"
	HookOnBuildError       = "eas-build-on-error"
	HookOnBuildComplete    = "eas-build-on-complete"
	HookOnBuildCancel      = "eas-build-on-cancel"
)

// InstallCommands installs the dependencies at the workspace root, with
// EAS Build's arguments:
//
//	npm ci --include=dev                                  (npm install --include=dev)
//	yarn install --frozen-lockfile --production false     (yarn install --production false)
//	yarn install --inline-builds --immutable              (… --no-immutable), Yarn 2+
//	pnpm install --frozen-lockfile                        (… --no-frozen-lockfile)
//	bun install --frozen-lockfile                         (bun install)
//
// frozen asks for the frozen form; it is ignored when the project has no
// lockfile (there is nothing to freeze to). Before the install come
// `corepack enable` when the project uses Corepack, and the pinned version
// of the manager: `corepack prepare <manager>@<version> --activate` with
// Corepack, `npm install -g <manager>@<version>` without.
func InstallCommands(p api.Project, frozen bool) []Command {
	var cmds []Command
	if p.Corepack {
		cmds = append(cmds, Command{Argv: []string{"corepack", "enable"}})
	}
	if p.PackageManagerVersion != "" && p.PackageManager != api.PackageManagerNPM {
		spec := p.PackageManager + "@" + p.PackageManagerVersion
		if p.Corepack && p.PackageManager != api.PackageManagerBun { // Corepack does not manage bun
			cmds = append(cmds, Command{Argv: []string{"corepack", "prepare", spec, "--activate"}})
		} else {
			cmds = append(cmds, Command{Argv: []string{"npm", "install", "-g", spec}})
		}
	}
	return append(cmds, Command{Argv: installArgv(p, frozen && p.Lockfile != "")})
}

// ReinstallCommand is the install EAS Build runs again after prebuild, at
// the workspace root and never frozen: prebuild may have changed
// package.json.
func ReinstallCommand(p api.Project) Command {
	return Command{Argv: installArgv(p, false)}
}

func installArgv(p api.Project, frozen bool) []string {
	switch p.PackageManager {
	case api.PackageManagerYarn:
		if p.YarnBerry {
			if frozen {
				return []string{"yarn", "install", "--inline-builds", "--immutable"}
			}
			return []string{"yarn", "install", "--inline-builds", "--no-immutable"}
		}
		if frozen {
			return []string{"yarn", "install", "--frozen-lockfile", "--production", "false"}
		}
		return []string{"yarn", "install", "--production", "false"}
	case api.PackageManagerPNPM:
		if frozen {
			return []string{"pnpm", "install", "--frozen-lockfile"}
		}
		return []string{"pnpm", "install", "--no-frozen-lockfile"}
	case api.PackageManagerBun:
		if frozen {
			return []string{"bun", "install", "--frozen-lockfile"}
		}
		return []string{"bun", "install"}
	default:
		if frozen {
			return []string{"npm", "ci", "--include=dev"}
		}
		return []string{"npm", "install", "--include=dev"}
	}
}

// ScriptCommand runs a package.json script of the app with the project's
// manager, in the app's directory. As in EAS Build, the pre-install hook
// runs with npm when the manager is Yarn (Yarn cannot be trusted before
// the install, e.g. before `corepack enable` has run in that very hook).
func ScriptCommand(p api.Project, script string) Command {
	manager := p.PackageManager
	if manager == "" || manager == api.PackageManagerYarn && script == HookPreInstall {
		manager = api.PackageManagerNPM
	}
	return Command{Argv: []string{manager, "run", script}, Dir: p.AppDir}
}

// ExpoCommand runs the project's own Expo CLI in the app's directory the
// way EAS Build does: `npx expo …` for npm, `yarn expo …`, `pnpm expo …`
// and `bun expo …`.
func ExpoCommand(p api.Project, args ...string) Command {
	var argv []string
	switch p.PackageManager {
	case api.PackageManagerYarn, api.PackageManagerPNPM, api.PackageManagerBun:
		argv = []string{p.PackageManager, "expo"}
	default:
		argv = []string{"npx", "expo"}
	}
	return Command{Argv: append(argv, args...), Dir: p.AppDir}
}

// PrebuildCommand is `expo prebuild` for platform with EAS Build's rules:
// the profile's prebuildCommand when it has one, else `prebuild
// --no-install --platform <platform>`; `--platform <platform>` added when
// the command names no platform (neither --platform nor -p); a leading
// `npx`, then `expo`, then `expo-cli` dropped (the project's Expo CLI runs
// it). Unlike EAS, which splits on single spaces and would pass empty
// arguments, runs of blanks separate arguments.
func PrebuildCommand(p api.Project, prebuildCommand, platform string) Command {
	return ExpoCommand(p, PrebuildArgs(prebuildCommand, platform)...)
}

var platformFlag = regexp.MustCompile(`--platform| -p`)

// PrebuildArgs are the arguments after `expo` of PrebuildCommand.
func PrebuildArgs(prebuildCommand, platform string) []string {
	cmd := prebuildCommand
	if cmd == "" {
		cmd = "prebuild --no-install --platform " + platform
	}
	if !platformFlag.MatchString(cmd) {
		cmd += " --platform " + platform
	}
	for _, prefix := range []string{"npx ", "expo ", "expo-cli "} {
		if strings.HasPrefix(cmd, prefix) {
			cmd = strings.TrimSpace(cmd[len(prefix):])
		}
	}
	return strings.Fields(cmd)
}
