package agent

import (
	"context"
)

// Driver provides isolated environments for builds: Tart VMs on a Mac, or
// plain child processes (the local driver) for development and Linux.
type Driver interface {
	// Name identifies the driver in logs and diagnostics.
	Name() string
	// Cleanup removes environments whose agent is gone (a crash
	// mid-build). It never touches the environments of another agent that
	// still runs on this host (the menu-bar app and `freeagent run` can
	// share one Mac), nor anything no agent made.
	Cleanup(ctx context.Context) error
	// Start boots an environment named name for one build attempt, with
	// sharedDir visible inside it as the "build-config" share, running the
	// in-VM bootstrap. It returns once the environment's process runs.
	Start(ctx context.Context, name, sharedDir string, res Resources) (Instance, error)
}

// Resources is what one environment gets: its size, and its dependency
// caches.
type Resources struct {
	CPU      int // cores; 0 keeps the template's
	MemoryMB int // 0 keeps the template's
	// CacheDir is shared read-only with the environment as the "caches"
	// share (vmbootstrap.DefaultCacheShare in a VM); "" for none.
	CacheDir string
	// Suspendable boots the environment so that it can be suspended
	// (Suspender): a warm spare on a host that can suspend VMs.
	Suspendable bool
}

// SpareDriver is a Driver that can keep a warm spare: an environment
// booted before any build came, with empty shares that the build's files
// reach when one is claimed (Start's shares are seen live by the guest).
type SpareDriver interface {
	Driver
	// TemplateVersion identifies what a new environment is made from now;
	// a spare made from another version is stale. An error says the
	// template is gone or unreadable, in words for the owner.
	TemplateVersion(ctx context.Context) (string, error)
	// ForeignVMs counts the VMs running on this host that this agent did
	// not start (the owner's, another agent's): a spare must not hold a
	// slot of the host's VM limit that they may need.
	ForeignVMs(ctx context.Context) (int, error)
}

// Suspender is an Instance started Suspendable: Suspend parks it (no CPU,
// and no slot of the host's VM limit) until Resume. Exited is not closed by
// a suspension; a failed Suspend or Resume leaves the environment ended.
type Suspender interface {
	Suspend(ctx context.Context) error
	Resume(ctx context.Context) error
}

// Instance is one running environment.
type Instance interface {
	// Exited is closed when the environment's process has ended (the VM
	// powered off or crashed); Err then says how: a *StartError when the
	// environment never started (e.g. CodeVMLimit).
	Exited() <-chan struct{}
	Err() error
	// Destroy stops and deletes the environment. It is safe to call more
	// than once and after the process exited.
	Destroy(ctx context.Context) error
}

// CodeVMLimit is a StartError's code when the host refused another VM
// (macOS allows two at a time). Tart reports it only after Start returned,
// so it also comes from Instance.Err. It is not the build's fault: the build
// is handed back without consuming an attempt, and the agent waits before
// taking another.
const CodeVMLimit = "vm_limit"

// StartError classifies a failure to start an environment.
type StartError struct {
	Retryable bool   // host trouble (VM limit, boot failure) rather than a bad build
	Code      string // machine code for the controller
	Err       error
}

func (e *StartError) Error() string { return e.Err.Error() }
func (e *StartError) Unwrap() error { return e.Err }
