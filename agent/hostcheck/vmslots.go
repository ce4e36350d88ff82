package hostcheck

import (
	"context"

	"github.com/freeagent-build/freeagent/agent/tart"
)

// VMSlotGate holds builds back once the host refuses every VM though none
// runs (tart.Driver.SlotLeak): each build would be handed back and taken
// again, for ever, and only a restart of the Mac clears it.
type VMSlotGate struct {
	Driver *tart.Driver
}

// PauseReason implements agent.HostGate.
func (g VMSlotGate) PauseReason(context.Context) string {
	if why := g.Driver.SlotLeak(); why != "" {
		return why + "; fix: restart the Mac"
	}
	return ""
}
