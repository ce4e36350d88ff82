// Package launchd renders the LaunchAgent property lists of Free Agent: the
// host app's "start at login" agent and the in-VM agent that starts the
// build bootstrap, and installs the host one (through
// github.com/kardianos/service on macOS).
package launchd

import (
	"bytes"
	"fmt"

	"github.com/freeagent-build/freeagent/internal/plist"
)

// AgentPATH is the PATH of Free Agent's LaunchAgents, host and guest.
// launchd's own is /usr/bin:/bin:/usr/sbin:/sbin, which lacks Homebrew's
// bin folders (homebrew.AppleSiliconPrefix, then homebrew.IntelPrefix),
// where tart, node, npm and pod are installed.
const AgentPATH = "/opt/homebrew/bin:/opt/homebrew/sbin:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"

// Job holds the launchd.plist(5) keys Free Agent writes.
type Job struct {
	Label                       string            `plist:"Label"`
	ProgramArguments            []string          `plist:"ProgramArguments"`
	RunAtLoad                   bool              `plist:"RunAtLoad"`
	KeepAlive                   *KeepAlive        `plist:"KeepAlive,omitempty"`
	ProcessType                 string            `plist:"ProcessType,omitempty"`
	LimitLoadToSessionType      string            `plist:"LimitLoadToSessionType,omitempty"`
	StandardOutPath             string            `plist:"StandardOutPath,omitempty"`
	StandardErrorPath           string            `plist:"StandardErrorPath,omitempty"`
	EnvironmentVariables        map[string]string `plist:"EnvironmentVariables,omitempty"`
	AssociatedBundleIdentifiers []string          `plist:"AssociatedBundleIdentifiers,omitempty"`
}

// KeepAlive is launchd's conditional relaunch dictionary. A nil field is
// left out, so launchd's default for it applies.
type KeepAlive struct {
	// SuccessfulExit false: relaunch only after a non-zero exit, so a
	// deliberate Quit (exit 0) stays quit.
	SuccessfulExit *bool `plist:"SuccessfulExit,omitempty"`
	// Crashed true: relaunch only after death by a signal.
	Crashed *bool `plist:"Crashed,omitempty"`
}

// Render returns the job as an XML property list, the form launchd and
// people read.
func (j Job) Render() ([]byte, error) {
	if j.Label == "" || len(j.ProgramArguments) == 0 {
		return nil, fmt.Errorf("launchd job needs a Label and ProgramArguments (got %q, %q)", j.Label, j.ProgramArguments)
	}
	b, err := plist.Marshal(j)
	if err != nil {
		return nil, fmt.Errorf("render the %s plist: %w", j.Label, err)
	}
	return append(b, '\n'), nil
}

// Parse reads a job plist (XML, binary or OpenStep format).
func Parse(b []byte) (Job, error) {
	var j Job
	if _, err := plist.Unmarshal(bytes.TrimSpace(b), &j); err != nil {
		return Job{}, fmt.Errorf("parse launchd plist: %w", err)
	}
	return j, nil
}

func ptr[T any](v T) *T { return &v }
