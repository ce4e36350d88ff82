package dashboard

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/freeagent-build/freeagent/controller/api"
	"github.com/freeagent-build/freeagent/controller/store"
)

type queueRow struct {
	store.QueueEntry
	Reason string
}

type queueView struct {
	Rows                   []queueRow
	Pending                int
	Online, Paused, Active int // workers
	NextPage, FirstPage    string
	Error                  string
}

func (d *Dashboard) queue(w http.ResponseWriter, r *http.Request, s *session) {
	cursor := r.URL.Query().Get("cursor")
	page, err := d.Store.Queue(r.Context(), cursor, 100)
	if isInvalid(err) {
		d.render(w, r, "queue", http.StatusUnprocessableEntity, view{Title: "Queue", Nav: "queue", Session: s,
			Data: queueView{Error: trimSentinel(err, store.ErrInvalid), FirstPage: "/queue"}})
		return
	}
	if err != nil {
		d.fail(w, r, s, err)
		return
	}
	workers, err := d.Store.ListWorkers(r.Context())
	if err != nil {
		d.fail(w, r, s, err)
		return
	}
	now := time.Now()
	fleet := newFleet(workers, now, d.Store.Config().WorkerOfflineAfter)
	v := queueView{Pending: page.Pending, Online: fleet.online, Paused: fleet.paused, Active: fleet.online - fleet.paused}
	for i, reason := range fleet.reasons(page.Entries, page.ClaimableAhead, now) {
		v.Rows = append(v.Rows, queueRow{QueueEntry: page.Entries[i], Reason: reason})
	}
	if page.NextCursor != "" {
		v.NextPage = "/queue?cursor=" + url.QueryEscape(page.NextCursor)
	}
	if cursor != "" {
		v.FirstPage = "/queue"
	}
	d.render(w, r, "queue", http.StatusOK, view{Title: "Queue", Nav: "queue", Session: s, Stream: "/ui/stream", Data: v})
}

// fleet is what the workers can take right now, per platform.
type fleet struct {
	online, paused int
	eligible       map[string]int // online workers that build the platform
	unpaused       map[string]int // of those, not paused
	slots          []slot         // free build slots of unpaused online workers
}

type slot struct {
	platforms []string
	free      int
}

// newFleet sums up the workers: online means in contact within offlineAfter
// (the reaper marks the others offline only on its next sweep).
func newFleet(workers []api.Worker, now time.Time, offlineAfter time.Duration) fleet {
	f := fleet{eligible: map[string]int{}, unpaused: map[string]int{}}
	for _, w := range workers {
		if w.Status != "online" || now.Sub(w.LastSeenAt) > offlineAfter {
			continue
		}
		f.online++
		if w.Paused {
			f.paused++
		}
		auth := store.WorkerAuth{Capabilities: w.Capabilities}
		for _, p := range auth.Platforms() {
			f.eligible[p]++
			if !w.Paused {
				f.unpaused[p]++
			}
		}
		if free := auth.MaxConcurrent() - len(w.ActiveBuilds); !w.Paused && free > 0 {
			f.slots = append(f.slots, slot{platforms: auth.Platforms(), free: free})
		}
	}
	// Single-platform workers first: a build takes the most specific free
	// slot, leaving the versatile ones for builds only they can take.
	slices.SortStableFunc(f.slots, func(a, b slot) int { return len(a.platforms) - len(b.platforms) })
	return f
}

// take gives a build of platform p a free slot, if there is one left.
func (f *fleet) take(p string) bool {
	for i := range f.slots {
		if f.slots[i].free > 0 && slices.Contains(f.slots[i].platforms, p) {
			f.slots[i].free--
			return true
		}
	}
	return false
}

// reasons says why each pending build (in claim order) is waiting. ahead
// counts the claimable builds before the first entry, per platform: they
// take the free slots first.
func (f fleet) reasons(entries []store.QueueEntry, ahead map[string]int, now time.Time) []string {
	f.slots = slices.Clone(f.slots)
	seen := map[string]int{}
	for _, p := range []string{api.PlatformIOS, api.PlatformAndroid} {
		seen[p] = ahead[p]
		for range ahead[p] {
			if !f.take(p) {
				break
			}
		}
	}
	out := make([]string, len(entries))
	for i, e := range entries {
		claimable := !e.RunAfter.After(now)
		switch {
		case f.online == 0:
			out[i] = "No worker is online."
		case f.eligible[e.Platform] == 0:
			out[i] = fmt.Sprintf("No online worker builds %s.", e.Platform)
		case f.unpaused[e.Platform] == 0:
			out[i] = fmt.Sprintf("Every %s worker is paused.", e.Platform)
		case !claimable:
			out[i] = "Backing off after a failed attempt until " + e.RunAfter.UTC().Format("15:04:05 UTC") + "."
		case f.take(e.Platform):
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
