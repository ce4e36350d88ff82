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
			if i := slices.IndexFunc(h.claim, func(w *Waiter) bool { return slices.Contains(w.platforms, c.Platform) }); i >= 0 {
				w := h.claim[i]
				h.claim = slices.Delete(h.claim, i, i+1)
				w.signal()
			}
		}
		for w := range h.watches {
			if w.match(c) {
				w.signal()
			}
		}
	}
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

// Done removes the waiter. If it had been woken for a build it will not
// claim, the wake-up passes to the next waiter.
func (h *Hub) Done(w *Waiter) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if i := slices.Index(h.claim, w); i >= 0 {
		h.claim = slices.Delete(h.claim, i, i+1)
		return
	}
	select {
	case <-w.C: // woken but leaving: hand the hint on
		if len(h.claim) > 0 {
			next := h.claim[0]
			h.claim = h.claim[1:]
			next.signal()
		}
	default:
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
