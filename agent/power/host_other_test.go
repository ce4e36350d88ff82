//go:build !darwin

package power_test

import (
	"testing"

	"github.com/freeagent-build/freeagent/agent/power"
)

func TestForHostOffMacOS(t *testing.T) {
	if _, ok := power.ForHost().(power.None); !ok {
		t.Fatalf("off macOS the host needs no assertion, got %T", power.ForHost())
	}
}
