//go:build !darwin

package launchd

import (
	"context"
	"errors"
)

// ErrUnsupported is what the service commands return off macOS.
var ErrUnsupported = errors.New("LaunchAgents exist only on macOS; elsewhere run `freeagent run` under your own service manager (for example a systemd user unit)")

// Install is macOS only.
func (HostAgent) Install() error { return ErrUnsupported }

// Uninstall is macOS only.
func (HostAgent) Uninstall() error { return ErrUnsupported }

// Status is macOS only.
func (HostAgent) Status() (Status, error) { return NotInstalled, ErrUnsupported }

// RunOnce is macOS only.
func RunOnce(context.Context, Job, string) (int, error) { return 0, ErrUnsupported }
