//go:build !linux && !darwin

package cli

import (
	"errors"
	"os"
)

// isTerminal is false where we cannot tell: no colours, no progress bars,
// no prompts (flags and environment variables still work).
func isTerminal(*os.File) bool { return false }

func readHidden(*os.File) (string, error) {
	return "", errors.New("hidden prompts are not supported on this system")
}
