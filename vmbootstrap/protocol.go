package vmbootstrap

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/freeagent-build/freeagent/internal/vmshare"
)

// writeFileAtomic replaces dir/name with data so that a reader (or a power
// cut) sees either the old file, no file, or the whole new one.
func writeFileAtomic(dir, name string, data []byte) error {
	var rnd [6]byte
	rand.Read(rnd[:]) //nolint:errcheck // crypto/rand does not fail on supported platforms
	tmp := filepath.Join(dir, "."+name+".tmp-"+hex.EncodeToString(rnd[:]))
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, name))
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", name, err)
	}
	// Make the rename itself durable. Some file systems (virtio-fs among
	// them, depending on the host) refuse fsync on a directory: the file's
	// own fsync above is what matters most, so that error is not fatal.
	if d, err := os.Open(dir); err == nil {
		d.Sync() //nolint:errcheck
		d.Close()
	}
	return nil
}

func writeJSONAtomic(dir, name string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", name, err)
	}
	return writeFileAtomic(dir, name, append(b, '\n'))
}

// errNoBuildConfig is returned by waitForBuildConfig when the shared
// directory exists but holds no usable config before the timeout.
var errNoBuildConfig = errors.New("no usable " + vmshare.BuildConfigFile)

// waitForBuildConfig polls for the shared directory and its config file
// until timeout: the macOS guest automounts the share during boot, possibly
// after this program started. It reports whether the directory itself was
// found (so a failure can be reported there).
func waitForBuildConfig(ctx context.Context, dir string, timeout, every time.Duration) (vmshare.BuildConfig, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var lastErr error
	dirSeen := false
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		cfg, err := readBuildConfig(dir)
		if err == nil {
			return cfg, true, nil
		}
		lastErr = err
		if st, serr := os.Stat(dir); serr == nil && st.IsDir() {
			dirSeen = true
		}
		select {
		case <-ctx.Done():
			if parent := context.Cause(ctx); parent != nil && !errors.Is(parent, context.DeadlineExceeded) {
				return vmshare.BuildConfig{}, dirSeen, fmt.Errorf("wait for %s: %w", filepath.Join(dir, vmshare.BuildConfigFile), parent)
			}
			return vmshare.BuildConfig{}, dirSeen, fmt.Errorf("%w after %s in %s: %w", errNoBuildConfig, timeout, dir, lastErr)
		case <-t.C:
		}
	}
}

func readBuildConfig(dir string) (vmshare.BuildConfig, error) {
	var cfg vmshare.BuildConfig
	b, err := os.ReadFile(filepath.Join(dir, vmshare.BuildConfigFile))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return cfg, fmt.Errorf("%s does not exist yet", vmshare.BuildConfigFile)
		}
		return cfg, fmt.Errorf("read %s: %w", vmshare.BuildConfigFile, err)
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		// A host that does not write atomically may be caught mid-write:
		// the next poll sees the whole file.
		return cfg, fmt.Errorf("parse %s: %w", vmshare.BuildConfigFile, err)
	}
	return cfg, cfg.Validate()
}

// vmPhaseLine says what the build runs on (a warm spare or a fresh VM) and
// how long it took from the claim to now, on the host's clock: the time
// the host's file system gives a file created in the shared folder,
// against the claim time the host wrote. The guest's own clock is not
// used: a VM resumed from a snapshot runs behind until it synchronises.
// "" when the host said nothing (an older agent).
func vmPhaseLine(dir string, vm *vmshare.VMInfo) string {
	if vm == nil {
		return ""
	}
	kind := "a fresh VM, cloned and booted for this build"
	if vm.WarmSpare {
		kind = "a warm spare, booted before the build was claimed"
	}
	f, err := os.CreateTemp(dir, ".host-clock-")
	if err != nil {
		return kind
	}
	defer os.Remove(f.Name())
	st, err := f.Stat()
	f.Close()
	if err != nil || vm.ClaimedAt.IsZero() {
		return kind
	}
	return fmt.Sprintf("%s; the VM phase took %s (from the claim to this line)", kind, st.ModTime().Sub(vm.ClaimedAt).Round(100*time.Millisecond))
}
