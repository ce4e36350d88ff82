package queue

import (
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/store"
)

func TestWaitReasons(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	worker := func(platforms []string, max int, active int, paused bool, seen time.Duration) api.Worker {
		w := api.Worker{Status: "online", Paused: paused, LastSeenAt: now.Add(-seen),
			Capabilities: api.Capabilities{Platforms: platforms, MaxConcurrentBuilds: max}}
		for range active {
			w.ActiveBuilds = append(w.ActiveBuilds, "b")
		}
		return w
	}
	hostHeld := func(name, reason string) api.Worker {
		return api.Worker{Name: name, Status: "online", HostPauseReason: reason, LastSeenAt: now}
	}
	entry := func(platform string, backoff time.Duration) store.QueueEntry {
		return store.QueueEntry{Platform: platform, RunAfter: now.Add(backoff)}
	}
	cases := []struct {
		name    string
		workers []api.Worker
		ahead   map[string]int
		entries []store.QueueEntry
		want    []string
	}{
		{"nobody", nil, nil, []store.QueueEntry{entry("ios", 0)}, []string{"No worker is online."}},
		{"silent worker counts as offline", []api.Worker{worker(nil, 1, 0, false, 6*time.Minute)}, nil,
			[]store.QueueEntry{entry("ios", 0)}, []string{"No worker is online."}},
		{"no worker for the platform", []api.Worker{worker([]string{"android"}, 1, 0, false, 0)}, nil,
			[]store.QueueEntry{entry("ios", 0), entry("android", 0)},
			[]string{"No online worker builds ios.", "Next in line: a worker takes it on its next poll."}},
		{"paused", []api.Worker{worker(nil, 2, 0, true, 0)}, nil,
			[]store.QueueEntry{entry("android", 0)}, []string{"Every android worker is paused."}},
		{"held back by its host", []api.Worker{hostHeld("laptop", "on battery"), worker([]string{"ios"}, 1, 0, false, 0)}, nil,
			[]store.QueueEntry{entry("android", 0), entry("ios", 0)},
			[]string{"Every android worker is paused. Its host holds builds back until this clears (laptop: on battery).",
				"Next in line: a worker takes it on its next poll."}},
		{"held back by hosts and an owner", []api.Worker{hostHeld("laptop", "you are using this Mac"), hostHeld("mini", "outside schedule 22:00–07:00"),
			{Name: "desk", Status: "online", OwnerPaused: true, LastSeenAt: now}}, nil,
			[]store.QueueEntry{entry("android", 0)},
			[]string{"Every android worker is paused. Their hosts hold builds back until this clears (laptop: you are using this Mac; mini: outside schedule 22:00–07:00)."}},
		{"slots fill in claim order; backoff takes no slot", []api.Worker{worker(nil, 2, 0, false, 0), worker([]string{"ios"}, 1, 1, false, 0)}, nil,
			[]store.QueueEntry{entry("ios", 0), entry("ios", time.Minute), entry("android", 0), entry("ios", 0)},
			[]string{"Next in line: a worker takes it on its next poll.", "Backing off after a failed attempt until 03:05:05 UTC.",
				"Next in line: a worker takes it on its next poll.", "All ios workers are busy (1 ahead)."}},
		{"a versatile worker is kept for what only it builds", []api.Worker{worker(nil, 1, 0, false, 0), worker([]string{"android"}, 1, 0, false, 0)}, nil,
			[]store.QueueEntry{entry("android", 0), entry("ios", 0), entry("android", 0)},
			[]string{"Next in line: a worker takes it on its next poll.", "Next in line: a worker takes it on its next poll.",
				"All android workers are busy (1 ahead)."}},
		{"builds on earlier pages", []api.Worker{worker(nil, 4, 0, false, 0)}, map[string]int{"android": 10},
			[]store.QueueEntry{entry("android", 0)}, []string{"All android workers are busy (10 ahead)."}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := newFleet(c.workers, now, 5*time.Minute).reasons(c.entries, c.ahead, now)
			for i := range c.want {
				if got[i] != c.want[i] {
					t.Errorf("entry %d: got %q, want %q", i, got[i], c.want[i])
				}
			}
		})
	}
}
