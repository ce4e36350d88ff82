package agent

import (
	"slices"
	"time"

	"github.com/freeagent-build/freeagent/controller/api"
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
	State    State
	Reason   string // for offline / needs_attention: what is wrong and the fix
	WorkerID string
	Builds   []BuildStatus
	// Cache is the dependency caches' size and hit counts (Keys empty),
	// nil without caches or before the first report.
	Cache *api.WorkerCache
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
		paused := a.paused
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
