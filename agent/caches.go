package agent

import (
	"context"
	"os"
	"path/filepath"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/freeagent-build/freeagent/agent/cache"
	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/internal/vmshare"
)

// stageCaches gives the build its dependency caches: links to the archives
// the worker holds for its project and cache domain (the job's: the
// controller's word), in the directory staged that the driver shares
// read-only (the caller removes it). It returns what the build config
// lists, nil for nothing to share. A failure is a warning: the build runs
// cold.
func (b *build) stageCaches(staged string) []vmshare.CacheMount {
	store := b.a.caches
	if store == nil || len(b.job.Caches) == 0 {
		return nil
	}
	mounted, err := store.Stage(b.job.Project, b.job.CacheDomain, b.job.Caches, staged)
	if err == nil && len(mounted) > 0 {
		err = os.Chmod(staged, sharedExecMode) // the VM's user reads it (see sharedDirMode)
	}
	if err != nil {
		b.log.WithError(err).Warn("could not give the build its dependency caches; it runs cold")
		return nil
	}
	out := make([]vmshare.CacheMount, len(mounted))
	for i, m := range mounted {
		out[i] = vmshare.CacheMount{Name: m.Name, Key: m.Key, File: m.File}
		b.log.WithFields(logrus.Fields{"cache": m.Name, "key": m.Key, "bytes": m.Bytes}).Info("dependency cache shared with the build")
	}
	return out
}

// keepCaches takes in the archives a successful build saved: only those of
// the caches its job names, filed under the job's project, cache domain
// and key. The key the VM reports is not used: code the build ran in the
// VM could say any, and the job's was fixed by the controller, from the
// source, before any of it ran. A refused archive is a warning; the build
// stays green.
func (b *build) keepCaches(dir string, saved []vmshare.SavedCache) {
	store := b.a.caches
	if store == nil || len(saved) == 0 {
		return
	}
	// The VM made caches-out, so it may be a link to a directory of the
	// host: the archive is opened without following a link as its last
	// element only. The VM is gone by now, so what is checked stays so.
	out := filepath.Join(dir, vmshare.CacheOutDir)
	if st, err := os.Lstat(out); err != nil || !st.IsDir() {
		b.log.WithField("dir", vmshare.CacheOutDir).Warn("the build's cache directory in the shared folder is not a directory (a link?); its caches are not kept")
		return
	}
	for _, s := range saved {
		var entry *api.CacheEntry
		for i := range b.job.Caches {
			if c := &b.job.Caches[i]; c.Name == s.Name {
				entry = c
			}
		}
		if entry == nil || s.File != entry.Name+".tar" {
			b.log.WithField("cache", s.Name).Warn("the build saved a cache its spec does not name; ignored")
			continue
		}
		start := time.Now()
		log := b.log.WithFields(logrus.Fields{"cache": s.Name, "key": entry.Key})
		if err := store.Put(b.job.Project, b.job.CacheDomain, entry.Name, entry.Key, filepath.Join(out, s.File)); err != nil {
			log.WithError(err).Warn("the build's cache archive was not kept")
			continue
		}
		log.WithField("took", time.Since(start).Round(time.Millisecond)).Info("dependency cache kept")
	}
}

// reportCache tells the controller which caches the worker holds (best
// effort: the next build's report repeats it) and keeps the figures for
// Status.
func (a *Agent) reportCache(ctx context.Context) {
	if a.caches == nil {
		return
	}
	r := a.caches.Report()
	a.mu.Lock()
	a.status.Cache = &api.WorkerCache{Bytes: r.Bytes, Hits: r.Hits, Misses: r.Misses, Keys: []string{}}
	a.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := a.client.ReportCache(ctx, a.tokens.get(), r); err != nil {
		a.log.WithError(err).Warn("could not report the dependency caches to the controller")
	}
}

// openCaches opens the worker's cache store when cfg asks for one.
func openCaches(cfg Config) (*cache.Store, error) {
	if cfg.CacheDir == "" || cfg.CacheMaxBytes <= 0 {
		return nil, nil
	}
	return cache.Open(cfg.CacheDir, cfg.CacheMaxBytes)
}
