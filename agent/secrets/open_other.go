//go:build !darwin

package secrets

import "path/filepath"

// Open returns the platform's store: a 0600 file in dir on this platform.
func Open(dir string) Store { return &FileStore{Path: filepath.Join(dir, "credentials.json")} }
