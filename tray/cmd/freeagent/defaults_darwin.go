package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// On a Mac every build gets a fresh Tart VM.
const defaultDriver = "tart"

// defaultOpener shows URLs and files in the desktop's default application.
const defaultOpener = "open"

func defaultDataDir() string {
	home, _ := os.UserHomeDir()
	return filepath.Join(home, "Library", "Application Support", "FreeAgent")
}

// macOSVersion is the host's macOS version (sw_vers), "" when it cannot be
// read: a label for the controller's worker list, never a gate.
func macOSVersion() string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "sw_vers", "-productVersion").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}
