package tart

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
)

// vzService is the process Virtualization.framework runs for each VM, of
// any app and any user.
const vzService = "com.apple.Virtualization.VirtualMachine"

// virtualizationVMs counts the VMs Virtualization.framework runs on this
// Mac, Tart's and every other app's.
func virtualizationVMs(ctx context.Context) (int, error) {
	out, err := exec.CommandContext(ctx, "/bin/ps", "-A", "-o", "comm=").Output()
	if err != nil {
		return 0, fmt.Errorf("list processes: %w", err)
	}
	n := 0
	for _, l := range bytes.Split(out, []byte("\n")) {
		if bytes.HasSuffix(bytes.TrimSpace(l), []byte(vzService)) {
			n++
		}
	}
	return n, nil
}
