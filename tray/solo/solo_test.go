package solo

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/freeagent-build/freeagent/agent/hostcheck"
	"github.com/freeagent-build/freeagent/agent/secrets"
	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/pgcluster"
)

// dataDir is a folder the postgres user can traverse when the tests run as
// root (the private cluster then runs as postgres).
func dataDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "fa-solo-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o711)
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func TestSoloControllerWithItsOwnDatabaseAndKeys(t *testing.T) {
	if _, err := pgcluster.FindBinDir(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	ctx := context.Background()
	dir := dataDir(t)
	sec := &secrets.FileStore{Path: filepath.Join(dir, "credentials.json")}
	log := logrus.New()
	log.SetOutput(io.Discard)
	cfg := Config{DataDir: dir, Listen: "127.0.0.1:0", Secrets: sec}
	c, err := Start(ctx, cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	if r := hostcheck.Controller(ctx, hostcheck.Config{ControllerURL: c.URL, APIKey: c.WorkerKey}); r.Severity != hostcheck.OK {
		t.Fatalf("the worker key does not work: %+v", r)
	}
	if stored, _ := sec.Get(KeyWorker); stored != c.WorkerKey {
		t.Fatalf("worker key not stored: %q", stored)
	}
	dev, err := os.ReadFile(c.DeveloperKeyFile)
	if err != nil || c.DeveloperKeyFile != filepath.Join(dir, "controller", "developer-key") {
		t.Fatalf("developer key file %s: %v", c.DeveloperKeyFile, err)
	}
	if st, _ := os.Stat(c.DeveloperKeyFile); st.Mode().Perm() != 0o600 {
		t.Fatalf("developer key mode %v", st.Mode())
	}
	devClient := &api.Client{BaseURL: c.URL, APIKey: strings.TrimSpace(string(dev))}
	if _, err := devClient.ListBuilds(ctx, api.ListOptions{}); err != nil {
		t.Fatalf("expo-build's key does not work: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "controller", "postgres")); err != nil {
		t.Fatalf("the database is not under the app's data folder: %v", err)
	}
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := c.Shutdown(sctx); err != nil {
		t.Fatal(err)
	}

	// Started again on the same folder: same database, same keys.
	c2, err := Start(ctx, cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Shutdown(sctx)
	dev2, _ := os.ReadFile(c2.DeveloperKeyFile)
	if c2.WorkerKey != c.WorkerKey || string(dev2) != string(dev) {
		t.Fatal("restarting created new keys")
	}
	// A key the database no longer knows is replaced.
	sec.Set(KeyWorker, "fak_forgotten")
	c2.ensureKeys(ctx, sec)
	if c2.WorkerKey == "fak_forgotten" || c2.WorkerKey == "" {
		t.Fatalf("an unknown stored key was kept: %q", c2.WorkerKey)
	}
}

func TestLoopbackURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://0.0.0.0:8420": "http://127.0.0.1:8420", "http://[::]:8420": "http://127.0.0.1:8420",
		"http://127.0.0.1:9": "http://127.0.0.1:9", "http://192.168.64.1:8420": "http://192.168.64.1:8420",
	} {
		if got := loopbackURL(in); got != want {
			t.Errorf("loopbackURL(%q) = %q, want %q", in, got, want)
		}
	}
}

// hostAddress is a non-loopback IPv4 address of this machine, to connect
// from an address that is neither this Mac's loopback nor the VM network.
func hostAddress(t *testing.T) netip.Addr {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr().Is4() && !p.Addr().IsLoopback() && !p.Addr().IsLinkLocalUnicast() {
			return p.Addr()
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("this machine has no non-loopback IPv4 address to connect from: %v", addrs)
	}
	t.Skipf("no non-loopback IPv4 address to connect from: %v", addrs)
	return netip.Addr{}
}

// healthFrom asks for /health from local address from; "" when the
// connection was closed unanswered.
func healthFrom(t *testing.T, from netip.Addr, port int) string {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: from.AsSlice()}, Timeout: 10 * time.Second}
	c, err := d.Dial("tcp", net.JoinHostPort(from.String(), strconv.Itoa(port)))
	if err != nil {
		t.Fatalf("dial from %s: %v", from, err)
	}
	defer c.Close()
	io.WriteString(c, "GET /health HTTP/1.1\r\nHost: solo\r\nConnection: close\r\n\r\n")
	status, _ := bufio.NewReader(c).ReadString('\n')
	return status
}

// The solo controller listens on every interface (the VM bridge comes and
// goes) but serves only loopback and the VM network: a connection from the
// host's LAN address is closed unanswered.
func TestSoloServesOnlyThisMacAndTheVMNetwork(t *testing.T) {
	if _, err := pgcluster.FindBinDir(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	lan := hostAddress(t)
	vmNet := "198.51.100.0/24" // documentation addresses, not the LAN's
	if netip.MustParsePrefix(vmNet).Contains(lan) {
		vmNet = "203.0.113.0/24"
	}
	dir := dataDir(t)
	log := logrus.New()
	log.SetOutput(io.Discard)
	c, err := Start(context.Background(), Config{DataDir: dir, Listen: "0.0.0.0:0", VMNetwork: vmNet,
		Secrets: &secrets.FileStore{Path: filepath.Join(dir, "credentials.json")}}, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		c.Shutdown(ctx)
	})
	u, _ := url.Parse(c.URL)
	port, _ := strconv.Atoi(u.Port())
	if status := healthFrom(t, netip.MustParseAddr("127.0.0.1"), port); !strings.Contains(status, " 200 ") {
		t.Fatalf("from loopback: %q", status)
	}
	if status := healthFrom(t, lan, port); status != "" {
		t.Fatalf("from the LAN address %s: answered %q; want the connection closed", lan, status)
	}
}

func TestSoloAllowedClients(t *testing.T) {
	got, err := Config{}.allowedClients()
	if err != nil || fmt.Sprint(got) != "[127.0.0.0/8 ::1/128 192.168.64.0/24]" {
		t.Fatalf("default: %v %v", got, err)
	}
	if got, err := (Config{VMNetwork: "10.9.8.7/16"}).allowedClients(); err != nil || got[2] != netip.MustParsePrefix("10.9.0.0/16") {
		t.Fatalf("a configured VM network: %v %v", got, err)
	}
	if _, err := (Config{VMNetwork: "bridge100"}).allowedClients(); err == nil || !strings.Contains(err.Error(), "--solo-vm-network") {
		t.Fatalf("a bad VM network: %v", err)
	}
}
