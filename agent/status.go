package agent

import (
	"context"
	"slices"
	"time"

	"github.com/freeagent-build/freeagent/api"
)

// Awake keeps the host from sleeping while builds run. The agent calls
// SetBusy(true) when a build starts and SetBusy(false) when none is left;
// calls that change nothing must do nothing.
type Awake interface {
	SetBusy(busy bool) error
}

// State is the agent's condition as the tray shows it.
type State string

const (
	StateConnecting     State = "connecting"
	StateOnline         State = "online"   // idle or building; see Status.Builds
	StatePaused         State = "paused"   // not taking builds by choice
	StateDraining       State = "draining" // finishing running builds before stopping
	StateOffline        State = "offline"  // controller unreachable; Status.Reason says why
	StateNeedsAttention State = "needs_attention"
	StateStopped        State = "stopped"
)

// Status is a snapshot for the menu bar and diagnostics.
type Status struct {
	State  State
	Reason string // for offline / needs_attention: what is wrong and the fix
	// When paused: OwnerPaused (the owner's choice in the menu bar) and
	// HostPause (why the owner's rules hold builds back: "on battery").
	OwnerPaused bool
	HostPause   string
	WorkerID    string
	Builds      []BuildStatus
	// Cache is the dependency caches' size and hit counts (Keys empty),
	// nil without caches or before the first report.
	Cache *api.WorkerCache
	// Spare is the warm spare and its hit counts (spare.go).
	Spare SpareStatus
}

// BuildStatus is one running build.
type BuildStatus struct {
	ID        string
	Platform  string
	Phase     string
	Progress  int
	StartedAt time.Time
}

// Status returns the current state.
func (a *Agent) Status() Status {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.status
	s.WorkerID = a.workerID
	s.OwnerPaused, s.HostPause = a.paused, a.hostPause
	s.Builds = nil
	for _, b := range a.running {
		s.Builds = append(s.Builds, b.snapshot())
	}
	slices.SortFunc(s.Builds, func(x, y BuildStatus) int { return x.StartedAt.Compare(y.StartedAt) })
	return s
}

// SetPaused stops (true) or resumes taking new builds; running builds go on.
// Pausing ends the poll in flight, so no build arrives after it.
func (a *Agent) SetPaused(p bool) {
	a.mu.Lock()
	a.paused = p
	if p && a.pollCancel != nil {
		a.pollCancel()
	}
	a.mu.Unlock()
	select {
	case a.slotFreed <- struct{}{}:
	default:
	}
	a.setOnline()
	a.pauseChanged()
	a.kickSpare()
}

// StopBuilds hands the running builds back to the controller now, without
// costing them an attempt, and goes on taking builds unless paused: the
// owner's "Stop Builds Now" (the Mac is needed, and running builds would
// otherwise finish first).
func (a *Agent) StopBuilds() {
	a.mu.Lock()
	var stops []context.CancelCauseFunc
	for _, b := range a.running {
		b.mu.Lock()
		if b.stop != nil {
			stops = append(stops, b.stop)
		}
		b.mu.Unlock()
	}
	a.mu.Unlock()
	if len(stops) > 0 {
		a.log.WithField("builds", len(stops)).Warn("stopping the running builds at the owner's request and handing them back")
	}
	for _, stop := range stops {
		stop(errHandedBack)
	}
}

func (a *Agent) setState(s State, reason string) {
	a.mu.Lock()
	a.status.State, a.status.Reason = s, reason
	a.mu.Unlock()
}

// setOnline reports the normal state after a successful exchange.
func (a *Agent) setOnline() {
	switch {
	case a.isDraining():
		a.setState(StateDraining, "")
	default:
		a.mu.Lock()
		paused := a.pausedLocked()
		a.mu.Unlock()
		if paused {
			a.setState(StatePaused, "")
		} else {
			a.setState(StateOnline, "")
		}
	}
}

// reportBusy tells cfg.Awake whether builds are running. Builds start and
// end on different goroutines: awakeMu makes each call read the count after
// the change it reports, so the last call always carries the current state.
func (a *Agent) reportBusy() {
	if a.cfg.Awake == nil {
		return
	}
	a.awakeMu.Lock()
	defer a.awakeMu.Unlock()
	a.mu.Lock()
	busy := len(a.running) > 0
	a.mu.Unlock()
	if err := a.cfg.Awake.SetBusy(busy); err != nil {
		a.log.WithError(err).Warn("could not keep the host awake for the running builds")
	}
}
