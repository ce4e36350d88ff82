package notify

import (
	"testing"

	"github.com/sirupsen/logrus"

	"github.com/freeagent-build/freeagent/controller/store"
)

func woken(w *Waiter) bool {
	select {
	case <-w.C:
		w.C <- struct{}{} // leave it for the waiter's own look
		return true
	default:
		return false
	}
}

// A build that the woken waiter cannot take (another pool, too few cores)
// goes on to the next waiter in line, once to each, and no further: no
// re-read has to find it.
func TestDeclinedWakeUpPassesOn(t *testing.T) {
	h := New("", logrus.New())
	a, b, c := h.WaitClaimable([]string{"ios"}), h.WaitClaimable([]string{"android"}), h.WaitClaimable([]string{"ios"})
	h.dispatch([]store.Change{{Kind: "build", ID: "b1", Status: "pending", Platform: "ios"}})
	if !woken(a) || woken(b) || woken(c) {
		t.Fatalf("the first ios waiter alone should be woken: a %v b %v c %v", woken(a), woken(b), woken(c))
	}
	h.Rearm(a) // back in line, as the long poll does before it looks
	look := h.Begin(a)
	h.End(look, true, "") // it saw the build and could not take it
	if woken(a) || woken(b) || !woken(c) {
		t.Fatalf("the declined build should go to the next ios waiter: a %v b %v c %v", woken(a), woken(b), woken(c))
	}
	h.Rearm(c)
	h.End(h.Begin(c), true, "") // nobody can take it: it stops here
	if woken(a) || woken(b) {
		t.Fatal("a build every waiter declined went round again")
	}
}

// A waiter that took the build, or found none claimable (another took it),
// ends the wake-up; one that leaves without looking hands it on.
func TestWakeUpEnds(t *testing.T) {
	h := New("", logrus.New())
	a, b := h.WaitClaimable([]string{"ios"}), h.WaitClaimable([]string{"ios"})
	h.dispatch([]store.Change{{Kind: "build", ID: "b1", Status: "pending", Platform: "ios"}})
	h.End(h.Begin(a), true, "b1")
	h.dispatch([]store.Change{{Kind: "build", ID: "b2", Status: "pending", Platform: "ios"}})
	if !woken(b) {
		t.Fatal("the second build should wake the waiter still in line")
	}
	h.End(h.Begin(b), false, "")
	h.Rearm(a)
	if woken(a) {
		t.Fatal("a wake-up for a build no longer claimable was passed on")
	}

	h.dispatch([]store.Change{{Kind: "build", ID: "b3", Status: "pending", Platform: "ios"}})
	if !woken(a) {
		t.Fatal("b3 should wake a")
	}
	h.Rearm(b)
	h.Done(a) // its request ended before it looked
	if !woken(b) {
		t.Fatal("a waiter leaving with a wake-up should hand it on")
	}
}

// A worker's cancel watch wakes for its build's status, not its log.
func TestWatchStatusIgnoresLogGrowth(t *testing.T) {
	h := New("", logrus.New())
	w := h.WatchStatus("b1")
	defer w.Close()
	h.dispatch([]store.Change{{Kind: "log", ID: "b1"}, {Kind: "build", ID: "b2", Status: "cancelled"}})
	select {
	case <-w.C:
		t.Fatal("the status watch woke for a log append or another build")
	default:
	}
	h.dispatch([]store.Change{{Kind: "build", ID: "b1", Status: "building", Event: "build.cancel_requested"}})
	select {
	case <-w.C:
	default:
		t.Fatal("the status watch missed the cancel")
	}
}
