package power_test

import (
	"os"
	"testing"

	"github.com/freeagent-build/freeagent/agent/power"
)

func TestForHostOnMacOS(t *testing.T) {
	c, ok := power.ForHost().(*power.Caffeinate)
	if !ok || c.Path != "/usr/bin/caffeinate" || c.PID != os.Getpid() {
		t.Fatalf("ForHost on macOS: %#v", power.ForHost())
	}
}
