package secrets

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"unsafe"
)

// ttyHelperEnv makes the test binary the helper of
// TestSecurityStoreWithATerminal: a process whose controlling terminal is a
// pseudo-terminal, as `freeagent setup` typed in Terminal.app is.
const ttyHelperEnv = "FREEAGENT_SECRETS_TTY_HELPER"

// TestSecurityStoreWithATerminal stores and reads secrets through the
// stand-in from a process that has a controlling terminal. The stand-in
// fails, as the real security would prompt on /dev/tty, unless the store
// starts it without one.
func TestSecurityStoreWithATerminal(t *testing.T) {
	if os.Getenv(ttyHelperEnv) == "1" {
		if f, err := os.Open("/dev/tty"); err != nil {
			t.Fatalf("the helper has no controlling terminal: %v", err)
		} else {
			f.Close()
		}
		tool, _ := filepath.Abs("testdata/security")
		exercise(t, &SecurityStore{Tool: tool})
		return
	}
	master, slave := openPTY(t)
	defer master.Close()
	defer slave.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^TestSecurityStoreWithATerminal$", "-test.v")
	cmd.Env = append(os.Environ(), ttyHelperEnv+"=1", "FAKE_KEYCHAIN_DIR="+t.TempDir())
	var out bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, &out, &out
	// A new session whose controlling terminal is the pty (stdin, fd 0).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Run(); err != nil {
		t.Fatalf("with a controlling terminal: %v\n%s", err, out.String())
	}
}

// openPTY opens a pseudo-terminal pair (posix_openpt, unlockpt, ptsname).
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	var unlock int32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, master.Fd(), syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); e != 0 {
		master.Close()
		t.Fatalf("unlockpt: %v", e)
	}
	var n uint32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, master.Fd(), syscall.TIOCGPTN, uintptr(unsafe.Pointer(&n))); e != 0 {
		master.Close()
		t.Fatalf("ptsname: %v", e)
	}
	slave, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		master.Close()
		t.Fatalf("open the pty's terminal: %v", err)
	}
	return master, slave
}
