//go:build !darwin

package launchd

import (
	"errors"
	"testing"
)

func TestServiceIsMacOSOnly(t *testing.T) {
	h := HostAgent{Executable: "/x/freeagent", Home: t.TempDir()}
	if err := h.Install(); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("install: %v", err)
	}
	if _, err := h.Status(); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("status: %v", err)
	}
	if err := h.Uninstall(); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("uninstall: %v", err)
	}
}
