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
