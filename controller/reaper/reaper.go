// Package reaper runs the controller's periodic maintenance: requeueing
// builds whose lease expired or whose worker went offline, the build-timeout
// backstop, expiring one-time passwords and VM tokens, deleting the
// certificates of builds that ended, and sealing the audit log. Every
// replica runs one; the sweep and the sealer take Postgres advisory locks, so
// one replica at a time does each.
package reaper

import (
	"context"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/freeagent-build/freeagent/controller/blobs"
	"github.com/freeagent-build/freeagent/controller/store"
)

// The intervals a zero (or negative) one takes.
const (
	DefaultInterval     = 5 * time.Second        // between sweeps
	DefaultSealInterval = 200 * time.Millisecond // between sealer passes
)

// Reaper sweeps on an interval and when kicked.
type Reaper struct {
	// OnSweep, when set (before Run), receives every sweep's report: the
	// lease-expiry, requeue and dead-letter counters come from it.
	OnSweep func(store.SweepReport)

	store    *store.Store
	blobs    *blobs.Store
	interval time.Duration
	log      logrus.FieldLogger
	kick     chan struct{}
}

// New returns a reaper that sweeps every interval (zero: DefaultInterval).
func New(st *store.Store, bl *blobs.Store, interval time.Duration, log logrus.FieldLogger) *Reaper {
	if interval <= 0 {
		interval = DefaultInterval
	}
	return &Reaper{store: st, blobs: bl, interval: interval, log: log, kick: make(chan struct{}, 1)}
}

// Kick asks for the certificates of ended builds to be deleted now (after
// a build ended) rather than at the next sweep. It never blocks.
func (r *Reaper) Kick() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// Run sweeps every interval until ctx ends. Its first sweep is one
// interval after it starts: whoever starts it sweeps once before (as
// serve.Start does, before it serves), so a caller's own Sweep right after
// the start never races a start-up sweep for the lock.
func (r *Reaper) Run(ctx context.Context) {
	t := time.NewTicker(r.interval)
	defer t.Stop()
	for {
		for kicked := true; kicked; {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				kicked = false
			case <-r.kick:
				r.deleteCerts(ctx) // cheap: a partial index holds only builds with live certificates
			}
		}
		r.Sweep(ctx)
	}
}

// RunSealer seals final audit events into the hash chain every interval
// (zero: DefaultSealInterval) until ctx ends, the first time one interval
// after it starts (a controller seals once before it serves: Seal). Every
// replica runs one; an advisory lock lets one seal.
func (r *Reaper) RunSealer(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		interval = DefaultSealInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		r.Seal(ctx)
	}
}

// Seal seals the final audit events once.
func (r *Reaper) Seal(ctx context.Context) {
	if _, err := r.store.SealEvents(ctx); err != nil && ctx.Err() == nil {
		r.log.WithError(err).Warn("sealing audit events failed; will retry")
	}
}

// Sweep runs one pass and logs what it changed.
func (r *Reaper) Sweep(ctx context.Context) {
	rep, err := r.store.Sweep(ctx)
	if err != nil {
		if ctx.Err() == nil {
			r.log.WithError(err).Warn("reaper sweep failed; will retry")
		}
		return
	}
	if r.OnSweep != nil && rep.Ran {
		r.OnSweep(rep)
	}
	if rep.LeasesExpired+rep.WorkersOffline+rep.TimedOut > 0 {
		r.log.WithFields(logrus.Fields{"leases_expired": rep.LeasesExpired, "workers_offline": rep.WorkersOffline,
			"timed_out": rep.TimedOut}).Info("reaper requeued or ended builds")
	}
	r.deleteCerts(ctx)
}

// deleteCerts removes the sealed certificates and credentials of builds that ended.
func (r *Reaper) deleteCerts(ctx context.Context) {
	ids, err := r.store.CertsToDelete(ctx, 500)
	if err != nil {
		r.log.WithError(err).Warn("reaper: list certificates to delete")
		return
	}
	for _, id := range ids {
		if err := r.blobs.RemoveSecrets(ctx, id); err != nil {
			r.log.WithError(err).WithField("build", id).Warn("reaper: delete certificates")
			continue
		}
		if err := r.store.MarkCertsDeleted(ctx, id); err != nil {
			r.log.WithError(err).WithField("build", id).Warn("reaper: mark certificates deleted")
		}
	}
}
