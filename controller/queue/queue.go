// Package queue says why each pending build waits: from the workers
// online, the pools an admin trusts and the pools each project may use.
// It is the one place that is decided, for the dashboard's queue page and
// GET /api/queue.
package queue

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/store"
)

// View is a page of the queue with why each build waits.
type View struct {
	Page           store.QueuePage // Entries: those the scope covers
	Reasons        []string        // one per entry
	Online, Paused int             // workers
}

// Load reads a page of pending builds (after cursor) and says why each
// waits, from the workers online, the pools an admin trusts and the pools
// each project may use: the one place "why is it waiting" is decided, for
// the dashboard's queue page and GET /api/queue. Only the builds scope
// covers are kept; positions stay the farm's.
func Load(ctx context.Context, st *store.Store, cursor string, limit int, scope store.Scope) (View, error) {
	var q View
	page, err := st.Queue(ctx, cursor, limit)
	if err != nil {
		return q, err
	}
	workers, err := st.ListWorkers(ctx)
	if err != nil {
		return q, err
	}
	pools, err := st.ListPools(ctx)
	if err != nil {
		return q, err
	}
	projectPools, err := st.AllProjectPools(ctx)
	if err != nil {
		return q, err
	}
	now := time.Now()
	f := newFleet(workers, now, st.Config().WorkerOfflineAfter)
	f.routes = routes{Pools: map[string]api.Pool{}, ProjectPools: projectPools}
	for _, p := range pools {
		f.routes.Pools[p.Name] = p
	}
	reasons := f.reasons(page.Entries, page.ClaimableAhead, now)
	q.Online, q.Paused = f.online, f.paused
	entries := page.Entries
	page.Entries = nil
	for i, e := range entries {
		if scope.Allows(e.Project) {
			page.Entries, q.Reasons = append(page.Entries, e), append(q.Reasons, reasons[i])
		}
	}
	q.Page = page
	return q, nil
}

// fleet is what the workers can take right now.
type fleet struct {
	online, paused int
	workers        []fleetWorker // online workers
	slots          []*fleetWorker
	routes         routes
}

// fleetWorker is an online worker and its free build slots.
type fleetWorker struct {
	name         string
	platforms    []string
	pool, driver string
	admitted     bool   // may run its pool's credentialed builds (api.Worker.PoolAdmitted)
	paused       bool   // by an admin or its owner
	hostPause    string // the owner's rules hold builds back (api.Worker.HostPauseReason)
	free         int
	caps         api.Capabilities // what it offers builds (spec.requires)
}

// held: w takes no build now, whoever paused it.
func (w *fleetWorker) held() bool { return w.paused || w.hostPause != "" }

// routes is what routing needs beside the workers: the pools an admin
// trusts (and lets run credentialed builds on the local driver), and the
// pools each project may use (a project absent may use any).
type routes struct {
	Pools        map[string]api.Pool
	ProjectPools map[string][]string
}

// newFleet sums up the workers: online means in contact within offlineAfter
// (the reaper marks the others offline only on its next sweep).
func newFleet(workers []api.Worker, now time.Time, offlineAfter time.Duration) fleet {
	var f fleet
	for _, w := range workers {
		if w.Status != "online" || now.Sub(w.LastSeenAt) > offlineAfter {
			continue
		}
		f.online++
		auth := store.WorkerAuth{Capabilities: w.Capabilities}
		fw := fleetWorker{name: w.Name, platforms: auth.Platforms(), pool: cmp.Or(w.Capabilities.Pool, api.DefaultPool),
			driver: w.Capabilities.VMDriver, admitted: w.PoolAdmitted, paused: w.Paused || w.OwnerPaused, hostPause: w.HostPauseReason,
			free: max(0, auth.MaxConcurrent()-len(w.ActiveBuilds)), caps: w.Capabilities}
		if fw.held() {
			f.paused++
		}
		if fw.driver == "" {
			fw.driver = w.Capabilities.Labels["vm_driver"]
		}
		f.workers = append(f.workers, fw)
	}
	for i := range f.workers {
		if w := &f.workers[i]; !w.held() && w.free > 0 {
			f.slots = append(f.slots, w)
		}
	}
	// Single-platform workers first: a build takes the most specific free
	// slot, leaving the versatile ones for builds only they can take.
	slices.SortStableFunc(f.slots, func(a, b *fleetWorker) int { return len(a.platforms) - len(b.platforms) })
	return f
}

// inPools: w is in a pool the entry's project may use.
func (f fleet) inPools(w *fleetWorker, e store.QueueEntry) bool {
	pools := f.routes.ProjectPools[e.Project]
	return len(pools) == 0 || slices.Contains(pools, w.pool)
}

// trusted: w may run a build that carries credentials or secrets (the
// claim's rule, store's routable).
func (f fleet) trusted(w *fleetWorker) bool {
	p := f.routes.Pools[w.pool]
	return p.Trusted && w.admitted && (w.driver != api.VMDriverLocal || p.AllowLocal)
}

// routable: w may run the entry at all.
func (f fleet) routable(w *fleetWorker, e store.QueueEntry) bool {
	return slices.Contains(w.platforms, e.Platform) && f.inPools(w, e) && (!e.NeedsTrust || f.trusted(w)) && len(e.Requires.Unmet(w.caps)) == 0
}

// take gives build e a free slot, if there is one left.
func (f *fleet) take(e store.QueueEntry) bool {
	for _, w := range f.slots {
		if w.free > 0 && f.routable(w, e) {
			w.free--
			return true
		}
	}
	return false
}

// count counts the online workers for which ok holds.
func (f fleet) count(ok func(*fleetWorker) bool) int {
	n := 0
	for i := range f.workers {
		if ok(&f.workers[i]) {
			n++
		}
	}
	return n
}

// trustedPools names the pools trusted with credentialed builds.
func (f fleet) trustedPools() string {
	var names []string
	for name, p := range f.routes.Pools {
		if p.Trusted {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return "none; an admin trusts one with `freeagent-controller pools set NAME --trusted`"
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// hostWaits names the workers (among those ok holds) that the owner's
// rules hold back, and why: they resume by themselves. "" when none.
func (f fleet) hostWaits(ok func(*fleetWorker) bool) string {
	var waits []string
	for i := range f.workers {
		if w := &f.workers[i]; ok(w) && !w.paused && w.hostPause != "" {
			waits = append(waits, fmt.Sprintf("%s: %s", w.name, w.hostPause))
		}
	}
	switch len(waits) {
	case 0:
		return ""
	case 1:
		return " Its host holds builds back until this clears (" + waits[0] + ")."
	}
	return " Their hosts hold builds back until this clears (" + strings.Join(waits, "; ") + ")."
}

// reasons says why each pending build (in claim order) is waiting. ahead
// counts the claimable builds before the first entry, per platform: they
// take the free slots first.
func (f fleet) reasons(entries []store.QueueEntry, ahead map[string]int, now time.Time) []string {
	slots := make([]*fleetWorker, len(f.slots))
	for i, w := range f.slots { // a copy: reasons must not use up the fleet
		c := *w
		slots[i] = &c
	}
	f.slots = slots
	seen := map[string]int{}
	for _, p := range []string{api.PlatformIOS, api.PlatformAndroid} {
		seen[p] = ahead[p]
		for range ahead[p] {
			if !f.take(store.QueueEntry{Platform: p}) {
				break
			}
		}
	}
	out := make([]string, len(entries))
	for i, e := range entries {
		claimable := !e.RunAfter.After(now)
		builds := func(w *fleetWorker) bool { return slices.Contains(w.platforms, e.Platform) }
		inPools := func(w *fleetWorker) bool { return builds(w) && f.inPools(w, e) }
		routable := func(w *fleetWorker) bool { return f.routable(w, e) }
		switch {
		case f.online == 0:
			out[i] = "No worker is online."
		case f.count(builds) == 0:
			out[i] = fmt.Sprintf("No online worker builds %s.", e.Platform)
		case f.count(inPools) == 0:
			out[i] = fmt.Sprintf("No online %s worker in pools %s, the pools project %q may use.", e.Platform,
				strings.Join(f.routes.ProjectPools[e.Project], ", "), e.Project)
		case f.count(func(w *fleetWorker) bool { return inPools(w) && len(e.Requires.Unmet(w.caps)) == 0 }) == 0:
			out[i] = fmt.Sprintf("No online %s worker offers what the build's profile requires (%s).", e.Platform, e.Requires)
		case f.count(routable) == 0:
			out[i] = fmt.Sprintf("Waiting for a trusted pool: no trusted worker for project %q online (the build carries signing credentials or secrets; trusted pools: %s; a worker there needs a key bound to its pool once any worker key is bound, and a local-driver worker needs its pool to allow it).",
				e.Project, f.trustedPools())
		case f.count(func(w *fleetWorker) bool { return routable(w) && !w.held() }) == 0:
			out[i] = fmt.Sprintf("Every %s worker is paused.", e.Platform) + f.hostWaits(routable)
		case !claimable:
			out[i] = "Backing off after a failed attempt until " + e.RunAfter.UTC().Format("15:04:05 UTC") + "."
		case f.take(e):
			out[i] = "Next in line: a worker takes it on its next poll."
		default:
			out[i] = fmt.Sprintf("All %s workers are busy (%d ahead).", e.Platform, seen[e.Platform])
		}
		if claimable {
			seen[e.Platform]++
		}
	}
	return out
}
