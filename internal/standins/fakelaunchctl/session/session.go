// Package session tells which user's launchd session (bootstrap domain)
// the calling process is in, as the stand-in launchctl
// (internal/standins/fakelaunchctl) models it, for the stand-ins whose
// real tools need their own user's session: xcodebuild's asset catalog
// and Interface Builder compilers reach CoreSimulatorService through it.
//
// On macOS a process inherits its bootstrap namespace from its parent,
// across setuid and sudo alike: `sudo -u other` runs other's process in
// the caller's session, where other's per-user services are not. Only
// `launchctl asuser UID` (as root) and logins move a process into a
// user's own session. The stand-in launchctl waits for the command it
// starts, so it stays among that command's ancestors: a process's
// session is the one of its nearest ancestor `launchctl asuser UID`. A
// process with none is outside any modelled session: the test did not
// model launchd, and callers accept it.
package session

import "errors"

// ErrNotModelled is returned by Manager for a process with no modelled
// session.
var ErrNotModelled = errors.New("no launchd session is modelled for this process (no `launchctl asuser` among its ancestors)")

// Manager returns the uid whose launchd session the calling process is
// in, or ErrNotModelled.
func Manager() (int, error) { return manager() }
