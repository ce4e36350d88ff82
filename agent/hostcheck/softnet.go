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
	return softnet(ctx, d, softnetRoot)
}

// softnetRoot is how Tart decides whether softnet may become root
// (Softnet.configureSUIDBitIfNeeded): owned by root with the setuid bit,
// else `sudo --non-interactive softnet --help` succeeds. It says which.
func softnetRoot(ctx context.Context, real string) (how string, ok bool) {
	if st, err := os.Stat(real); err == nil {
		if sys, ok := st.Sys().(*syscall.Stat_t); ok && sys.Uid == 0 && st.Mode()&os.ModeSetuid != 0 {
			return "setuid root", true
		}
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if exec.CommandContext(sctx, "sudo", "--non-interactive", real, "--help").Run() == nil {
		return "passwordless sudo", true
	}
	return "", false
}

// SoftnetFix is the owner's fix for a softnet that cannot become root: what
// Tart itself runs, through sudo, when `tart run` has a terminal.
func SoftnetFix(path string) string {
	return fmt.Sprintf("sudo chown root %s && sudo chmod u+s %s", path, path)
}

// SoftnetGate holds builds back while the VMs' softnet cannot become root:
// `tart run` from the worker has no terminal, so Tart never offers to set
// the bit, softnet exits, Tart stops the VM and every build would fail.
// Each `brew install` or `brew upgrade` of softnet clears the bit.
type SoftnetGate struct {
	Driver *tart.Driver
	// root is softnetRoot; tests replace it (they run as root, for whom
	// sudo always works).
	root func(ctx context.Context, real string) (string, bool)
}

// PauseReason implements agent.HostGate.
func (g *SoftnetGate) PauseReason(ctx context.Context) string {
	root := g.root
	if root == nil {
		root = softnetRoot
	}
	if r := softnet(ctx, g.Driver, root); r.Severity == Fail {
		return r.Message + "; fix: " + r.Fix
	}
	return ""
}

func softnet(ctx context.Context, d *tart.Driver, root func(ctx context.Context, real string) (string, bool)) Result {
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
	if how, ok := root(ctx, real); ok {
		r.Severity, r.Message = OK, fmt.Sprintf("Softnet %s (%s)", real, how)
		return r
	}
	r.Severity = Fail
	r.Message = fmt.Sprintf("Softnet %s cannot become root (neither setuid root nor allowed by sudo without a password; brew install and brew upgrade clear the bit): no builds are taken, as every VM would stop at once", real)
	r.Fix = SoftnetFix(real)
	return r
}
