package launchd

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

const (
	// HostLabel is the label of the app's LaunchAgent and the name of its
	// plist, ~/Library/LaunchAgents/build.freeagent.agent.plist.
	HostLabel = "build.freeagent.agent"
	// BundleID is the app's CFBundleIdentifier; macOS names the login item
	// after that app (Login Items settings) rather than after the binary.
	BundleID = "build.freeagent.FreeAgent"
)

// HostAgent is the per-user LaunchAgent that starts the app at login. It
// satisfies the tray's login-item interface (Enabled, SetEnabled); Install,
// Uninstall and Status (macOS only) also load and unload it.
type HostAgent struct {
	Executable string   // absolute path of freeagent, normally inside FreeAgent.app
	Args       []string // its arguments, e.g. {"app"}
	Home       string   // the user's home folder
}

// CurrentApp describes the agent for the running executable (symlinks
// resolved, so a Homebrew link points launchd into the app bundle).
func CurrentApp(args ...string) (HostAgent, error) {
	exe, err := os.Executable()
	if err == nil {
		exe, err = filepath.EvalSymlinks(exe)
	}
	if err != nil {
		return HostAgent{}, fmt.Errorf("find this program's path for the LaunchAgent: %w", err)
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return HostAgent{}, fmt.Errorf("find the home folder for the LaunchAgent: %w", err)
	}
	return HostAgent{Executable: exe, Args: args, Home: home}, nil
}

// PlistPath is where the agent's plist lives.
func (h HostAgent) PlistPath() string {
	return filepath.Join(h.Home, "Library", "LaunchAgents", HostLabel+".plist")
}

// LogDir is where launchd sends the app's standard output and error.
func (h HostAgent) LogDir() string {
	return filepath.Join(h.Home, "Library", "Logs", "FreeAgent")
}

// Job is the launchd job: started at login in the GUI session, relaunched
// after a crash but not after Quit.
func (h HostAgent) Job() (Job, error) {
	if !filepath.IsAbs(h.Executable) || !filepath.IsAbs(h.Home) {
		return Job{}, fmt.Errorf("LaunchAgent needs absolute paths (executable %q, home %q)", h.Executable, h.Home)
	}
	// kardianos/service treats the plist as a template: refuse text its
	// engine would interpret rather than write a different file.
	for _, s := range append([]string{h.Executable, h.Home}, h.Args...) {
		if strings.Contains(s, "{{") {
			return Job{}, fmt.Errorf("LaunchAgent path or argument %q contains \"{{\": move the app to a plain path", s)
		}
	}
	if err := checkLasting(h.Executable); err != nil {
		return Job{}, err
	}
	return Job{
		Label:                       HostLabel,
		ProgramArguments:            append([]string{h.Executable}, h.Args...),
		RunAtLoad:                   true,
		KeepAlive:                   &KeepAlive{SuccessfulExit: ptr(false)},
		ProcessType:                 "Interactive",
		LimitLoadToSessionType:      "Aqua",
		StandardOutPath:             filepath.Join(h.LogDir(), "agent.out.log"),
		StandardErrorPath:           filepath.Join(h.LogDir(), "agent.err.log"),
		AssociatedBundleIdentifiers: []string{BundleID},
		// launchd's own PATH lacks Homebrew, where tart is installed; the
		// app also looks there itself (homebrew.LookPath) when opened from
		// Finder, which gives it the same short PATH.
		EnvironmentVariables: map[string]string{"PATH": AgentPATH},
	}, nil
}

// checkLasting refuses an executable that will not be there after a
// restart: an app opened from a mounted disk image (/Volumes/…) or one
// macOS runs from a random read-only copy because it was opened where it
// was downloaded (App Translocation, …/AppTranslocation/…). A LaunchAgent
// pointing there fails at every login.
func checkLasting(exe string) error {
	if strings.HasPrefix(exe, "/Volumes/") || strings.Contains(exe, "/AppTranslocation/") {
		return fmt.Errorf("Free Agent runs from %s, which is gone after a restart (a disk image or a temporary copy macOS made): "+
			"move FreeAgent.app to /Applications (or ~/Applications), open it from there and turn on Start at login again", exe)
	}
	return nil
}

// Enabled reports whether the app starts at login: our plist is in
// ~/Library/LaunchAgents.
func (h HostAgent) Enabled() (bool, error) {
	b, err := os.ReadFile(h.PlistPath())
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read the login item %s: %w", h.PlistPath(), err)
	}
	j, err := Parse(b)
	if err == nil && j.Label != HostLabel {
		err = fmt.Errorf("its Label is %q, not %q", j.Label, HostLabel)
	}
	if err != nil {
		return false, fmt.Errorf("%s is not a Free Agent LaunchAgent (%v): delete it and turn on Start at login again", h.PlistPath(), err)
	}
	return true, nil
}

// SetEnabled writes or removes the plist. launchd reads it at the next
// login; it is deliberately not loaded now, because RunAtLoad would start
// a second copy of the running app, and unloading would quit this one.
func (h HostAgent) SetEnabled(on bool) error {
	if !on {
		if err := os.Remove(h.PlistPath()); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove the login item: %w", err)
		}
		return nil
	}
	b, err := h.render()
	if err != nil {
		return err
	}
	return writeAtomic(h.PlistPath(), b)
}

// render returns the plist text and creates the log folder, which launchd
// does not create itself.
func (h HostAgent) render() ([]byte, error) {
	j, err := h.Job()
	if err != nil {
		return nil, err
	}
	b, err := j.Render()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(h.LogDir(), 0o755); err != nil {
		return nil, fmt.Errorf("create the log folder: %w", err)
	}
	return b, nil
}

func writeAtomic(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("create %s: %w", filepath.Dir(path), err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".freeagent-*.plist")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(b)
	if err == nil {
		err = tmp.Chmod(0o644)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
