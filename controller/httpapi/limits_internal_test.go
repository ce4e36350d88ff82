package httpapi

import (
	"testing"
	"time"
)

// A zero Limits is the production one; Off turns the limits that can be off
// into the 0 the handlers read as "no limit"; set values stay.
func TestLimitsWithDefaults(t *testing.T) {
	if got := (Limits{}).withDefaults(); got != DefaultLimits() {
		t.Fatalf("zero limits: %+v, want %+v", got, DefaultLimits())
	}
	off := Limits{RatePerKey: Off, AuthFailuresPerIP: Off, BodyGrace: Off, ArtifactsPerBuild: Off}.withDefaults()
	if off.RatePerKey != 0 || off.AuthFailuresPerIP != 0 || off.BodyGrace != 0 || off.ArtifactsPerBuild != 0 {
		t.Fatalf("limits set Off: %+v", off)
	}
	if off.Source != DefaultLimits().Source || off.PollMaxWait != DefaultLimits().PollMaxWait {
		t.Fatalf("the other limits of an Off one: %+v", off)
	}
	set := Limits{Source: 1 << 10, PollBackstop: time.Millisecond, RatePerKey: 0.5, BodyGrace: time.Second}.withDefaults()
	if set.Source != 1<<10 || set.PollBackstop != time.Millisecond || set.RatePerKey != 0.5 || set.BodyGrace != time.Second {
		t.Fatalf("set limits changed: %+v", set)
	}
	// A size or wait cannot be off: a negative one takes the default too.
	if neg := (Limits{Source: -1, PollMaxWait: -time.Second}).withDefaults(); neg.Source != DefaultLimits().Source || neg.PollMaxWait != DefaultLimits().PollMaxWait {
		t.Fatalf("negative sizes: %+v", neg)
	}
}
