package hostcheck_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/freeagent-build/freeagent/agent/hostcheck"
)

func TestDHCPLease(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.plist")
	if err := os.WriteFile(garbage, []byte("not a plist {"), 0o644); err != nil {
		t.Fatal(err)
	}
	sample := func(name string) string { return filepath.Join("testdata", "internetsharing", name) }
	const fix = "sudo defaults write /Library/Preferences/SystemConfiguration/com.apple.InternetSharing.default.plist bootpd -dict DHCPLeaseTimeSecs -int 600"
	for _, c := range []struct {
		name, path string
		want       hostcheck.Severity
		text       string
	}{
		{"the fix applied", sample("lease-600.plist"), hostcheck.OK, "last 600 s (room for about 36432 builds a day)"},
		{"no file: macOS's default", filepath.Join(dir, "missing.plist"), hostcheck.Warn, "last 86400 s: each build takes a new address, so 253 builds within 24h0m0s use up 192.168.64.0/24"},
		{"no bootpd settings: the default", sample("nat-only.plist"), hostcheck.Warn, "last 86400 s"},
		{"longer than an hour", sample("lease-7200.plist"), hostcheck.Warn, "last 7200 s: each build takes a new address, so 253 builds within 2h0m0s"},
		{"written without -int", sample("lease-string.plist"), hostcheck.Warn, `DHCPLeaseTimeSecs "600" (a string), not an integer: write it with -int`},
		{"unreadable", garbage, hostcheck.Warn, "garbage.plist does not parse"},
	} {
		r := hostcheck.DHCPLease(c.path)
		if r.ID != hostcheck.IDDHCPLease || r.Severity != c.want || !strings.Contains(r.Message, c.text) {
			t.Errorf("%s: %+v, want %s with %q", c.name, r, c.want, c.text)
		}
		if c.want != hostcheck.OK && !strings.Contains(r.Fix, fix) {
			t.Errorf("%s: fix %q does not give the command", c.name, r.Fix)
		}
	}

	// doctor runs it with the Tart checks, on the file it is given.
	d, _ := fakeTart(t, "macos-expo")
	for path, want := range map[string]hostcheck.Severity{sample("lease-600.plist"): hostcheck.OK, sample("nat-only.plist"): hostcheck.Warn} {
		rs := hostcheck.Run(context.Background(), hostcheck.Config{Tart: d, InternetSharingPlist: path, DataDir: dir, MinFree: 1})
		if r := find(rs, hostcheck.IDDHCPLease); r == nil || r.Severity != want {
			t.Errorf("Run with %s: %+v", path, rs)
		}
	}
	// Without Tart (the local driver) there is no VM network to check.
	if r := find(hostcheck.Run(context.Background(), hostcheck.Config{DataDir: dir, MinFree: 1}), hostcheck.IDDHCPLease); r != nil {
		t.Errorf("checked without Tart: %+v", r)
	}
}

func find(rs []hostcheck.Result, id string) *hostcheck.Result {
	for i := range rs {
		if rs[i].ID == id {
			return &rs[i]
		}
	}
	return nil
}
