package tart

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/freeagent-build/freeagent/agent"
	"github.com/freeagent-build/freeagent/internal/standins/faketart/faketarttest"
)

func TestParseAllow(t *testing.T) {
	t.Parallel()
	got, err := ParseAllow(" 10.1.2.3/8, 192.168.1.20 ,,172.16.0.0/12")
	if err != nil || !slices.Equal(got, []string{"10.0.0.0/8", "192.168.1.20/32", "172.16.0.0/12"}) {
		t.Fatalf("ParseAllow: %q %v", got, err)
	}
	for _, bad := range []string{"10.0.0/8", "fd00::/8", "registry.local", "10.0.0.0/33"} {
		if _, err := ParseAllow(bad); err == nil || !strings.Contains(err.Error(), "IPv4 CIDR") {
			t.Errorf("ParseAllow(%q): %v", bad, err)
		}
	}
}

func TestControllerAllow(t *testing.T) {
	t.Parallel()
	lookup := func(host string) ([]net.IP, error) {
		if host == "builds.lan" {
			return []net.IP{net.ParseIP("10.0.0.7"), net.ParseIP("fd00::7")}, nil
		}
		return nil, errors.New("no such host")
	}
	for host, want := range map[string][]string{
		"192.168.64.1": {"192.168.64.1/32"},
		"builds.lan":   {"10.0.0.7/32"},
		"127.0.0.1":    nil,
	} {
		if got, err := ControllerAllow(host, lookup); err != nil || !slices.Equal(got, want) {
			t.Errorf("ControllerAllow(%s) = %q, %v; want %q", host, got, err, want)
		}
	}
	if _, err := ControllerAllow("gone.example", lookup); err == nil || !strings.Contains(err.Error(), "gone.example") {
		t.Errorf("an unresolvable controller: %v", err)
	}
}

// TestStartWithoutSoftnet: with softnet missing a softnet VM is not
// started (nothing cloned); on the shared network it needs none and gets
// no --net flag.
func TestStartWithoutSoftnet(t *testing.T) {
	e := newTartEnv(t)
	if !e.fake {
		t.Skip("needs the fake tart")
	}
	e.driver.Softnet = filepath.Join(t.TempDir(), "no-softnet")
	_, err := e.driver.Start(context.Background(), "fa-nosoftnet", t.TempDir(), agent.Resources{})
	var se *agent.StartError
	if !errors.As(err, &se) || se.Code != "softnet_missing" || !errors.Is(err, ErrSoftnetMissing) || !strings.Contains(err.Error(), "brew install cirruslabs/cli/softnet") {
		t.Fatalf("Start without softnet: %v", err)
	}
	if _, ok := e.names(t)[e.vm(t, "fa-nosoftnet")]; ok {
		t.Fatal("a VM was cloned although softnet is missing")
	}
	e.driver.Network = NetworkShared
	inst, err := e.driver.Start(context.Background(), "fa-shared", t.TempDir(), agent.Resources{})
	if err != nil {
		t.Fatal(err)
	}
	defer inst.Destroy(context.Background()) //nolint:errcheck
	for _, entry := range faketarttest.ReadLog(t, e.log) {
		if entry.Cmd == "run" && slices.ContainsFunc(entry.Argv, func(a string) bool { return strings.HasPrefix(a, "--net") }) {
			t.Fatalf("a shared-network VM ran with %q", entry.Argv)
		}
	}
}
