// Package notify turns the database's change notifications into in-process
// wake-ups. Every controller replica runs one Hub, LISTENing on the store's
// channel, so a build submitted to one replica wakes a long-polling worker
// on another. A wake-up is only a hint: waiters always re-read the database
// and keep a backstop timer, so a notification lost during a reconnect costs
// latency, never correctness.
package notify

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/sirupsen/logrus"

	"github.com/freeagent-build/freeagent/controller/store"
)

// Hub fans database change notifications out to waiters.
type Hub struct {
	dsn string
	log logrus.FieldLogger

	mu      sync.Mutex
	claim   []*Waiter // long polls waiting for a claimable build, oldest first
	watches map[*Watch]struct{}
	ready   chan struct{} // closed once LISTEN is in place
	once    sync.Once
}

// New returns a hub that will listen through a connection to dsn.
func New(dsn string, log logrus.FieldLogger) *Hub {
	return &Hub{dsn: dsn, log: log, watches: map[*Watch]struct{}{}, ready: make(chan struct{})}
}

// Ready is closed once the hub is listening.
func (h *Hub) Ready() <-chan struct{} { return h.ready }

// Run listens until ctx ends, reconnecting with backoff. After a reconnect
// every waiter is woken, since notifications may have been missed.
func (h *Hub) Run(ctx context.Context) error {
	backoff := 100 * time.Millisecond
	for {
		err := h.listen(ctx)
		if ctx.Err() != nil {
			return nil
		}
		h.log.WithError(err).Warn("change listener lost its database connection; reconnecting")
		h.wakeAll()
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

func (h *Hub) listen(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, h.dsn)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{store.NotifyChannel}.Sanitize()); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	h.once.Do(func() { close(h.ready) })
	h.wakeAll() // anything committed while we were not listening
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		var changes []store.Change
		if err := json.Unmarshal([]byte(n.Payload), &changes); err != nil {
			h.log.WithError(err).Warn("ignoring an undecodable change notification")
			continue
		}
		h.dispatch(changes)
	}
}

func (h *Hub) dispatch(changes []store.Change) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range changes {
		if c.Claimable() {
			// One claimable build wakes one waiter that can build it: waking
			// every long poll for each build would be a thundering herd.
			h.offer(&hint{build: c.ID, platform: c.Platform})
		}
		for w := range h.watches {
			if w.match(c) {
				w.signal()
			}
		}
	}
}

// hint is a build that became claimable, on its way to a waiter that can
// take it: the waiters that looked and could not are in tried.
type hint struct {
	build, platform string
	tried           []*Waiter
}

// offer wakes the first waiter in line for the hint's platform that has
// not tried it, taking it out of line; with none left the hint is dropped
// (the build waits for a worker's next look: a worker that comes free or
// arrives looks at once). Called with h.mu held.
func (h *Hub) offer(hn *hint) {
	i := slices.IndexFunc(h.claim, func(w *Waiter) bool {
		return slices.Contains(w.platforms, hn.platform) && !slices.Contains(hn.tried, w)
	})
	if i < 0 {
		return
	}
	w := h.claim[i]
	h.claim = slices.Delete(h.claim, i, i+1)
	w.hints = append(w.hints, hn)
	w.signal()
}

func (h *Hub) wakeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, w := range h.claim {
		w.signal()
	}
	h.claim = nil
	for w := range h.watches {
		w.signal()
	}
}

// Waiter is a long poll waiting for a claimable build.
type Waiter struct {
	platforms []string
	C         chan struct{}
	hints     []*hint // builds it was woken for (guarded by the hub's mu)
}

func (w *Waiter) signal() {
	select {
	case w.C <- struct{}{}:
	default:
	}
}

// WaitClaimable registers a waiter for builds of the given platforms. Arm it
// before trying to claim, so a build submitted in between is not missed.
func (h *Hub) WaitClaimable(platforms []string) *Waiter {
	w := &Waiter{platforms: platforms, C: make(chan struct{}, 1)}
	h.Rearm(w)
	return w
}

// Rearm puts a woken waiter back in line.
func (h *Hub) Rearm(w *Waiter) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !slices.Contains(h.claim, w) {
		h.claim = append(h.claim, w)
	}
}

// Look is one look of a waiter at the queue: Begin takes the builds it was
// woken for so far, and End passes on those its look did not claim.
type Look struct {
	w     *Waiter
	hints []*hint
}

// Begin starts a look: call it before reading the queue, so that a build
// announced during the read stays with the waiter for its next look.
func (h *Hub) Begin(w *Waiter) Look {
	h.mu.Lock()
	defer h.mu.Unlock()
	select {
	case <-w.C: // the hints are taken now; a later one signals again
	default:
	}
	l := Look{w: w, hints: w.hints}
	w.hints = nil
	return l
}

// End finishes a look. claimable says the look saw a build the waiter's
// platforms may claim; claimed is the one it took ("" if none). The builds
// it was woken for and did not take go on to the next waiters in line that
// have not tried them (a worker of another pool, or with what a build
// requires, may take what this one could not) — unless nothing was
// claimable: then they were taken already, or are not due yet, and the
// wake-up ends here instead of travelling the whole line.
func (h *Hub) End(l Look, claimable bool, claimed string) {
	if len(l.hints) == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, hn := range l.hints {
		if !claimable || hn.build == claimed {
			continue
		}
		hn.tried = append(hn.tried, l.w)
		h.offer(hn)
	}
}

// Done removes the waiter. Builds it was woken for and never looked at
// pass to the next waiters in line.
func (h *Hub) Done(w *Waiter) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if i := slices.Index(h.claim, w); i >= 0 {
		h.claim = slices.Delete(h.claim, i, i+1)
	}
	hints := w.hints
	w.hints = nil
	for _, hn := range hints {
		hn.tried = append(hn.tried, w)
		h.offer(hn)
	}
}

// Watch follows changes to one entity (a build's status or log).
type Watch struct {
	hub   *Hub
	match func(store.Change) bool
	C     chan struct{}
}

func (w *Watch) signal() {
	select {
	case w.C <- struct{}{}:
	default:
	}
}

// WatchBuild signals C whenever build id changes status or its log grows.
func (h *Hub) WatchBuild(id string) *Watch {
	return h.Watch(func(c store.Change) bool { return c.ID == id && c.Kind != "worker" })
}

// WatchStatus signals C whenever build id changes status (a cancel
// requested among them), not when its log grows: a worker's cancel watch,
// which a building VM's log appends (one a second) would otherwise wake
// for a re-read each.
func (h *Hub) WatchStatus(id string) *Watch {
	return h.Watch(func(c store.Change) bool { return c.ID == id && c.Kind == "build" })
}

// Watch signals C whenever a change matches (the dashboard's live pages).
// Signals coalesce: C holds at most one.
func (h *Hub) Watch(match func(store.Change) bool) *Watch {
	w := &Watch{hub: h, C: make(chan struct{}, 1), match: match}
	h.mu.Lock()
	h.watches[w] = struct{}{}
	h.mu.Unlock()
	return w
}

// Close stops the watch.
func (w *Watch) Close() {
	w.hub.mu.Lock()
	delete(w.hub.watches, w)
	w.hub.mu.Unlock()
}
