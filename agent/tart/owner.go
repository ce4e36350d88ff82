package tart

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// Several agents can share one Mac and one Tart home (the menu-bar app and
// `freeagent run`, two users' agents on one TART_HOME, a test script), so a
// VM is owned by the agent process that made it: its name carries the
// instance id of that process (fa-<instance>-<build>-<attempt>), and the
// process holds an exclusive flock on <TART_HOME>/freeagent/owners/<instance>.lock
// for its whole life. The kernel drops the lock when the process dies, even
// by SIGKILL, so a sweep removes exactly the VMs whose owner is gone.

// ownerVM matches the names this version gives its VMs: fa-<instance>-….
var ownerVM = regexp.MustCompile(`^` + VMPrefix + `([0-9a-f]{12})-.`)

// legacyVM matches the names earlier versions gave their VMs,
// fa-<build id>-<attempt id>, which carry no owner: they are swept as before.
var legacyVM = regexp.MustCompile(`^` + VMPrefix + `[0-9a-z]{26}-[0-9a-z]{26}$`)

// owner is this Driver's claim: its instance id and the locked file.
type owner struct {
	id   string
	lock *os.File
}

// tartHome is the TART_HOME `tart` runs with: the driver's Env wins over the
// process environment (exec keeps the last entry), else Tart's ~/.tart.
func (d *Driver) tartHome() (string, error) {
	for i := len(d.Env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(d.Env[i], "TART_HOME="); ok && v != "" {
			return filepath.Abs(v)
		}
	}
	if v := os.Getenv("TART_HOME"); v != "" {
		return filepath.Abs(v)
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("find Tart's home: %w (set TART_HOME)", err)
	}
	return filepath.Join(home, ".tart"), nil
}

func (d *Driver) ownersDir() (string, error) {
	home, err := d.tartHome()
	if err != nil {
		return "", err
	}
	return filepath.Join(home, "freeagent", "owners"), nil
}

// instance returns this driver's instance id, claiming it (creating and
// locking its owner file) on first use. The file is created under a
// temporary name, locked, then renamed into place, so no sweeper can ever
// see it unlocked.
func (d *Driver) instance() (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.self != nil {
		return d.self.id, nil
	}
	dir, err := d.ownersDir()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("create the VM owners directory: %w (check the permissions of Tart's home, TART_HOME)", err)
	}
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("make an instance id: %w", err)
	}
	id := hex.EncodeToString(b[:])
	tmp, err := os.CreateTemp(dir, ".claim-*")
	if err != nil {
		return "", fmt.Errorf("claim VM ownership: %w", err)
	}
	if ok, err := tryFlock(tmp); err != nil || !ok {
		tmp.Close()
		os.Remove(tmp.Name())
		return "", fmt.Errorf("lock %s: %v (locked: %v); is Tart's home on a file system without flock?", tmp.Name(), err, !ok)
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, id+".lock")); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return "", fmt.Errorf("claim VM ownership: %w", err)
	}
	d.self = &owner{id: id, lock: tmp}
	return id, nil
}

// Close gives up this driver's ownership: its lock file is removed, and
// any VM of its still left becomes an orphan for the next sweep. Exiting
// has the same effect.
func (d *Driver) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.self == nil {
		return nil
	}
	os.Remove(filepath.Join(filepath.Dir(d.self.lock.Name()), d.self.id+".lock"))
	err := d.self.lock.Close()
	d.self = nil
	return err
}

// vmName is the name of this instance's VM for an environment the agent
// named fa-<build>-<attempt>.
func vmName(instance, name string) string {
	return VMPrefix + instance + "-" + strings.TrimPrefix(name, VMPrefix)
}

// deadOwner reports whether the instance id's owner is gone; if so the
// caller holds its lock (so concurrent sweeps skip it) until release,
// which also removes the lock file.
func deadOwner(dir, id string) (dead bool, release func(), err error) {
	path := filepath.Join(dir, id+".lock")
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return true, func() {}, nil // never claimed here, or already swept
	}
	if err != nil {
		return false, nil, fmt.Errorf("check the owner of %s VMs: %w", id, err)
	}
	ok, err := tryFlock(f)
	if err != nil || !ok {
		f.Close()
		return false, nil, err
	}
	return true, func() {
		os.Remove(path)
		f.Close()
	}, nil
}
