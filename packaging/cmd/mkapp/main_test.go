package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestAssembleThenValidate(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "hello")
	build := exec.Command("go", "build", "-o", bin, "../../bundle/testdata/hello")
	build.Env = append(os.Environ(), "GOOS=darwin", "GOARCH=arm64", "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"assemble", "--out", dir, "--version", "v2.0.1", "--freeagent", bin, "--freeagent-vm", bin}, &stdout, &stderr); code != 0 {
		t.Fatalf("assemble: exit %d: %s", code, stderr.String())
	}
	app := filepath.Join(dir, "FreeAgent.app")
	if code := run([]string{"validate", "--arch", "arm64", "--signed", "--entitlements", "../../FreeAgent.entitlements", app}, &stdout, &stderr); code != 0 {
		t.Fatalf("validate: exit %d: %s", code, stderr.String())
	}
	stderr.Reset()
	// The default wants a universal binary, which this is not.
	if code := run([]string{"validate", app}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "holds arm64, want amd64+arm64") {
		t.Fatalf("validate a thin bundle as universal: exit %d: %s", code, stderr.String())
	}
	stderr.Reset()
	if code := run([]string{"validate", "--arch", "arm64", "--entitlements", filepath.Join(dir, "missing"), app}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "missing") {
		t.Fatalf("missing entitlements: exit %d: %s", code, stderr.String())
	}
	stdout.Reset()
	if code := run([]string{"minimum-macos"}, &stdout, &stderr); code != 0 || stdout.String() != "13.0\n" {
		t.Fatalf("minimum-macos: exit %d: %q", code, stdout.String())
	}
	stdout.Reset()
	if code := run([]string{"minos", bin, bin}, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "2 binaries need macOS 13.0 or older") {
		t.Fatalf("minos: exit %d: %s %s", code, stdout.String(), stderr.String())
	}
	stderr.Reset()
	if code := run([]string{"minos", bin, "main.go"}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "main.go is not a Mach-O file") {
		t.Fatalf("minos on a text file: exit %d: %s", code, stderr.String())
	}
	for _, args := range [][]string{{}, {"bake"}, {"assemble", "--out", dir}, {"validate"}, {"minos"}, {"minimum-macos", "x"}} {
		if code := run(args, &stdout, &stderr); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}
