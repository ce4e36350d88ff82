package agent

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/sirupsen/logrus"

	"github.com/freeagent-build/freeagent/controller/api"
	"github.com/freeagent-build/freeagent/vmbootstrap"
)

// TestSharedDirIsUsableByAnyGuestUID: the VM's user may have another uid
// than the host's (Virtualization.framework maps no ids), so the folder
// must be writable and its files readable by "others", whatever the umask.
func TestSharedDirIsUsableByAnyGuestUID(t *testing.T) {
	old := syscall.Umask(0o077) // a cautious owner's umask must not matter
	defer syscall.Umask(old)
	bin := filepath.Join(t.TempDir(), "freeagent-vm")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp(t.TempDir(), "build-")
	if err != nil {
		t.Fatal(err)
	}
	b := &build{a: &Agent{cfg: Config{BootstrapBinary: bin}}, job: &api.Job{ID: "b1", AttemptID: "a1", OTP: "otp"}, log: logrus.New()}
	if err := b.writeSharedDir(dir); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]os.FileMode{
		dir: 0o777,
		filepath.Join(dir, vmbootstrap.BuildConfigFile): 0o644,
		filepath.Join(dir, "freeagent-vm"):              0o755,
	} {
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := st.Mode().Perm(); got != want {
			t.Errorf("%s: mode %04o, want %04o (the guest's user is \"other\" when its uid differs)", filepath.Base(path), got, want)
		}
	}
}
