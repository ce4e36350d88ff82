package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestServiceUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"service"}, 2, "say install, uninstall or status"},
		{[]string{"service", "start"}, 2, `unknown subcommand "start"`},
		{[]string{"service", "install", "--bogus"}, 2, "flag provided but not defined"},
		{[]string{"service", "status", "extra"}, 2, `unexpected argument "extra"`},
		{[]string{"service", "--help"}, 0, "--headless"},
	} {
		var stderr bytes.Buffer
		if code := run(c.args, strings.NewReader(""), &bytes.Buffer{}, &stderr); code != c.code || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q", c.args, code, stderr.String())
		}
	}
}

func TestBootstrapNear(t *testing.T) {
	dir := t.TempDir()
	contents := filepath.Join(dir, "FreeAgent.app", "Contents")
	exe := filepath.Join(contents, "MacOS", "freeagent")
	os.MkdirAll(filepath.Join(contents, "MacOS"), 0o755)
	os.MkdirAll(filepath.Join(contents, "Resources"), 0o755)
	// Nothing anywhere: next to the executable, so the error names that path.
	if got := bootstrapNear(exe); got != filepath.Join(contents, "MacOS", "freeagent-vm") {
		t.Fatalf("no binary: %s", got)
	}
	os.WriteFile(filepath.Join(contents, "Resources", "freeagent-vm"), nil, 0o755)
	if got := bootstrapNear(exe); got != filepath.Join(contents, "Resources", "freeagent-vm") {
		t.Fatalf("bundle: %s", got)
	}
	os.WriteFile(filepath.Join(contents, "MacOS", "freeagent-vm"), nil, 0o755)
	if got := bootstrapNear(exe); got != filepath.Join(contents, "MacOS", "freeagent-vm") {
		t.Fatalf("next to the executable wins: %s", got)
	}
	// A plain bin/ folder never looks into ../Resources.
	os.MkdirAll(filepath.Join(dir, "Resources"), 0o755)
	os.WriteFile(filepath.Join(dir, "Resources", "freeagent-vm"), nil, 0o755)
	if got := bootstrapNear(filepath.Join(dir, "bin", "freeagent")); got != filepath.Join(dir, "bin", "freeagent-vm") {
		t.Fatalf("bin: %s", got)
	}
}

// TestBootstrapThroughASymlink: the Homebrew cask links
// /opt/homebrew/bin/freeagent to FreeAgent.app/Contents/MacOS/freeagent,
// and os.Executable on macOS returns the link's path. The bootstrap is the
// bundle's, not a freeagent-vm next to the link.
func TestBootstrapThroughASymlink(t *testing.T) {
	dir := t.TempDir()
	contents := filepath.Join(dir, "Caskroom", "freeagent", "1.0", "FreeAgent.app", "Contents")
	exe := filepath.Join(contents, "MacOS", "freeagent")
	os.MkdirAll(filepath.Join(contents, "MacOS"), 0o755)
	os.MkdirAll(filepath.Join(contents, "Resources"), 0o755)
	os.WriteFile(exe, nil, 0o755)
	os.WriteFile(filepath.Join(contents, "Resources", "freeagent-vm"), nil, 0o755)
	bin := filepath.Join(dir, "homebrew", "bin")
	os.MkdirAll(bin, 0o755)
	link := filepath.Join(bin, "freeagent")
	if err := os.Symlink(exe, link); err != nil {
		t.Fatal(err)
	}
	if got, want := bootstrapNear(link), filepath.Join(contents, "Resources", "freeagent-vm"); got != want {
		t.Fatalf("through the link: %s, want %s", got, want)
	}
	// A relative link (as `brew link` makes) resolves the same way.
	rel, err := filepath.Rel(bin, exe)
	if err != nil {
		t.Fatal(err)
	}
	relLink := filepath.Join(bin, "freeagent-rel")
	if err := os.Symlink(rel, relLink); err != nil {
		t.Fatal(err)
	}
	if got, want := bootstrapNear(relLink), filepath.Join(contents, "Resources", "freeagent-vm"); got != want {
		t.Fatalf("through a relative link: %s, want %s", got, want)
	}
}
