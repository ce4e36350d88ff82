// Command fakexcodebuild is a stand-in for Xcode's xcodebuild for tests
// that run the VM's iOS pipeline unmodified on Linux. It fails where real
// Xcode fails, with Xcode's messages and exit codes (65 for a failed
// archive or build, 70 for a failed export, 64 for a bad command line),
// and writes its outputs in Xcode's layout: an .xcarchive, an exported
// .ipa, a simulator .app.
//
// Nothing is compiled, but what a build does beyond compiling is real:
// each target's settings are resolved as Xcode resolves them (xcconfig
// base configurations included), its Info.plist is processed, and its
// run script phases run with those settings in the environment. On the
// project `expo prebuild` writes, that runs React Native's bundle phase
// (Metro, then hermesc) into the .app. The executable is a text file
// saying that the bundle does not run on a device.
//
// It reads projects with internal/xcode, the package under test: a
// parser bug could hide in both. The differential tests of internal/xcode
// against @expo/config-plugins are what guard the parser.
//
// Asset catalogs and storyboards are not compiled, but as actool and
// ibtool do, their steps fail in another user's launchd session (sudo -u
// without launchctl asuser), where CoreSimulatorService is not theirs:
// see internal/standins/fakelaunchctl.
//
// Each invocation's argv is appended as one JSON line to
// $FAKE_XCODEBUILD_LOG when set. Installed provisioning profiles are
// read from $HOME/Library/MobileDevice/Provisioning Profiles.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Exit codes of the real xcodebuild.
const (
	exitUsage  = 64 // bad command line
	exitFailed = 65 // ** ARCHIVE FAILED ** / ** BUILD FAILED **
	exitExport = 70 // ** EXPORT FAILED **
)

// invocation is a parsed command line.
type invocation struct {
	actions   []string
	flags     map[string]string
	bools     map[string]bool
	overrides map[string]string // SETTING=value
}

// isValueFlag reports whether an option takes a value.
func isValueFlag(a string) bool {
	switch a {
	case "-workspace", "-project", "-scheme", "-configuration", "-destination", "-archivePath",
		"-sdk", "-derivedDataPath", "-exportPath", "-exportOptionsPlist":
		return true
	}
	return false
}

// isBoolFlag reports whether an option stands alone.
func isBoolFlag(a string) bool {
	return a == "-exportArchive" || a == "-allowProvisioningUpdates" || a == "-quiet"
}

// isAction reports whether a word is a build action the fake knows.
func isAction(a string) bool { return a == "archive" || a == "build" || a == "clean" }

// usageError is xcodebuild's answer to a bad command line.
type usageError string

func parseArgs(args []string) (invocation, error) {
	inv := invocation{flags: map[string]string{}, bools: map[string]bool{}, overrides: map[string]string{}}
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case isValueFlag(a):
			if i+1 >= len(args) {
				return inv, usageError(fmt.Sprintf("option '%s' requires at least one argument", a))
			}
			inv.flags[a] = args[i+1]
			i++
		case isBoolFlag(a):
			inv.bools[a] = true
		case strings.HasPrefix(a, "-"):
			return inv, usageError(fmt.Sprintf("invalid option '%s'", a))
		case strings.Contains(a, "="):
			k, v, _ := strings.Cut(a, "=")
			inv.overrides[k] = v
		case isAction(a):
			inv.actions = append(inv.actions, a)
		default:
			return inv, usageError(fmt.Sprintf("Unknown build action '%s'.", a))
		}
	}
	return inv, nil
}

func (e usageError) Error() string { return string(e) }

func logInvocation(args []string) {
	path := os.Getenv("FAKE_XCODEBUILD_LOG")
	if path == "" {
		return
	}
	line, _ := json.Marshal(append([]string{"xcodebuild"}, args...))
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		fmt.Fprintf(os.Stderr, "fakexcodebuild: FAKE_XCODEBUILD_LOG: %v\n", err)
		return
	}
	defer f.Close()
	f.Write(append(line, '\n'))
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	logInvocation(args)
	inv, err := parseArgs(args)
	if err != nil {
		fmt.Fprintf(stderr, "xcodebuild: error: %v\n", err)
		return exitUsage
	}
	switch {
	case inv.bools["-exportArchive"]:
		return exportArchive(inv, stdout, stderr)
	case len(inv.actions) == 1 && inv.actions[0] == "archive":
		return archive(inv, stdout, stderr)
	case len(inv.actions) == 1 && inv.actions[0] == "build":
		return buildSimulator(inv, stdout, stderr)
	default:
		fmt.Fprintf(stderr, "xcodebuild: error: the fake xcodebuild supports archive, build for the simulator and -exportArchive, not %q\n", strings.Join(args, " "))
		return exitUsage
	}
}

// profilesDir is where Xcode keeps installed provisioning profiles.
func profilesDir() string {
	home, _ := os.UserHomeDir()
	return filepath.Join(home, "Library", "MobileDevice", "Provisioning Profiles")
}
