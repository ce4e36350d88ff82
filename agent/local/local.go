// Package local is the development VM driver: it runs the in-VM bootstrap
// as a plain child process on this host, in a scratch directory.
//
// There is no isolation at all: the build runs as the agent's user with its
// access to this machine. Use it for development, for `make run` on Linux,
// and for trusted Android hosts; use the tart driver for anything else.
package local

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/freeagent-build/freeagent/agent"
	"github.com/freeagent-build/freeagent/agent/cache"
)

// Driver runs builds as local processes.
type Driver struct {
	// Root holds one scratch directory per build (the "VM disk").
	Root string
	// Env is added to the bootstrap's environment.
	Env []string
}

// Name implements agent.Driver.
func (d *Driver) Name() string { return "local" }

// Cleanup removes scratch directories a crashed run left behind.
func (d *Driver) Cleanup(ctx context.Context) error {
	entries, err := os.ReadDir(d.Root)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("list %s: %w", d.Root, err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "fa-") {
			removeScratch(filepath.Join(d.Root, e.Name()))
		}
	}
	return nil
}

// Start implements agent.Driver: it runs the freeagent-vm binary the agent
// put in sharedDir, in a fresh scratch directory that is also its HOME.
func (d *Driver) Start(ctx context.Context, name, sharedDir string, res agent.Resources) (agent.Instance, error) {
	// Absolute paths: the bootstrap runs with the scratch directory as cwd.
	sharedDir, err := filepath.Abs(sharedDir)
	if err != nil {
		return nil, &agent.StartError{Retryable: true, Code: "worker_disk", Err: err}
	}
	scratch, err := filepath.Abs(filepath.Join(d.Root, name))
	if err != nil {
		return nil, &agent.StartError{Retryable: true, Code: "worker_disk", Err: err}
	}
	if err := os.MkdirAll(scratch, 0o700); err != nil {
		return nil, &agent.StartError{Retryable: true, Code: "worker_disk", Err: fmt.Errorf("create scratch directory: %w", err)}
	}
	bin := filepath.Join(sharedDir, "freeagent-vm")
	if _, err := os.Stat(bin); err != nil {
		removeScratch(scratch)
		return nil, &agent.StartError{Retryable: true, Code: "vm_start_failed", Err: fmt.Errorf("no bootstrap binary in the shared directory: %w", err)}
	}
	log, err := os.Create(filepath.Join(scratch, "bootstrap.log"))
	if err != nil {
		removeScratch(scratch)
		return nil, &agent.StartError{Retryable: true, Code: "worker_disk", Err: err}
	}
	args := []string{"--shared-dir", sharedDir}
	if res.CacheDir != "" {
		// A copy, read-only: the build must not change the worker's caches
		// (there is no VM boundary here to enforce it).
		caches := filepath.Join(scratch, "caches")
		if err := copyReadOnly(res.CacheDir, caches); err != nil {
			removeScratch(scratch)
			return nil, &agent.StartError{Retryable: true, Code: "worker_disk", Err: fmt.Errorf("copy the dependency caches: %w", err)}
		}
		args = append(args, "--cache-share", caches)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = scratch
	cmd.Env = append(append(buildEnv(), "HOME="+scratch, "TMPDIR="+scratch), d.Env...)
	cmd.Stdout, cmd.Stderr = log, log
	p, err := agent.StartProcess(cmd)
	log.Close() // the child holds its own descriptor
	if err != nil {
		removeScratch(scratch)
		return nil, &agent.StartError{Retryable: true, Code: "vm_start_failed", Err: fmt.Errorf("start the bootstrap: %w", err)}
	}
	p.Cleanup = func(context.Context) error { return removeScratch(scratch) }
	return p, nil
}

// buildEnv is this process's environment without the worker's own
// credentials and settings: a build must never see the API key.
func buildEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "FREEAGENT_") && !strings.HasPrefix(kv, "EXPO_CONTROLLER_API_KEY=") {
			env = append(env, kv)
		}
	}
	return env
}

// copyReadOnly copies the regular files of src into dst (created), 0444,
// then makes dst 0555.
func copyReadOnly(src, dst string) error {
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		if err := cache.CopyReadOnly(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())); err != nil {
			return err
		}
	}
	return os.Chmod(dst, 0o555)
}

// removeScratch removes a build's scratch directory, its read-only copy of
// the caches included.
func removeScratch(scratch string) error {
	os.Chmod(filepath.Join(scratch, "caches"), 0o755) //nolint:errcheck // absent without caches
	return os.RemoveAll(scratch)
}
