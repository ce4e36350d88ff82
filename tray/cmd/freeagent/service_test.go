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
