package main

import (
	"os"
	"path/filepath"
)

// On a Mac every build gets a fresh Tart VM.
const defaultDriver = "tart"

// defaultOpener shows URLs and files in the desktop's default application.
const defaultOpener = "open"

func defaultDataDir() string {
	home, _ := os.UserHomeDir()
	return filepath.Join(home, "Library", "Application Support", "FreeAgent")
}
