//go:build !unix

package secrets

import "os/exec"

// withoutTerminal: no /dev/tty, and no security tool, off Unix.
func withoutTerminal(*exec.Cmd) {}
