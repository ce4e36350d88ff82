// Package conffile reads and updates the worker's settings file
// (DATA_DIR/agent.conf): "name = value" lines, # comments. `freeagent
// setup` and the Preferences page write it; every command reads it.
package conffile

import (
	"bufio"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/freeagent-build/freeagent/internal/config"
)

// Name is the file's name in the data folder.
const Name = "agent.conf"

// Read returns the file's settings; a missing file has none.
func Read(path string) (map[string]string, error) {
	f, err := Load(path)
	return f.Values, err
}

// Load returns the file's settings with the line of each, for the
// worker's layered configuration (internal/config) to name in errors; a
// missing file has none.
func Load(path string) (config.File, error) {
	file := config.File{Path: path, Values: map[string]string{}, Lines: map[string]int{}}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return file, nil
	}
	if err != nil {
		return config.File{}, fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return config.File{}, fmt.Errorf("%s:%d: want \"name = value\", got %q", path, n, line)
		}
		k = strings.TrimSpace(k)
		file.Values[k], file.Lines[k] = strings.TrimSpace(v), n
	}
	if err := sc.Err(); err != nil {
		return config.File{}, fmt.Errorf("read %s: %w", path, err)
	}
	return file, nil
}

// Update sets the given keys (an empty value removes the key), keeps the
// others, and replaces the file atomically.
func Update(path string, set map[string]string) error {
	m, err := Read(path)
	if err != nil {
		return err
	}
	for k, v := range set {
		if strings.ContainsAny(k+v, "\n\r") || strings.Contains(k, "=") {
			return fmt.Errorf("setting %q: names cannot contain '=' and values cannot span lines", k)
		}
		if v == "" {
			delete(m, k)
		} else {
			m[k] = v
		}
	}
	var b strings.Builder
	b.WriteString("# Free Agent worker settings (flags and FREEAGENT_* variables override these)\n")
	for _, k := range slices.Sorted(maps.Keys(m)) {
		fmt.Fprintf(&b, "%s = %s\n", k, m[k])
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	tmp, err := os.CreateTemp(dir, ".agent.conf-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(b.String()); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
