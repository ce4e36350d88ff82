package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Config is the CLI's file: the controller, the API key, the build tokens of
// builds submitted from this machine and submits whose answer never came.
// It holds secrets, so it is written with mode 0600 in a 0700 directory.
type Config struct {
	ControllerURL  string                   `json:"controller_url,omitempty"`
	APIKey         string                   `json:"api_key,omitempty"`
	Builds         map[string]BuildRecord   `json:"builds,omitempty"`
	PendingSubmits map[string]PendingSubmit `json:"pending_submits,omitempty"`
}

// BuildRecord keeps a build's token so status, logs, download, cancel and
// retry work for it even with a key that may not read other builds.
type BuildRecord struct {
	Token         string    `json:"token"`
	ControllerURL string    `json:"controller_url,omitempty"`
	Platform      string    `json:"platform,omitempty"`
	SubmittedAt   time.Time `json:"submitted_at"`
}

// PendingSubmit is a submit whose answer was not received: re-running the
// same submit reuses its Idempotency-Key, so the controller returns the build
// the first try created instead of making a second one.
type PendingSubmit struct {
	IdempotencyKey string    `json:"idempotency_key"`
	Project        string    `json:"project"`
	StartedAt      time.Time `json:"started_at"`
}

const (
	maxBuildRecords = 500
	pendingTTL      = 24 * time.Hour
	configEnv       = "EXPO_BUILD_CONFIG"
)

// configPath is EXPO_BUILD_CONFIG, else <user config dir>/expo-build/config.json
// (~/.config on Linux, ~/Library/Application Support on macOS).
func configPath(getenv func(string) string) (string, error) {
	if p := getenv(configEnv); p != "" {
		return filepath.Abs(p)
	}
	dir := getenv("XDG_CONFIG_HOME")
	if dir == "" {
		d, err := os.UserConfigDir()
		if err != nil {
			return "", fmt.Errorf("find the configuration directory: %w (set %s to a file path)", err, configEnv)
		}
		dir = d
	}
	return filepath.Join(dir, "expo-build", "config.json"), nil
}

// loadConfig reads the file; a missing file is an empty config. A file
// readable by others is tightened to 0600.
func loadConfig(path string) (*Config, error) {
	c := &Config{}
	st, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read config %s: %w", path, err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(path, 0o600); err != nil {
			return nil, fmt.Errorf("config %s is readable by other users and could not be made private: %w", path, err)
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config %s: %w", path, err)
	}
	if len(strings.TrimSpace(string(data))) == 0 {
		return c, nil
	}
	if err := json.Unmarshal(data, c); err != nil {
		return nil, &cliError{code: ExitUsage, msg: fmt.Sprintf("config %s is not valid JSON", path), err: err,
			hint: "fix it, or delete it and run `expo-build config` again"}
	}
	return c, nil
}

// updateConfig changes the file under a lock: concurrent expo-build
// processes (two submits in two terminals) never lose each other's tokens.
func updateConfig(path string, change func(*Config) error) (*Config, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("create config directory: %w", err)
	}
	unlock, err := lockFile(path + ".lock")
	if err != nil {
		return nil, err
	}
	defer unlock()
	c, err := loadConfig(path)
	if err != nil {
		return nil, err
	}
	if err := change(c); err != nil {
		return nil, err
	}
	c.prune(time.Now())
	data, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return nil, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".config-*.tmp")
	if err != nil {
		return nil, fmt.Errorf("write config: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("write config: %w", err)
	}
	if _, err := tmp.Write(append(data, '\n')); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("write config: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("write config: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return nil, fmt.Errorf("write config: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return nil, fmt.Errorf("write config: %w", err)
	}
	return c, nil
}

// lockFile takes an exclusive lock by creating path; a lock older than a
// minute is a crashed process's and is broken.
func lockFile(path string) (func(), error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err == nil {
			f.Close()
			return func() { os.Remove(path) }, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("lock config: %w", err)
		}
		if st, err := os.Stat(path); err == nil && time.Since(st.ModTime()) > time.Minute {
			os.Remove(path)
			continue
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("config is locked by another expo-build (%s); delete that file if no expo-build is running", path)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// prune bounds the file: the newest build records, unexpired pending submits.
func (c *Config) prune(now time.Time) {
	if len(c.Builds) > maxBuildRecords {
		ids := make([]string, 0, len(c.Builds))
		for id := range c.Builds {
			ids = append(ids, id)
		}
		slices.SortFunc(ids, func(a, b string) int { return c.Builds[b].SubmittedAt.Compare(c.Builds[a].SubmittedAt) })
		for _, id := range ids[maxBuildRecords:] {
			delete(c.Builds, id)
		}
	}
	for k, p := range c.PendingSubmits {
		if now.Sub(p.StartedAt) > pendingTTL {
			delete(c.PendingSubmits, k)
		}
	}
}

func (c *Config) token(id string) string {
	if r, ok := c.Builds[id]; ok {
		return r.Token
	}
	return ""
}
