//go:build !darwin

package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestServiceIsMacOSOnly(t *testing.T) {
	for _, sub := range []string{"install", "uninstall", "status"} {
		var stdout, stderr bytes.Buffer
		if code := run([]string{"service", sub}, strings.NewReader(""), &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "only on macOS") {
			t.Errorf("service %s: exit %d, stderr %q", sub, code, stderr.String())
		}
	}
}

// TestDoctorAsLaunchAgentIsMacOSOnly: --launchd needs launchd, and says
// so; the flag is taken out of what the job would run, in each spelling.
func TestDoctorAsLaunchAgentIsMacOSOnly(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run([]string{"doctor", "--launchd", "--data-dir", t.TempDir(), "--controller-url", "http://127.0.0.1:1"}, strings.NewReader(""), &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "doctor --launchd") || !strings.Contains(stderr.String(), "only on macOS") {
		t.Errorf("exit %d, stderr %q", code, stderr.String())
	}
	got := withoutFlag([]string{"--json", "-launchd", "--launchd=true", "--data-dir", "/d", "launchd"}, "launchd")
	if strings.Join(got, " ") != "--json --data-dir /d launchd" {
		t.Errorf("withoutFlag: %q", got)
	}
}
