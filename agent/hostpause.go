package agent

import (
	"context"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/freeagent-build/freeagent/api"
)

// HostGate says whether the host may take a build now: the reason it may
// not ("on battery", "you are using this Mac"), or "" (hostsignals.Gate).
type HostGate interface {
	PauseReason(ctx context.Context) string
}

// Gates holds a build back for the first of its gates that does.
type Gates []HostGate

// PauseReason implements HostGate.
func (gs Gates) PauseReason(ctx context.Context) string {
	for _, g := range gs {
		if r := g.PauseReason(ctx); r != "" {
			return r
		}
	}
	return ""
}

// watchHost asks cfg.Host every HostCheckInterval and reports the worker's
// pauses to the controller until the returned stop is called (which waits
// for both).
func (a *Agent) watchHost(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		a.reportPauses(ctx)
	}()
	if a.cfg.Host != nil {
		// The first answer comes before the first poll: a worker started on
		// battery takes no build.
		a.setHostPause(a.cfg.Host.PauseReason(ctx))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for sleepCtx(ctx, a.cfg.HostCheckInterval, nil) {
				a.setHostPause(a.cfg.Host.PauseReason(ctx))
			}
		}()
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			wg.Wait()
		})
	}
}

// setHostPause holds new builds back while reason is set; running builds
// go on. A new pause ends the poll in flight, so no build arrives after it;
// the end of one wakes the poll loop at once.
func (a *Agent) setHostPause(reason string) {
	a.mu.Lock()
	if reason == a.hostPause {
		a.mu.Unlock()
		return
	}
	a.hostPause = reason
	if reason != "" && a.pollCancel != nil {
		a.pollCancel()
	}
	state := a.status.State
	a.mu.Unlock()
	if reason != "" {
		a.log.WithField("reason", reason).Info("not taking builds: " + reason + " (running builds finish)")
	} else {
		a.log.Info("the host's rules allow builds again")
	}
	select {
	case a.slotFreed <- struct{}{}:
	default:
	}
	if state == StateOnline || state == StatePaused {
		a.setOnline()
	}
	a.pauseChanged()
	a.kickSpare()
}

// pauseChanged wakes the pause reporter, which reports even if nothing
// it sends changed (the worker registered again).
func (a *Agent) pauseChanged() {
	a.mu.Lock()
	a.pauseGen++
	a.mu.Unlock()
	a.wakeReporter()
}

// wakeReporter has the pause reporter look at once for a change to send.
func (a *Agent) wakeReporter() {
	select {
	case a.pauseSent <- struct{}{}:
	default:
	}
}

// reportPauses tells the controller the owner's and the host's pauses,
// and the warm spare they decide, whenever they change (or the worker
// registers again), and repeats the report while paused: a paused worker
// does not poll, and the report keeps it online and its token fresh.
func (a *Agent) reportPauses(ctx context.Context) {
	sentGen := -1
	var sent api.WorkerPauseReport
	var sentAt time.Time
	retry := a.cfg.backoff().Sequence()
	for {
		a.mu.Lock()
		cur, gen := api.WorkerPauseReport{OwnerPaused: a.paused, HostReason: cutReason(a.hostPause, api.MaxHostPauseReason),
			Spare: a.spareReportLocked()}, a.pauseGen
		a.mu.Unlock()
		paused := cur.OwnerPaused || cur.HostReason != ""
		wait := api.WorkerPauseReportEvery
		if gen != sentGen || !sameReport(cur, sent) || (paused && time.Since(sentAt) >= api.WorkerPauseReportEvery) {
			resp, err := a.client.ReportPause(ctx, a.tokens.get(), cur)
			switch {
			case err == nil:
				a.tokens.keep(resp.TokenGrant)
				sent, sentGen, sentAt = cur, gen, time.Now()
				retry.Reset()
			case ctx.Err() != nil:
				return
			default:
				wait = retry.After(err)
				a.log.WithError(err).WithField("retry_in", wait.Round(time.Millisecond)).Warn("could not tell the controller why the worker is paused")
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-a.pauseSent:
		case <-time.After(wait):
		}
	}
}

// sameReport compares by value: Spare is a pointer.
func sameReport(x, y api.WorkerPauseReport) bool {
	return x.OwnerPaused == y.OwnerPaused && x.HostReason == y.HostReason &&
		(x.Spare == nil) == (y.Spare == nil) && (x.Spare == nil || *x.Spare == *y.Spare)
}

// cutReason is reason cut, on a character boundary, to limit bytes, what
// the controller stores: a longer one (softnet's names its path twice)
// would be refused at every report. The log and the menu keep the whole
// reason.
func cutReason(reason string, limit int) string {
	if len(reason) <= limit {
		return reason
	}
	const more = "…"
	n := limit - len(more)
	for n > 0 && !utf8.RuneStart(reason[n]) {
		n--
	}
	return reason[:n] + more
}
