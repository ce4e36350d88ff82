//go:build unix

package secrets

import (
	"slices"
	"testing"
)

// TestSecurityCommandHasNoTerminal: every security call starts in a new
// session (no controlling terminal, so its -w prompt reads stdin), with the
// secret on stdin and never in argv.
func TestSecurityCommandHasNoTerminal(t *testing.T) {
	s := &SecurityStore{}
	cmd := s.command("fak_secret\nfak_secret\n", "add-generic-password", "-U", "-s", Service, "-a", KeyAPIKey, "-l", "Free Agent worker "+KeyAPIKey, "-w")
	if cmd.SysProcAttr == nil || !cmd.SysProcAttr.Setsid || cmd.SysProcAttr.Setctty || cmd.SysProcAttr.Foreground {
		t.Fatalf("SysProcAttr = %+v, want Setsid only", cmd.SysProcAttr)
	}
	want := []string{"/usr/bin/security", "add-generic-password", "-U", "-s", Service, "-a", KeyAPIKey, "-l", "Free Agent worker " + KeyAPIKey, "-w"}
	if cmd.Path != "/usr/bin/security" || !slices.Equal(cmd.Args, want) {
		t.Fatalf("argv = %q (%s), want %q", cmd.Args, cmd.Path, want)
	}
	if cmd.Stdin == nil {
		t.Fatal("the secret must go on stdin")
	}
}
