//go:build !darwin

package main

import (
	"os"
	"path/filepath"
)

// Tart exists only on macOS; elsewhere the local driver is the only one.
const defaultDriver = "local"

// defaultOpener shows URLs and files in the desktop's default application.
const defaultOpener = "xdg-open"

func defaultDataDir() string {
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "freeagent")
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".local", "share", "freeagent")
}

// macOSVersion is the host's macOS version: none off macOS.
func macOSVersion() string { return "" }
