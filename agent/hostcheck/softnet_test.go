package hostcheck

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/freeagent-build/freeagent/agent/tart"
)

// A softnet that cannot become root holds every build back, with Tart's own
// fix, and builds resume once the fix is applied (the gate asks every time).
// Tests run as root, for whom sudo always works: the root probe is replaced.
func TestSoftnetWithoutRootHoldsBuildsBack(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "softnet")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	hasRoot := false
	g := &SoftnetGate{Driver: &tart.Driver{Softnet: bin}, root: func(context.Context, string) (string, bool) {
		return "setuid root", hasRoot
	}}
	ctx := context.Background()
	reason := g.PauseReason(ctx)
	want := "sudo chown root " + bin + " && sudo chmod u+s " + bin
	if reason == "" || !strings.Contains(reason, want) {
		t.Fatalf("pause reason %q; want one naming %q", reason, want)
	}
	if r := softnet(ctx, g.Driver, g.root); r.Severity != Fail || r.Fix != want {
		t.Fatalf("doctor's finding %+v; want a failure fixed by %q", r, want)
	}
	hasRoot = true
	if reason := g.PauseReason(ctx); reason != "" {
		t.Fatalf("with root, still paused: %q", reason)
	}
	// Tart's shared network needs no softnet: never a pause.
	hasRoot = false
	g.Driver.Network = tart.NetworkShared
	if reason := g.PauseReason(ctx); reason != "" {
		t.Fatalf("shared network paused: %q", reason)
	}
}
