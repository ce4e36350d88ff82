package agent

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/freeagent-build/freeagent/agent/cache"
	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/internal/vmshare"
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
	if err := b.writeSharedDir(dir, nil); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]os.FileMode{
		dir: 0o777,
		filepath.Join(dir, vmshare.BuildConfigFile): 0o644,
		filepath.Join(dir, "freeagent-vm"):          0o755,
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

// exitedVM is an environment that has already powered off.
type exitedVM struct{ done chan struct{} }

func (v exitedVM) Exited() <-chan struct{}       { return v.done }
func (v exitedVM) Err() error                    { return nil }
func (v exitedVM) Destroy(context.Context) error { return nil }

// TestWatchSurvivesHostileSharedDir: the VM (so the build's code) writes
// the shared folder. A link to a host file, a FIFO nobody writes and a
// 64 GiB sparse progress.json must neither be followed, hang the agent nor
// make it allocate; an unusable signal file fails the build.
func TestWatchSurvivesHostileSharedDir(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "shadow")
	if err := os.WriteFile(secret, []byte(`{"code":"leaked","message":"s3cret host file"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	sparse := func(t *testing.T, path string) {
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := f.Truncate(64 << 30); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, dir string)
		want  string // in the outcome's message
	}{
		{"build-error links to a host file", func(t *testing.T, dir string) {
			if err := os.Symlink(secret, filepath.Join(dir, vmshare.BuildErrorFile)); err != nil {
				t.Fatal(err)
			}
		}, "symbolic link"},
		{"build-complete is a FIFO", func(t *testing.T, dir string) {
			if err := syscall.Mkfifo(filepath.Join(dir, vmshare.BuildCompleteFile), 0o666); err != nil {
				t.Fatal(err)
			}
		}, "is a FIFO"},
		{"build-complete is 64 GiB", func(t *testing.T, dir string) {
			sparse(t, filepath.Join(dir, vmshare.BuildCompleteFile))
		}, "larger than"},
		{"progress.json is 64 GiB, vm-ready a link", func(t *testing.T, dir string) {
			sparse(t, filepath.Join(dir, vmshare.ProgressFile))
			if err := os.Symlink(secret, filepath.Join(dir, vmshare.ReadyFile)); err != nil {
				t.Fatal(err)
			}
		}, "stopped before the build finished"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tc.setup(t, dir)
			a := &Agent{cfg: Config{FileWatchInterval: time.Millisecond, BootTimeout: time.Hour}}
			b := &build{a: a, job: &api.Job{ID: "b1", AttemptID: "a1"}, log: logrus.New(), phase: "booting"}
			vm := exitedVM{done: make(chan struct{})}
			close(vm.done)
			out, _ := b.watch(context.Background(), dir, vm, 0)
			if out.success || !strings.Contains(out.message, tc.want) {
				t.Fatalf("outcome %+v, want a failure mentioning %q", out, tc.want)
			}
			if strings.Contains(out.message, "s3cret") || out.code == "leaked" {
				t.Fatalf("the agent followed the link: %+v", out)
			}
			if s := b.snapshot(); s.Phase != "booting" {
				t.Fatalf("phase %q: the sparse progress.json was used", s.Phase)
			}
		})
	}
}

// TestKeptCachesComeFromTheSharedFolderOnly: the VM creates caches-out
// itself, so it can make it a link to a directory of the host. The agent
// must not follow it: a tar of the host's (or another project's archive)
// named like a cache would become this project's cache and reach its next
// build. The same archive in a real caches-out is kept.
func TestKeptCachesComeFromTheSharedFolderOnly(t *testing.T) {
	var tarball bytes.Buffer
	tw := tar.NewWriter(&tarball)
	for _, h := range []*tar.Header{
		{Typeflag: tar.TypeDir, Name: "store/", Mode: 0o755},
		{Typeflag: tar.TypeReg, Name: "store/private-package.tgz", Mode: 0o644, Size: 6},
	} {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tw.Write([]byte("s3cret")); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	host := t.TempDir() // the host's, outside the shared folder
	if err := os.WriteFile(filepath.Join(host, "npm.tar"), tarball.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	store, err := cache.Open(t.TempDir(), 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	key := strings.Repeat("ab", 32)
	log := logrus.New()
	log.SetOutput(io.Discard)
	b := &build{a: &Agent{caches: store}, log: log,
		job: &api.Job{ID: "b1", AttemptID: "a1", Project: "p1", Caches: []api.CacheEntry{{Name: "npm", Key: key}}}}
	saved := []vmshare.SavedCache{{Name: "npm", Key: key, File: "npm.tar"}}

	dir := t.TempDir() // the shared folder
	if err := os.Symlink(host, filepath.Join(dir, vmshare.CacheOutDir)); err != nil {
		t.Fatal(err)
	}
	b.keepCaches(dir, saved)
	if r := store.Report(); r.Bytes != 0 || len(r.Keys) != 0 {
		t.Fatalf("the agent kept a host file reached through the VM's link as the project's cache: %+v", r)
	}

	// The control: the same archive where the VM writes it is kept.
	if err := os.Remove(filepath.Join(dir, vmshare.CacheOutDir)); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, vmshare.CacheOutDir), 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, vmshare.CacheOutDir, "npm.tar"), tarball.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	b.keepCaches(dir, saved)
	if r := store.Report(); r.Bytes != int64(tarball.Len()) {
		t.Fatalf("the build's own archive was not kept: %+v", r)
	}
}
