package tart

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/freeagent-build/freeagent/agent"
)

var _ agent.SpareDriver = (*Driver)(nil)

// TemplateVersion implements agent.SpareDriver. A local template is its
// files' sizes and modification times (rebuilding or booting it changes
// them; cloning it does not); a remote one the digest its tag points at in
// Tart's OCI cache (a pull that moved the tag changes it).
func (d *Driver) TemplateVersion(ctx context.Context) (string, error) {
	home, err := d.tartHome()
	if err != nil {
		return "", err
	}
	if IsRemote(d.Template) {
		ref := fullRemoteName(d.Template)
		if i := strings.Index(ref, "@"); i >= 0 {
			ref = ref[:i] + "/" + ref[i+1:] // a digest is its own directory
		} else if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
			ref = ref[:i] + "/" + ref[i+1:]
		}
		target, err := filepath.EvalSymlinks(filepath.Join(home, "cache", "OCIs", filepath.FromSlash(ref)))
		if err != nil {
			return "", fmt.Errorf("the VM template %q is not in Tart's cache (a build pulls it): %w", d.Template, err)
		}
		return filepath.Base(target), nil
	}
	var b strings.Builder
	for _, f := range []string{"config.json", "disk.img", "nvram.bin"} {
		st, err := os.Stat(filepath.Join(home, "vms", d.Template, f))
		if err != nil {
			return "", fmt.Errorf("the VM template %q is gone or incomplete (%w): build it with scripts/build-vm-template.sh or set --template", d.Template, err)
		}
		fmt.Fprintf(&b, "%s:%d:%d;", f, st.Size(), st.ModTime().UnixNano())
	}
	return b.String(), nil
}

// ForeignVMs implements agent.SpareDriver: the running VMs of this Tart
// home that this process did not start. (VMs of other users and homes, and
// other apps', count towards macOS's limit too but cannot be listed.)
func (d *Driver) ForeignVMs(ctx context.Context) (int, error) {
	vms, err := d.List(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, vm := range vms {
		if vm.Running && !d.isOwned(vm.Name) {
			n++
		}
	}
	return n, nil
}
