package hostcheck

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/freeagent-build/freeagent/agent/tart"
)

// IDSoftnet is the check of the VMs' network isolation.
const IDSoftnet = "softnet"

// Softnet checks what --net-softnet needs (Softnet's README, "Installing"):
// the softnet binary, and root for it, either by its setuid bit (owned by
// root) or by passwordless sudo. Tart sets the bit itself only when `tart
// run` has a terminal; the worker's never does. On the shared network the
// finding is a warning: VMs reach the owner's LAN.
func Softnet(ctx context.Context, d *tart.Driver) Result {
	r := Result{ID: IDSoftnet}
	if d.Network == tart.NetworkShared {
		r.Severity = Warn
		r.Message = "VMs run on Tart's shared network (--vm-network shared): a build can reach this Mac's LAN"
		r.Fix = "install softnet (brew install cirruslabs/cli/softnet) and drop --vm-network shared"
		return r
	}
	p, err := d.SoftnetPath()
	if err != nil {
		r.Severity = Fail
		name := d.Softnet
		if name == "" {
			name = "softnet"
		}
		r.Message = fmt.Sprintf("softnet is not installed (no %s): VMs on Softnet, the default network, cannot start", name)
		r.Fix = `brew install cirruslabs/cli/softnet, then give it root: sudo chown root "$(realpath "$(command -v softnet)")" && sudo chmod u+s "$(realpath "$(command -v softnet)")"; or pass --vm-network shared`
		return r
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		real = p
	}
	if st, err := os.Stat(real); err == nil {
		if sys, ok := st.Sys().(*syscall.Stat_t); ok && sys.Uid == 0 && st.Mode()&os.ModeSetuid != 0 {
			r.Severity, r.Message = OK, fmt.Sprintf("Softnet %s (setuid root)", real)
			return r
		}
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if exec.CommandContext(sctx, "sudo", "--non-interactive", real, "--help").Run() == nil {
		r.Severity, r.Message = OK, fmt.Sprintf("Softnet %s (passwordless sudo)", real)
		return r
	}
	r.Severity = Fail
	r.Message = fmt.Sprintf("Softnet %s cannot become root (neither setuid root nor allowed by sudo without a password): VMs will fail to start", real)
	r.Fix = fmt.Sprintf("sudo chown root %q && sudo chmod u+s %q (or run `tart run --net-softnet` once in a terminal: Tart asks for the password and does it)", real, real)
	return r
}
