// Package secrets keeps the worker's credentials (API key, worker id): in
// the macOS Keychain on a Mac, in a 0600 file elsewhere.
//
// Keychain items are generic passwords with service Service
// ("build.freeagent.worker"), account KeyAPIKey ("api-key") or KeyWorkerID
// ("worker-id") and label "Free Agent worker <account>", in the login
// keychain (file-based: never synced; readable while it is unlocked, from
// login on). Both builds write there: the cgo one through the Security
// framework, the no-cgo one through /usr/bin/security. An accessibility
// class (kSecAttrAccessible) would have no effect on that keychain, so none
// is set. Who may read an item is its ACL: the program that created it,
// recorded by its code signature's designated requirement, so an update
// signed with the same Developer ID reads it without a prompt, while an
// unsigned or ad-hoc signed build (make build, a development copy) asks
// once per new binary: "Always Allow" answers it for that binary.
// A refusal (locked keychain, Deny, wrong password) wraps ErrDenied and
// says how to fix it.
package secrets

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// Service is the Keychain service name the credentials are stored under.
const Service = "build.freeagent.worker"

// Keys of the stored credentials.
const (
	KeyAPIKey   = "api-key"
	KeyWorkerID = "worker-id"
)

// ErrNotFound is returned by Get for a key that is not stored.
var ErrNotFound = errors.New("not stored")

// Store keeps small secrets by key.
type Store interface {
	Get(key string) (string, error)
	Set(key, value string) error
	Delete(key string) error
	// Where names the backing store for messages ("the macOS Keychain", a path).
	Where() string
}

// FileStore keeps secrets in one JSON file readable only by its owner.
type FileStore struct {
	Path string
	mu   sync.Mutex
}

// Where implements Store.
func (f *FileStore) Where() string { return f.Path }

func (f *FileStore) load() (map[string]string, error) {
	m := map[string]string{}
	b, err := os.ReadFile(f.Path)
	if errors.Is(err, os.ErrNotExist) {
		return m, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read credentials %s: %w", f.Path, err)
	}
	if st, err := os.Stat(f.Path); err == nil && st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("credentials file %s is readable by others (mode %v); fix with: chmod 600 %s", f.Path, st.Mode().Perm(), f.Path)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("credentials file %s is corrupt (%v); delete it and run `freeagent setup` again", f.Path, err)
	}
	return m, nil
}

// Get implements Store.
func (f *FileStore) Get(key string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m, err := f.load()
	if err != nil {
		return "", err
	}
	v, ok := m[key]
	if !ok {
		return "", ErrNotFound
	}
	return v, nil
}

// Set implements Store, replacing the file atomically.
func (f *FileStore) Set(key, value string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	m, err := f.load()
	if err != nil {
		return err
	}
	m[key] = value
	return f.save(m)
}

// Delete implements Store.
func (f *FileStore) Delete(key string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	m, err := f.load()
	if err != nil {
		return err
	}
	delete(m, key)
	return f.save(m)
}

func (f *FileStore) save(m map[string]string) error {
	if err := os.MkdirAll(filepath.Dir(f.Path), 0o700); err != nil {
		return fmt.Errorf("create credentials directory: %w", err)
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(f.Path), ".credentials-*")
	if err != nil {
		return fmt.Errorf("write credentials: %w", err)
	}
	defer os.Remove(tmp.Name())
	err = tmp.Chmod(0o600)
	if err == nil {
		_, err = tmp.Write(b)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), f.Path)
	}
	if err != nil {
		return fmt.Errorf("write credentials %s: %w", f.Path, err)
	}
	return nil
}
