package cache

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/freeagent-build/freeagent/api"
)

// TestDiskFullEvicts: on a full disk the store evicts its least recently
// used archives to make room before it gives up, and a write that cannot
// fit even then fails whole, leaving no partial file. The disk is a 256 KiB
// tmpfs mounted in a mount namespace of the test's own (a user namespace
// too when it does not run as root), so nothing of the host fills up.
func TestDiskFullEvicts(t *testing.T) {
	if os.Getenv("CACHE_TEST_IN_NAMESPACE") == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestDiskFullEvicts$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), "CACHE_TEST_IN_NAMESPACE=1")
		cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS}
		if uid, gid := os.Geteuid(), os.Getegid(); uid != 0 {
			cmd.SysProcAttr.Cloneflags |= syscall.CLONE_NEWUSER
			cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: uid, Size: 1}}
			cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: gid, Size: 1}}
		}
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestDiskFullEvicts") {
			t.Fatalf("in a mount namespace: %v\n%s", err, out)
		}
		return
	}
	disk := t.TempDir()
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", disk, "tmpfs", 0, "size=256k"); err != nil {
		t.Fatal(err)
	}
	defer syscall.Unmount(disk, 0)
	s, err := Open(filepath.Join(disk, "caches"), 1<<30) // the cap is far: only the disk limits
	if err != nil {
		t.Fatal(err)
	}
	archive := func(n int) string { return writeTemp(t, tarOf(t, "0/f", strings.Repeat("x", n))) }
	for _, p := range []string{"p1", "p2"} {
		if err := s.Put(p, "", "npm", key(p), archive(100<<10)); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
	}
	stage(t, s, "p1", api.CacheEntry{Name: "npm", Key: key("p1")}) // p1 used since: p2 is the least recently used
	if err := s.Put("p3", "", "npm", key("p3"), archive(100<<10)); err != nil {
		t.Fatalf("a put on a full disk failed instead of evicting: %v", err)
	}
	if got := s.Report().Keys; len(got) != 2 || got[0] != key("p3") || got[1] != key("p1") {
		t.Errorf("keys %v, want p3, p1 (p2 evicted)", got)
	}
	err = s.Put("p4", "", "npm", key("p4"), archive(300<<10))
	if !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("an archive larger than the disk: %v, want ENOSPC", err)
	}
	if got := s.Report().Keys; len(got) != 2 {
		t.Errorf("an archive that cannot fit evicted the others: %v left", got)
	}
	var partial []string
	filepath.WalkDir(s.Dir(), func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), ".tmp-") {
			partial = append(partial, p)
		}
		return nil
	})
	if len(partial) != 0 {
		t.Errorf("partial files left: %v", partial)
	}
}
