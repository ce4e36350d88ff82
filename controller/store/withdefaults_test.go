package store

import (
	"testing"
	"time"
)

// A zero Config takes the production timings, except retention (zero keeps
// files forever); Off turns backoff, rotation, the delivery grace and warm
// placement off; set values stay.
func TestConfigWithDefaults(t *testing.T) {
	want := DefaultConfig()
	want.RetainArtifacts, want.RetainSources, want.RetainLogs = 0, 0, 0
	if got := (Config{}).WithDefaults(); got != want {
		t.Fatalf("zero config: %+v, want %+v", got, want)
	}
	off := Config{MaxBackoff: Off, TokenRotateAfter: Off, TokenDeliveryGrace: Off, WarmPlacementWait: Off, RetainLogs: Off}.WithDefaults()
	if off.MaxBackoff != 0 || off.TokenRotateAfter != 0 || off.TokenDeliveryGrace != 0 || off.WarmPlacementWait != 0 || off.RetainLogs != 0 {
		t.Fatalf("config set Off: %+v", off)
	}
	set := Config{LeaseTTL: 3 * time.Second, MaxAttempts: 2, ControllerID: "c1"}.WithDefaults()
	if set.LeaseTTL != 3*time.Second || set.MaxAttempts != 2 || set.ControllerID != "c1" || set.TokenTTL != DefaultConfig().TokenTTL {
		t.Fatalf("set config: %+v", set)
	}
}
