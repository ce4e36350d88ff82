package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/internal/vmshare"
)

// A warm spare is a VM the worker clones and boots while it may build and
// has a free VM slot, before any build comes: the next claimed build takes
// it, its files arrive in the spare's (until then empty) shared folder, and
// the launcher inside, already waiting, starts the bootstrap at once. A
// spare serves one build; the keeper then makes another. See
// docs/design.md, "Warm spares".

// The states of a warm spare (SpareStatus.State), as the controller shows
// them; none is "" here.
const (
	SpareBooting   = api.SpareBooting
	SpareReady     = api.SpareReady
	SpareSuspended = api.SpareSuspended
	SpareFailed    = api.SpareFailed
)

// SpareStatus is the worker's warm spare, for the menu and the controller.
type SpareStatus struct {
	State  string // one of the Spare* states; "" when the worker keeps none
	Reason string // why there is none (failed), or why it was last dropped
	Since  time.Time
	// Hits counts the builds that ran on a spare, Misses those that booted
	// a fresh VM (none was there, or it did not answer).
	Hits, Misses int64
}

// spare is one warm spare. Whoever takes it out of Agent.spare (the keeper
// dropping it, a build claiming it) owns it: destroys its VM and removes
// its folders.
type spare struct {
	op       sync.Mutex // held while its VM starts or is suspended
	name     string
	dir      string // shared as build-config; empty until a build claims it
	cacheDir string // shared read-only as caches; empty until then
	version  string // the template's when it was cloned
	started  time.Time
	inst     Instance // nil when its start failed
	ready    bool
	// suspended: parked by Suspend; the claim resumes it.
	suspended bool
}

// spareDriver is the driver when this worker keeps warm spares.
func (a *Agent) spareDriver() (SpareDriver, bool) {
	d, ok := a.driver.(SpareDriver)
	return d, ok && a.cfg.WarmSpare
}

// kickSpare wakes the keeper: something that decides whether a spare is
// wanted changed (a build started or ended, a pause, a drain).
func (a *Agent) kickSpare() {
	select {
	case a.spareKick <- struct{}{}:
	default:
	}
}

// keepSpare keeps one warm spare while one is wanted, until ctx ends; it
// leaves none behind.
func (a *Agent) keepSpare(ctx context.Context, d SpareDriver) {
	defer a.dropSpare(context.WithoutCancel(ctx), "the worker stopped")
	host := time.NewTicker(a.cfg.HostCheckInterval)
	defer host.Stop()
	files := time.NewTicker(a.cfg.FileWatchInterval)
	defer files.Stop()
	a.countForeignVMs(ctx, d)
	for {
		a.tendSpare(ctx, d)
		var booting <-chan time.Time // the launcher's word is awaited
		var exited <-chan struct{}
		a.mu.Lock()
		if sp := a.spare; sp != nil && sp.inst != nil {
			exited = sp.inst.Exited()
			if !sp.ready {
				booting = files.C
			}
		}
		a.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-a.spareKick:
		case <-exited:
		case <-booting:
		case <-host.C:
			a.countForeignVMs(ctx, d)
		}
	}
}

// countForeignVMs notes how many VMs this agent did not start run on the
// host (a failed count keeps the last).
func (a *Agent) countForeignVMs(ctx context.Context, d SpareDriver) {
	n, err := d.ForeignVMs(ctx)
	if err != nil {
		a.log.WithError(err).Debug("could not count the host's other VMs")
		return
	}
	a.mu.Lock()
	a.foreignVMs = n
	a.mu.Unlock()
}

// spareUnwantedLocked says why no spare may be kept now ("" when one may):
// the polite-guest rules and a drain hold it back as they hold builds, and
// it must not take a slot of the host's VM limit that a build of this
// worker, the owner or another agent needs.
func (a *Agent) spareUnwantedLocked() string {
	switch {
	case a.isDraining():
		return "the worker is stopping"
	case a.paused:
		return "the worker is paused"
	case a.hostPause != "":
		return "the worker is paused: " + a.hostPause
	case time.Now().Before(a.hostFullUntil):
		return "macOS refused another VM; waiting"
	}
	// A build just claimed takes the spare: it counts once it holds (or
	// is getting) its VM, and a build whose VM is being torn down still does.
	vms := 0
	for _, b := range a.running {
		b.mu.Lock()
		if b.vmSlot {
			vms++
		}
		b.mu.Unlock()
	}
	switch {
	case vms >= MaxMacOSVMs:
		return "two builds run: both VM slots are in use"
	case vms+a.foreignVMs >= MaxMacOSVMs:
		return "other VMs run on this Mac: their slot is theirs"
	}
	return ""
}

// tendSpare drops a spare that is no longer wanted or usable, makes one
// when wanted, and parks a ready one.
func (a *Agent) tendSpare(ctx context.Context, d SpareDriver) {
	a.mu.Lock()
	sp, unwanted := a.spare, a.spareUnwantedLocked()
	a.mu.Unlock()
	if sp != nil {
		if why := a.spareUnusable(ctx, d, sp, unwanted); why != "" {
			a.dropSpare(ctx, why)
			sp = nil
		}
	}
	if sp == nil {
		if unwanted == "" {
			a.makeSpare(ctx, d)
		} else {
			a.setSpareState("", unwanted)
		}
		return
	}
	if !sp.ready && isSignalled(sp.dir, vmshare.WaitingFile) {
		a.mu.Lock()
		claimed := a.spare != sp
		sp.ready = !claimed
		a.mu.Unlock()
		if claimed {
			return
		}
		a.log.WithFields(logrus.Fields{"vm": sp.name, "boot": time.Since(sp.started).Round(time.Millisecond)}).Info("warm spare ready: its launcher waits for a build")
		a.setSpareState(SpareReady, "")
		a.suspendSpare(ctx, sp)
	}
}

// spareUnusable says why sp must go ("" when it may stay): not wanted, its
// VM ended, the template changed or went, or it never logged in.
func (a *Agent) spareUnusable(ctx context.Context, d SpareDriver, sp *spare, unwanted string) string {
	if unwanted != "" {
		return unwanted
	}
	select {
	case <-sp.inst.Exited():
		return fmt.Sprintf("the spare VM stopped: %v", sp.inst.Err())
	default:
	}
	switch v, err := d.TemplateVersion(ctx); {
	case err != nil:
		return err.Error()
	case v != sp.version:
		return "the VM template changed"
	}
	if !sp.ready && time.Since(sp.started) > a.cfg.BootTimeout {
		return fmt.Sprintf("the spare VM did not log in and reach its launcher within %s (a template whose launcher predates warm spares never does: rebuild it with scripts/build-vm-template.sh)", a.cfg.BootTimeout)
	}
	return ""
}

// makeSpare clones and boots a spare from the template as it is now. A
// template that is gone is reported (SpareFailed) and not cloned until it
// reads again; a failed start waits a backoff.
func (a *Agent) makeSpare(ctx context.Context, d SpareDriver) {
	version, err := d.TemplateVersion(ctx)
	if err != nil {
		a.setSpareState(SpareFailed, err.Error())
		return
	}
	a.mu.Lock()
	wait := time.Until(a.spareRetryAt)
	a.mu.Unlock()
	if wait > 0 {
		return
	}
	dir, err := os.MkdirTemp(a.cfg.WorkDir, "spare-")
	if err == nil {
		err = os.Chmod(dir, sharedDirMode)
	}
	if err == nil {
		err = os.Mkdir(dir+"-caches", sharedExecMode)
	}
	if err != nil {
		a.spareStartFailed(fmt.Errorf("create the spare's shared folders: %w", err))
		os.RemoveAll(dir)
		return
	}
	a.mu.Lock()
	a.spareSeq++
	sp := &spare{name: VMPrefixSpare + strconv.Itoa(a.spareSeq), dir: dir, cacheDir: dir + "-caches", version: version, started: time.Now()}
	suspendable := !a.suspendBroken && a.cfg.SuspendSpares
	sp.op.Lock()
	a.spare = sp
	a.mu.Unlock()
	a.setSpareState(SpareBooting, "")
	res := a.cfg.Resources
	res.CacheDir, res.Suspendable = sp.cacheDir, suspendable
	sp.inst, err = a.driver.Start(ctx, sp.name, sp.dir, res)
	sp.op.Unlock()
	if err != nil {
		a.mu.Lock()
		mine := a.spare == sp
		if mine {
			a.spare = nil
		}
		a.mu.Unlock()
		if mine {
			removeSpareDirs(sp)
		}
		var se *StartError
		if errors.As(err, &se) && se.Code == CodeVMLimit {
			a.vmLimitHit()
		}
		a.spareStartFailed(err)
		return
	}
	a.mu.Lock()
	a.spareBackoff.Reset()
	a.mu.Unlock()
	a.log.WithField("vm", sp.name).Info("warm spare booting")
}

// VMPrefixSpare names the spares' environments (the driver adds its own
// marks, such as the Tart driver's owner).
const VMPrefixSpare = "fa-spare-"

func (a *Agent) spareStartFailed(err error) {
	a.mu.Lock()
	wait := a.spareBackoff.Next()
	a.spareRetryAt = time.Now().Add(wait)
	a.mu.Unlock()
	a.log.WithError(err).WithField("retry_in", wait.Round(time.Millisecond)).Warn("could not boot a warm spare")
	a.setSpareState(SpareFailed, err.Error())
}

// suspendSpare parks a ready spare where the host can suspend it. A
// refusal (an older macOS, a configuration Virtualization.framework cannot
// save) powers the VM off; from then on this worker keeps its spares
// running.
func (a *Agent) suspendSpare(ctx context.Context, sp *spare) {
	s, ok := sp.inst.(Suspender)
	a.mu.Lock()
	try := ok && a.cfg.SuspendSpares && !a.suspendBroken
	a.mu.Unlock()
	if !try {
		return
	}
	sp.op.Lock()
	defer sp.op.Unlock()
	a.mu.Lock()
	claimed := a.spare != sp
	a.mu.Unlock()
	if claimed {
		return
	}
	if err := s.Suspend(ctx); err != nil {
		a.mu.Lock()
		a.suspendBroken = true
		a.mu.Unlock()
		a.log.WithError(err).Warn("this Mac cannot suspend the spare VM (see docs/tart.md, \"Suspended spares\"); spares stay running from now on")
		return
	}
	sp.suspended = true
	a.log.WithField("vm", sp.name).Info("warm spare suspended")
	a.setSpareState(SpareSuspended, "")
}

// dropSpare destroys the spare, if any, saying why.
func (a *Agent) dropSpare(ctx context.Context, why string) {
	a.mu.Lock()
	sp := a.spare
	a.spare = nil
	a.mu.Unlock()
	if sp == nil {
		return
	}
	sp.op.Lock()
	defer sp.op.Unlock()
	a.log.WithField("vm", sp.name).Info("warm spare removed: " + why)
	a.setSpareState("", why)
	destroySpare(ctx, a.log, sp)
}

func destroySpare(ctx context.Context, log logrus.FieldLogger, sp *spare) {
	if sp.inst != nil {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		defer cancel()
		if err := sp.inst.Destroy(dctx); err != nil {
			log.WithError(err).WithField("vm", sp.name).Error("could not destroy the warm spare")
		}
	}
	removeSpareDirs(sp)
}

func removeSpareDirs(sp *spare) {
	os.RemoveAll(sp.dir)
	os.RemoveAll(sp.cacheDir)
}

// takeSpare hands the spare to the claimed build b (nil when there is
// none), once any start or suspension of it is over, and has another made.
func (a *Agent) takeSpare(b *build) *spare {
	if _, ok := a.spareDriver(); !ok {
		return nil
	}
	a.mu.Lock()
	sp := a.spare
	a.spare = nil
	if sp != nil {
		b.holdVMSlot()
	}
	a.mu.Unlock()
	if sp == nil {
		return nil
	}
	sp.op.Lock()
	sp.op.Unlock() //nolint:staticcheck // waits for the keeper's operation on it
	a.setSpareState("", "")
	a.kickSpare()
	return sp
}

// countSpare counts a claim that ran on a spare (hit) or booted a fresh VM.
func (a *Agent) countSpare(hit bool) {
	if _, ok := a.spareDriver(); !ok {
		return
	}
	a.mu.Lock()
	if hit {
		a.status.Spare.Hits++
	} else {
		a.status.Spare.Misses++
	}
	a.mu.Unlock()
	a.wakeReporter()
}

// setSpareState records the spare's state for Status (its counts stay).
func (a *Agent) setSpareState(state, reason string) {
	a.mu.Lock()
	s := &a.status.Spare
	if s.State == state && s.Reason == reason {
		a.mu.Unlock()
		return
	}
	s.State, s.Reason, s.Since = state, reason, time.Now()
	a.mu.Unlock()
	if state == "" && reason != "" {
		a.log.Info("no warm spare: " + reason)
	}
	a.wakeReporter()
}

// spareReportLocked is the warm spare as the controller shows it (with
// the worker's pauses, which decide it); nil when this worker keeps none.
func (a *Agent) spareReportLocked() *api.WorkerSpare {
	if _, ok := a.spareDriver(); !ok {
		return nil
	}
	s := a.status.Spare
	return &api.WorkerSpare{State: cmp.Or(s.State, api.SpareNone), Reason: cutReason(s.Reason, api.MaxSpareReason),
		Since: s.Since, Hits: s.Hits, Misses: s.Misses}
}
