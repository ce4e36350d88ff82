// Package gc is the controller's garbage collector: it deletes what no build
// needs any more, on the file store and the S3 store alike —
//
//   - artifacts of attempts that did not end their build (a lease expired,
//     a worker re-registered): the build never shows them;
//   - artifacts, sources and logs of builds that ended longer ago than
//     their retention (--retain-artifacts, --retain-sources, --retain-logs);
//     the build's record stays and says what expired;
//   - orphans: objects no database row wants (a crash between a file and
//     its row), staging uploads older than their signed URL and ticket,
//     and the store's own leftovers (temporary files of interrupted
//     writes, incomplete multipart uploads, spool files).
//
// Every replica runs one; a Postgres advisory lock lets one at a time
// collect, so replicas never race over the same objects.
package gc

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/freeagent-build/freeagent/controller/blobs"
	"github.com/freeagent-build/freeagent/controller/store"
	"github.com/freeagent-build/freeagent/internal/config"
)

// Config says how often the collector runs and how old leftovers must be.
// How long builds' files are kept is the store's (store.Config's
// RetainArtifacts, RetainSources and RetainLogs), so the API shows the same
// expiry dates the collector acts on.
type Config struct {
	// StagingMaxAge is the longest a staging upload (uploads/) may still
	// be completed: its signed URL's lifetime plus its ticket's grace.
	StagingMaxAge time.Duration
	// OrphanGrace is the least age of an object with no row before it is
	// deleted: a file is written before its row commits, and a slow
	// request may sit between the two.
	OrphanGrace time.Duration
	// LeftoverAge is the least age of the store's own leftovers before
	// they are removed: a spool file is re-read, unchanged, for as long as
	// its PUT takes, and a multipart upload lasts as long as its parts.
	LeftoverAge time.Duration
	Interval    time.Duration
	// StagingInterval is how often staging uploads past StagingMaxAge are
	// swept between full passes: the sweep is cheap (a listing of
	// uploads/), and what it frees is what VMs and CLIs opened and never
	// finished, which may be large.
	StagingInterval time.Duration
}

// DefaultConfig is the production configuration. StagingMaxAge covers a
// direct upload's signed URL (30 min) and its ticket's grace (1 h) with
// half an hour to spare.
func DefaultConfig() Config {
	return Config{
		StagingMaxAge:   2 * time.Hour,
		OrphanGrace:     time.Hour,
		LeftoverAge:     24 * time.Hour,
		Interval:        10 * time.Minute,
		StagingInterval: time.Minute,
	}
}

// Report counts what one pass removed.
type Report struct {
	Ran              bool // false when another replica held the lock
	StrayArtifacts   int  // artifacts of attempts that did not end their build
	ExpiredArtifacts int  // builds whose artifacts expired
	ExpiredSources   int  // builds whose source expired
	ExpiredLogs      int  // builds whose log expired
	Orphans          int  // objects no row wants
	Staging          int  // stale staging uploads
	Leftovers        int  // temporary files, incomplete multipart uploads, spool files
	Errors           int  // deletions that failed (retried on the next pass)
	Duration         time.Duration
	// StagingOnly marks a pass of SweepStaging, between full passes.
	StagingOnly bool
}

// Collector collects garbage on an interval.
type Collector struct {
	// OnRun, when set (before Run), receives every pass's report: the
	// metrics come from it.
	OnRun func(Report)

	store *store.Store
	blobs *blobs.Store
	cfg   Config
	log   logrus.FieldLogger
}

// New returns a collector; zero fields of cfg take DefaultConfig's.
func New(st *store.Store, bl *blobs.Store, cfg Config, log logrus.FieldLogger) *Collector {
	def := DefaultConfig()
	cfg.StagingMaxAge = config.OrDefault(cfg.StagingMaxAge, def.StagingMaxAge)
	cfg.OrphanGrace = config.OrDefault(cfg.OrphanGrace, def.OrphanGrace)
	cfg.LeftoverAge = config.OrDefault(cfg.LeftoverAge, def.LeftoverAge)
	cfg.Interval = config.OrDefault(cfg.Interval, def.Interval)
	cfg.StagingInterval = config.OrDefault(cfg.StagingInterval, def.StagingInterval)
	return &Collector{store: st, blobs: bl, cfg: cfg, log: log}
}

// Run collects every Interval, and sweeps staging uploads every
// StagingInterval, until ctx ends. The first passes come one interval
// after the start, so replicas restarting in a loop do not scan the store
// each time.
func (c *Collector) Run(ctx context.Context) {
	full := time.NewTicker(c.cfg.Interval)
	defer full.Stop()
	staging := time.NewTicker(c.cfg.StagingInterval)
	defer staging.Stop()
	for {
		var rep Report
		var err error
		select {
		case <-ctx.Done():
			return
		case <-full.C:
			rep, err = c.Collect(ctx)
		case <-staging.C:
			rep, err = c.SweepStaging(ctx)
		}
		if err != nil && ctx.Err() == nil {
			c.log.WithError(err).Warn("garbage collection failed; will retry")
		}
		if rep.Ran && c.OnRun != nil {
			c.OnRun(rep)
		}
	}
}

// SweepStaging removes the staging uploads past StagingMaxAge (the
// staging part of a full pass), if no other replica is collecting. It is
// audited only when it removed something.
func (c *Collector) SweepStaging(ctx context.Context) (Report, error) {
	rep, err := c.pass(ctx, Report{StagingOnly: true}, func(rep *Report) error { return c.staging(ctx, rep) })
	if rep.Staging > 0 {
		detail := map[string]any{"staging": rep.Staging, "errors": rep.Errors, "duration_ms": rep.Duration.Milliseconds()}
		if aerr := c.store.RecordGC(ctx, detail); aerr != nil {
			err = errors.Join(err, aerr)
		}
		c.log.WithFields(logrus.Fields(detail)).Info("unfinished uploads swept")
	}
	return rep, err
}

// pass runs work under the collector's lock, unless another replica holds
// it (rep.Ran false), and times it.
func (c *Collector) pass(ctx context.Context, rep Report, work func(*Report) error) (Report, error) {
	release, ok, err := c.store.TryGCLock(ctx)
	if err != nil || !ok {
		return rep, err
	}
	defer release()
	rep.Ran = true
	start := time.Now()
	err = work(&rep)
	rep.Duration = time.Since(start)
	return rep, err
}

// batch bounds the rows one query returns; a pass repeats until done.
const batch = 500

// Collect runs one pass, if no other replica is running one, and audits it
// (event controller.gc).
func (c *Collector) Collect(ctx context.Context) (Report, error) {
	rep, err := c.pass(ctx, Report{}, func(rep *Report) error {
		return errors.Join(c.strays(ctx, rep), c.expire(ctx, rep), c.orphans(ctx, rep), c.staging(ctx, rep), c.leftovers(ctx, rep))
	})
	if !rep.Ran {
		return rep, err
	}
	detail := map[string]any{
		"stray_artifacts": rep.StrayArtifacts, "expired_artifacts": rep.ExpiredArtifacts, "expired_sources": rep.ExpiredSources,
		"expired_logs": rep.ExpiredLogs, "orphans": rep.Orphans, "staging": rep.Staging, "leftovers": rep.Leftovers,
		"errors": rep.Errors, "duration_ms": rep.Duration.Milliseconds(),
	}
	if err != nil {
		detail["error"] = err.Error()
	}
	if aerr := c.store.RecordGC(ctx, detail); aerr != nil {
		err = errors.Join(err, aerr)
	}
	if rep.StrayArtifacts+rep.ExpiredArtifacts+rep.ExpiredSources+rep.ExpiredLogs+rep.Orphans+rep.Staging+rep.Leftovers > 0 {
		c.log.WithFields(logrus.Fields(detail)).Info("garbage collected")
	}
	return rep, err
}

// delete removes one object, counting a failure rather than stopping: the
// next pass finds it again.
func (c *Collector) delete(ctx context.Context, rep *Report, key string) bool {
	if err := c.blobs.Backend().Delete(ctx, key); err != nil {
		rep.Errors++
		c.log.WithError(err).WithField("key", key).Warn("garbage collector: delete")
		return false
	}
	return true
}

// strays deletes the artifacts of attempts that did not end their build.
func (c *Collector) strays(ctx context.Context, rep *Report) error {
	for {
		refs, err := c.store.StrayArtifacts(ctx, batch)
		if err != nil || len(refs) == 0 {
			return err
		}
		for _, a := range refs {
			if err := c.store.ForgetStrayArtifact(ctx, a); err != nil {
				return err
			}
			if err := c.blobs.Remove(ctx, a.BuildID, blobs.Artifact(a.AttemptID, a.Name)); err != nil {
				rep.Errors++
				c.log.WithError(err).WithField("build", a.BuildID).Warn("garbage collector: delete a stray artifact")
				continue
			}
			rep.StrayArtifacts++
		}
		if len(refs) < batch {
			return nil
		}
	}
}

// expire retires the artifacts, sources and logs of builds that ended
// longer ago than their retention.
func (c *Collector) expire(ctx context.Context, rep *Report) error {
	retain := c.store.Config()
	for _, k := range []struct {
		what  string
		age   time.Duration
		count *int
	}{
		{store.RetireArtifacts, retain.RetainArtifacts, &rep.ExpiredArtifacts},
		{store.RetireSource, retain.RetainSources, &rep.ExpiredSources},
		{store.RetireLogs, retain.RetainLogs, &rep.ExpiredLogs},
	} {
		if k.age <= 0 {
			continue
		}
		for {
			ids, err := c.store.ExpireBuilds(ctx, k.what, k.age, batch)
			if err != nil {
				return err
			}
			for _, id := range ids {
				switch k.what {
				case store.RetireArtifacts:
					c.removeArtifacts(ctx, rep, id)
				case store.RetireSource:
					if err := c.blobs.Remove(ctx, id, blobs.Source); err != nil {
						rep.Errors++
					}
				}
			}
			*k.count += len(ids)
			if len(ids) < batch {
				break
			}
		}
	}
	return nil
}

// removeArtifacts deletes every artifact object of a build.
func (c *Collector) removeArtifacts(ctx context.Context, rep *Report, buildID string) {
	for info, err := range c.blobs.Backend().List(ctx, "builds/"+buildID+"/") {
		if err != nil {
			rep.Errors++
			return
		}
		if kind, _, _ := parseKey(info.Key); kind == keyArtifact {
			c.delete(ctx, rep, info.Key)
		}
	}
}

type keyKind int

const (
	keyOther keyKind = iota
	keySource
	keySealed
	keyArtifact
)

// parseKey reads an object key under builds/: its build and what it is.
// An artifact's ref carries its attempt ("" for the old layout) and name.
func parseKey(key string) (keyKind, string, store.ArtifactRef) {
	rest, ok := strings.CutPrefix(key, "builds/")
	if !ok {
		return keyOther, "", store.ArtifactRef{}
	}
	id, file, ok := strings.Cut(rest, "/")
	if !ok {
		return keyOther, "", store.ArtifactRef{}
	}
	switch {
	case file == blobs.SourceFile:
		return keySource, id, store.ArtifactRef{}
	case file == blobs.CertsFile || file == blobs.CredentialsFile:
		return keySealed, id, store.ArtifactRef{}
	case strings.HasPrefix(file, blobs.ArtifactPrefix):
		return keyArtifact, id, store.ArtifactRef{BuildID: id, Name: strings.TrimPrefix(file, blobs.ArtifactPrefix)}
	}
	if a, ok := strings.CutPrefix(file, blobs.AttemptsDir+"/"); ok {
		attempt, name, ok := strings.Cut(a, "/")
		if name, isArt := strings.CutPrefix(name, blobs.ArtifactPrefix); ok && isArt && !strings.Contains(name, "/") {
			return keyArtifact, id, store.ArtifactRef{BuildID: id, AttemptID: attempt, Name: name}
		}
	}
	return keyOther, id, store.ArtifactRef{}
}

// orphans deletes objects under builds/ that no row wants, in batches of
// builds, once they are older than OrphanGrace.
func (c *Collector) orphans(ctx context.Context, rep *Report) error {
	cutoff := time.Now().Add(-c.cfg.OrphanGrace)
	pending := map[string][]blobs.Info{}
	flush := func() error {
		if len(pending) == 0 {
			return nil
		}
		ids := make([]string, 0, len(pending))
		for id := range pending {
			ids = append(ids, id)
		}
		wanted, err := c.store.Objects(ctx, ids)
		if err != nil {
			return err
		}
		for id, infos := range pending {
			w := wanted[id]
			for _, info := range infos {
				kind, _, ref := parseKey(info.Key)
				orphan := !w.Exists
				switch kind {
				case keySource:
					orphan = orphan || w.SourceDeleted
				case keySealed:
					orphan = orphan || w.CertsDeleted
				case keyArtifact:
					orphan = orphan || w.ArtifactsDeleted || !w.Artifacts[ref]
				case keyOther:
					orphan = false // not ours to judge
				}
				if orphan && c.delete(ctx, rep, info.Key) {
					rep.Orphans++
				}
			}
		}
		clear(pending)
		return nil
	}
	for info, err := range c.blobs.Backend().List(ctx, "builds/") {
		if err != nil {
			return errors.Join(err, flush())
		}
		if info.ModTime.After(cutoff) {
			continue
		}
		if _, id, _ := parseKey(info.Key); id != "" {
			pending[id] = append(pending[id], info)
		}
		if len(pending) >= batch {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}

// staging deletes direct uploads (uploads/) that can no longer be
// completed: their URL and ticket have expired. Multipart ones are
// aborted, which frees the parts sent so far.
func (c *Collector) staging(ctx context.Context, rep *Report) error {
	if d, ok := c.blobs.Backend().(blobs.Direct); ok {
		n, err := d.AbortStaleMultipart(ctx, "uploads/", c.cfg.StagingMaxAge)
		rep.Staging += n
		if err != nil {
			return err
		}
	}
	cutoff := time.Now().Add(-c.cfg.StagingMaxAge)
	for info, err := range c.blobs.Backend().List(ctx, "uploads/") {
		if err != nil {
			return err
		}
		if info.ModTime.Before(cutoff) && c.delete(ctx, rep, info.Key) {
			rep.Staging++
		}
	}
	return nil
}

// leftovers asks the store to remove its own leftovers.
func (c *Collector) leftovers(ctx context.Context, rep *Report) error {
	sw, ok := c.blobs.Backend().(blobs.Sweeper)
	if !ok {
		return nil
	}
	n, err := sw.SweepStale(ctx, c.cfg.LeftoverAge)
	rep.Leftovers += n
	return err
}
