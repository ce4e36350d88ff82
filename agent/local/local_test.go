package local

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/agent"
)

// A stand-in bootstrap: records its arguments, cwd and environment, then
// waits to be stopped (a child it starts must die with it).
const fakeBootstrap = `#!/bin/sh
{ echo "args=$*"; echo "pwd=$(pwd)"; echo "home=$HOME"; env | grep -c '^FREEAGENT_' | sed 's/^/freeagent_vars=/'; } > "$2/seen"
sleep 300 &
echo $! > "$2/child"
wait
`

func TestLocalDriverRunsAndDestroys(t *testing.T) {
	t.Setenv("FREEAGENT_API_KEY", "fak_secret")
	root, shared := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(shared, "freeagent-vm"), []byte(fakeBootstrap), 0o755); err != nil {
		t.Fatal(err)
	}
	d := &Driver{Root: root}
	inst, err := d.Start(context.Background(), "fa-b1-a1", shared, agent.Resources{})
	if err != nil {
		t.Fatal(err)
	}
	var seen []byte
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if seen, err = os.ReadFile(filepath.Join(shared, "seen")); err == nil && len(seen) > 0 {
			if _, err := os.Stat(filepath.Join(shared, "child")); err == nil {
				break
			}
		}
	}
	scratch := filepath.Join(root, "fa-b1-a1")
	for _, want := range []string{"args=--shared-dir " + shared, "pwd=" + scratch, "home=" + scratch, "freeagent_vars=0"} {
		if !strings.Contains(string(seen), want) {
			t.Fatalf("bootstrap saw %q, want %q", seen, want)
		}
	}
	if err := inst.Destroy(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-inst.Exited():
	default:
		t.Fatal("bootstrap still running after Destroy")
	}
	if _, err := os.Stat(scratch); !os.IsNotExist(err) {
		t.Fatal("scratch directory left behind")
	}
	child, _ := os.ReadFile(filepath.Join(shared, "child"))
	if pid := strings.TrimSpace(string(child)); pid != "" {
		for deadline := time.Now().Add(3 * time.Second); alive(pid); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the bootstrap's child %s survived Destroy", pid)
			}
		}
	}
	// Leftovers of a crashed run go; other directories stay.
	os.MkdirAll(filepath.Join(root, "fa-old"), 0o700)
	os.MkdirAll(filepath.Join(root, "keep-me"), 0o700)
	if err := d.Cleanup(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "fa-old")); !os.IsNotExist(err) {
		t.Fatal("stale scratch directory not removed")
	}
	if _, err := os.Stat(filepath.Join(root, "keep-me")); err != nil {
		t.Fatal("Cleanup removed a directory it does not own")
	}
}

// alive: the process exists and is not a zombie awaiting its reaper.
func alive(pid string) bool {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i < 0 || i+2 >= len(b) || b[i+2] != 'Z'
}

// TestLocalDriverSharesCachesReadOnly: the caches directory reaches the
// bootstrap as --cache-share, a copy whose files the build cannot change
// (the worker's own archives stay as they were), removed with the rest.
func TestLocalDriverSharesCachesReadOnly(t *testing.T) {
	root, shared, caches := t.TempDir(), t.TempDir(), t.TempDir()
	script := `#!/bin/sh
cat "$4/npm.tar" > "$2/seen"
if echo changed > "$4/npm.tar" 2>/dev/null; then echo writable > "$2/result"; else echo refused > "$2/result"; fi
`
	if err := os.WriteFile(filepath.Join(shared, "freeagent-vm"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(caches, "npm.tar"), []byte("archive"), 0o444); err != nil {
		t.Fatal(err)
	}
	d := &Driver{Root: root}
	inst, err := d.Start(context.Background(), "fa-b2-a1", shared, agent.Resources{CacheDir: caches})
	if err != nil {
		t.Fatal(err)
	}
	<-inst.Exited()
	seen, _ := os.ReadFile(filepath.Join(shared, "seen"))
	result, _ := os.ReadFile(filepath.Join(shared, "result"))
	if string(seen) != "archive" {
		t.Errorf("the bootstrap read %q from the cache share", seen)
	}
	if orig, _ := os.ReadFile(filepath.Join(caches, "npm.tar")); string(orig) != "archive" {
		t.Errorf("the worker's archive became %q", orig)
	}
	if os.Geteuid() != 0 && strings.TrimSpace(string(result)) != "refused" { // root writes through file modes
		t.Errorf("writing the shared copy: %s", result)
	}
	if err := inst.Destroy(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "fa-b2-a1")); !os.IsNotExist(err) {
		t.Fatal("scratch directory with the caches copy left behind")
	}
}
