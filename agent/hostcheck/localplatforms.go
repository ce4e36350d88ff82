package hostcheck

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/freeagent-build/freeagent/api"
)

// Toolchain is what LocalPlatforms asks of the host the local driver runs
// builds on: its OS, what is on its PATH, its environment and its files.
type Toolchain struct {
	GOOS     string
	LookPath func(string) (string, error)
	Getenv   func(string) string
	IsDir    func(string) bool
	IsFile   func(string) bool
	// Succeeds runs a command and reports whether it exited 0.
	Succeeds func(name string, args ...string) bool
}

// ThisHost is the toolchain of the machine this runs on.
func ThisHost() Toolchain {
	return Toolchain{GOOS: runtime.GOOS, LookPath: exec.LookPath, Getenv: os.Getenv,
		IsDir:  func(p string) bool { fi, err := os.Stat(p); return err == nil && fi.IsDir() },
		IsFile: func(p string) bool { fi, err := os.Stat(p); return err == nil && fi.Mode().IsRegular() },
		Succeeds: func(name string, args ...string) bool {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			return exec.CommandContext(ctx, name, args...).Run() == nil
		}}
}

// macJavaStub is macOS's java on every Mac: without a JDK installed it
// only says to install one.
const macJavaStub = "/usr/bin/java"

// lack is why the host cannot build a platform, and what fixes it.
type lack struct{ why, fix string }

// iosLack says why this host cannot build iOS: it needs macOS with
// xcodebuild on the PATH. nil: it can.
func (t Toolchain) iosLack() *lack {
	if t.GOOS != "darwin" {
		return &lack{"builds run on this " + t.GOOS + " host, and iOS builds need macOS with Xcode", "run iOS builds on a Mac with Xcode"}
	}
	if _, err := t.LookPath("xcodebuild"); err != nil {
		return &lack{"builds run on this Mac, which has no xcodebuild on the PATH",
			"install Xcode, then `sudo xcode-select -s /Applications/Xcode.app`"}
	}
	return nil
}

// androidLack says why this host cannot run the default Android pipeline
// (expo prebuild, then Gradle): it needs a JDK (java on the PATH or under
// JAVA_HOME) and an Android SDK (ANDROID_HOME or ANDROID_SDK_ROOT naming
// its directory), which is what Gradle's Android plugin looks for. nil: it
// can.
func (t Toolchain) androidLack() *lack {
	var missing []string
	java := ""
	if home := t.Getenv("JAVA_HOME"); home != "" && t.IsFile(filepath.Join(home, "bin", "java")) {
		java = filepath.Join(home, "bin", "java")
	} else if p, err := t.LookPath("java"); err == nil {
		java = p
		// macOS's stub stands in for a JDK only when java_home finds one.
		if t.GOOS == "darwin" && p == macJavaStub && !t.Succeeds("/usr/libexec/java_home") {
			java = ""
		}
	}
	if java == "" {
		missing = append(missing, "no JDK (java is not on the PATH and JAVA_HOME names none)")
	}
	sdk := ""
	for _, name := range []string{"ANDROID_HOME", "ANDROID_SDK_ROOT"} {
		if dir := t.Getenv(name); dir != "" && t.IsDir(dir) {
			sdk = dir
			break
		}
	}
	if sdk == "" {
		missing = append(missing, "no Android SDK (neither ANDROID_HOME nor ANDROID_SDK_ROOT names its directory)")
	}
	if len(missing) == 0 {
		return nil
	}
	return &lack{"this host has " + strings.Join(missing, " and "),
		"install JDK 17 and the Android SDK and set ANDROID_HOME (in the worker's environment), or, for projects that bring their own Gradle, set --platforms android"}
}

// LocalPlatforms decides which platforms a worker with the local driver
// advertises. Its builds run on this host itself, so it advertises only
// what the host has the tools for: iOS needs macOS with xcodebuild; Android
// a JDK and an Android SDK. A Linux worker never advertises iOS, whatever
// --platforms says: it would take iOS builds only to fail each one. An
// explicit android in configured wins over the toolchain check (a project
// may bring its own Gradle, as `make run`'s sample does). The result names
// what is built and, for each platform left out, why and the fix.
func LocalPlatforms(configured []string, t Toolchain) ([]string, Result) {
	r := Result{ID: IDPlatforms}
	explicit := len(configured) > 0
	if !explicit {
		configured = DefaultPlatforms
	}
	var use, notes, whyNot, fixes []string
	for _, p := range configured {
		var l *lack
		switch p {
		case api.PlatformIOS:
			l = t.iosLack()
		case api.PlatformAndroid:
			if l = t.androidLack(); l != nil && explicit {
				notes = append(notes, "android as set, though "+l.why)
				l = nil
			}
		}
		if l == nil {
			use = append(use, p)
			continue
		}
		whyNot = append(whyNot, "not "+p+": "+l.why)
		fixes = append(fixes, l.fix)
	}
	switch {
	case len(use) == 0:
		r.Severity, r.Message = Fail, "this worker takes no builds: "+strings.Join(whyNot, "; ")
	case len(whyNot) > 0:
		r.Severity, r.Message = Warn, fmt.Sprintf("building %s on this host (local driver); %s", strings.Join(use, ", "), strings.Join(whyNot, "; "))
	default:
		r.Severity, r.Message = OK, fmt.Sprintf("building %s on this host (local driver)", strings.Join(use, ", "))
	}
	if len(notes) > 0 {
		r.Message += " (" + strings.Join(notes, "; ") + ")"
	}
	r.Fix = strings.Join(fixes, "; ")
	return slices.Clip(use), r
}
