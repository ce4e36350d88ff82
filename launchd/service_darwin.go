//go:build darwin

package launchd

import (
	"errors"
	"fmt"
	"os"

	"github.com/kardianos/service"
)

// Install writes the plist through kardianos/service and loads it, which
// starts the app now (RunAtLoad). An existing agent is replaced, so a moved
// app can be installed again.
func (h HostAgent) Install() error {
	s, err := h.service()
	if err != nil {
		return err
	}
	if _, err := os.Stat(h.PlistPath()); err == nil {
		if err := s.Uninstall(); err != nil {
			return fmt.Errorf("replace the existing LaunchAgent %s: %w", h.PlistPath(), err)
		}
	}
	if err := s.Install(); err != nil {
		return fmt.Errorf("install the LaunchAgent %s: %w", h.PlistPath(), err)
	}
	if err := s.Start(); err != nil {
		return fmt.Errorf("load the LaunchAgent with launchctl: %w", err)
	}
	return nil
}

// Uninstall unloads the agent (stopping the app it started) and removes
// the plist. Uninstalling what is not installed is not an error.
func (h HostAgent) Uninstall() error {
	s, err := h.service()
	if err != nil {
		return err
	}
	if _, err := os.Stat(h.PlistPath()); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err := s.Uninstall(); err != nil {
		return fmt.Errorf("uninstall the LaunchAgent %s: %w", h.PlistPath(), err)
	}
	return nil
}

// Status asks launchctl whether the agent is loaded and running.
func (h HostAgent) Status() (Status, error) {
	s, err := h.service()
	if err != nil {
		return NotInstalled, err
	}
	st, err := s.Status()
	switch {
	case errors.Is(err, service.ErrNotInstalled):
		return NotInstalled, nil
	case err != nil:
		return NotInstalled, fmt.Errorf("ask launchctl about %s: %w", HostLabel, err)
	case st == service.StatusRunning:
		return Running, nil
	}
	return Stopped, nil
}

func (h HostAgent) service() (service.Service, error) {
	text, err := h.render()
	if err != nil {
		return nil, err
	}
	// Our own plist replaces kardianos' template, whose defaults suit a
	// daemon, not a menu-bar app (KeepAlive true relaunches after Quit).
	return service.New(noProgram{}, &service.Config{
		Name:       HostLabel,
		Executable: h.Executable,
		Arguments:  h.Args,
		Option:     service.KeyValue{"UserService": true, "LaunchdConfig": string(text)},
	})
}

// noProgram satisfies service.Interface, which only service.Run uses: the
// app runs its own main loop.
type noProgram struct{}

func (noProgram) Start(service.Service) error { return nil }
func (noProgram) Stop(service.Service) error  { return nil }
