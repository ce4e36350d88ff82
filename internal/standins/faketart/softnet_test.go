package main

import (
	"crypto/rand"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/internal/standins/faketart/faketarttest"
)

// softnetOnPath is the fixture with a stand-in softnet on its PATH.
func softnetOnPath(t *testing.T, f *fixture) *fixture {
	t.Helper()
	return f.with("PATH=" + filepath.Dir(faketarttest.Softnet(t)) + ":" + os.Getenv("PATH"))
}

// TestSoftnetFlags: the run flags are checked as Tart's Run.validate()
// (Sources/tart/Commands/Run.swift) checks them — one network mode, the
// softnet options implying --net-softnet, usage errors with exit 64 — and
// the CIDR lists as softnet's clap parser reads them (Tart passes them on
// unread): a bad element ends the run with softnet's error and Tart's
// RuntimeFailed, exit 1.
func TestSoftnetFlags(t *testing.T) {
	f := newFixture(t)
	faketarttest.Template(t, f.home, "vm", []string{"/bin/sh", "-c", "sleep 60"}, nil)
	f = softnetOnPath(t, f)
	const exclusive = "Error: --net-bridged, --net-softnet and --net-host are mutually exclusive\n"
	for _, args := range [][]string{
		{"--net-softnet", "--net-bridged", "en0"},
		{"--net-softnet", "--net-host"},
		{"--net-softnet-allow", "10.0.0.0/8", "--net-host"},
		{"--net-softnet-block", "10.0.0.0/8", "--net-bridged", "en0"},
		{"--net-softnet-expose", "2222:22", "--net-host"},
		{"--net-bridged", "en0", "--net-host"},
	} {
		r := f.tart(append(append([]string{"run", "--no-graphics"}, args...), "vm")...)
		if r.Code != 64 || !strings.HasPrefix(r.Stderr, exclusive) || !strings.Contains(r.Stderr, "\nUsage: tart run ") {
			t.Errorf("run %v: exit %d stderr %q", args, r.Code, r.Stderr)
		}
	}
	// Tart prints the error of its VM task without the "Error: " prefix.
	const runtimeFailed = "RuntimeFailed(why: \"Softnet process terminated prematurely\")\n"
	badValue := func(opt, v string) string {
		return "error: invalid value '" + v + "' for '--" + opt + " <comma-separated CIDRs or @-alias>': invalid IP address syntax\n\nFor more information, try '--help'.\n" + runtimeFailed
	}
	for _, c := range []struct{ flag, list, opt, bad string }{
		{"--net-softnet-allow", "10.0.0/8", "allow", "10.0.0/8"},
		{"--net-softnet-allow", "192.168.64.1/32,10.0.0.0/33", "allow", "10.0.0.0/33"},
		{"--net-softnet-allow", "fd00::/8", "allow", "fd00::/8"},
		{"--net-softnet-allow", "10.1.2.3", "allow", "10.1.2.3"},
		{"--net-softnet-block", "@hosts", "block", "@hosts"},
		{"--net-softnet-block", "1.2.3.4/8,", "block", ""},
		// An empty value reaches softnet too (Tart passes --allow "").
		{"--net-softnet-allow", "", "allow", ""},
		{"--net-softnet-block=", "", "block", ""},
	} {
		args := []string{"run", "--no-graphics", c.flag, c.list, "vm"}
		if strings.HasSuffix(c.flag, "=") {
			args = []string{"run", "--no-graphics", c.flag, "vm"}
		}
		f.fails(1, badValue(c.opt, c.bad), args...)
	}
	// --net-softnet-expose is softnet's --expose: EXTERNAL:INTERNAL, both
	// u16 (lib/proxy/exposed_port.rs); Tart checks nothing.
	badExpose := func(v, why string) string {
		return "error: invalid value '" + v + "' for '--expose <comma-separated port specifications>': " + why + "\n\nFor more information, try '--help'.\n" + runtimeFailed
	}
	for _, c := range []struct{ list, bad, why string }{
		{"2222", "2222", `invalid exposed port specification "2222", the format should be EXTERNAL:INTERNAL`},
		{"2222:22:1", "2222:22:1", `invalid exposed port specification "2222:22:1", the format should be EXTERNAL:INTERNAL`},
		{"2222:22,", "", `invalid exposed port specification "", the format should be EXTERNAL:INTERNAL`},
		{"", "", `invalid exposed port specification "", the format should be EXTERNAL:INTERNAL`},
		{"ssh:22", "ssh:22", `invalid external port "ssh"`},
		{"8080:80,65536:22", "65536:22", `invalid external port "65536"`},
		{"2222:-22", "2222:-22", `invalid internal port "-22"`},
		{"2222:", "2222:", `invalid internal port ""`},
	} {
		f.fails(1, badExpose(c.bad, c.why), "run", "--no-graphics", "--net-softnet-expose", c.list, "vm")
	}
	// softnet parses --allow, --block and --expose in that order.
	f.fails(1, badValue("block", "x"), "run", "--no-graphics", "--net-softnet-expose", "1", "--net-softnet-block", "x", "vm")
	// softnet reads its lists only once the VM starts: a running VM is
	// found first, as Tart finds it.
	running := f.start("--no-graphics", "vm")
	faketarttest.WaitFor(5*time.Second, func() bool { return f.state("vm") == "running" || running.exited() })
	f.fails(2, "VM \"vm\" is already running!\n", "run", "--no-graphics", "--net-softnet-allow", "10.0.0/8", "vm")
	f.ok("stop", "vm")
	running.wait(t, 5*time.Second)
	for _, args := range [][]string{
		{"--net-softnet"},
		{"--net-softnet-allow", "10.0.0.0/8,@host,192.168.1.7/32"},
		{"--net-softnet", "--net-softnet-block", "0.0.0.0/0", "--net-softnet-allow", "@host"},
		{"--net-softnet-expose", "2222:22,+8080:0080,0:65535"},
		{"--net-host"},
	} {
		r := f.start(append(append([]string{"--no-graphics"}, args...), "vm")...)
		faketarttest.WaitFor(5*time.Second, func() bool { return f.state("vm") == "running" || r.exited() })
		if r.exited() {
			t.Fatalf("run %v: %q", args, r.err.String())
		}
		f.ok("stop", "vm")
		r.wait(t, 5*time.Second)
	}
}

func TestParseSoftnetOrder(t *testing.T) {
	t.Parallel()
	allow, block := "10.0.0.0/8,10.1.0.0/16,0.0.0.0/0", "10.1.0.0/16,@host"
	pol, err := parseSoftnet(softnetArgs{allow: &allow, block: &block})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range pol.rules {
		got = append(got, fmt.Sprintf("%s:%v", r.prefix, r.allow))
	}
	// Longest prefix first; block before allow on the same prefix.
	want := "192.168.64.1/32:false 10.1.0.0/16:false 10.1.0.0/16:true 10.0.0.0/8:true 0.0.0.0/0:true"
	if strings.Join(got, " ") != want || pol.isolated {
		t.Fatalf("rules %v isolated %v, want %s and no isolation (0.0.0.0/0 allowed)", got, pol.isolated, want)
	}
}

// probe is a guest's shell line that tries a TCP connection and prints
// name=reached or name=refused. Softnet drops what it refuses, so a
// refused connect ends by the probe's own 3 s timeout.
func probe(name, addr string, port int) string {
	return fmt.Sprintf("if timeout 3 bash -c 'exec 3<>/dev/tcp/%s/%d' 2>/dev/null; then echo %s=reached; else echo %s=refused; fi\n", addr, port, name, name)
}

// hostListener accepts (and closes) TCP connections on all the host's
// addresses until the test ends; it returns the port.
func hostListener(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return l.Addr().(*net.TCPAddr).Port
}

// iptablesRules is the host's filter table.
func iptablesRules(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("iptables", "-w", "-S").CombinedOutput()
	if err != nil {
		t.Fatalf("iptables -S: %v: %s", err, out)
	}
	return string(out)
}

// dummyAddrs gives the host n addresses <net>.<random>.<i> (private
// 10.254 ones no softnet guest is allowed by default, or globally routable
// ones), on one end of a veth pair (the dummy driver may be missing),
// removed at cleanup.
func dummyAddrs(t *testing.T, net string, n int) []string {
	t.Helper()
	b := make([]byte, 2)
	rand.Read(b) //nolint:errcheck
	name := fmt.Sprintf("fa-snt%02x%02x", b[0], b[1])
	if out, err := exec.Command("ip", "link", "add", name, "type", "veth", "peer", "name", name+"p").CombinedOutput(); err != nil {
		t.Fatalf("ip link add %s: %v: %s", name, err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", name).Run() })
	var addrs []string
	for i := 1; i <= n; i++ {
		a := fmt.Sprintf("%s.%d.%d", net, b[0], i)
		if out, err := exec.Command("ip", "addr", "add", a+"/32", "dev", name).CombinedOutput(); err != nil {
			t.Fatalf("ip addr add %s: %v: %s", a, err, out)
		}
		addrs = append(addrs, a)
	}
	for _, dev := range []string{name, name + "p"} {
		if out, err := exec.Command("ip", "link", "set", dev, "up").CombinedOutput(); err != nil {
			t.Fatalf("ip link set %s up: %v: %s", dev, err, out)
		}
	}
	return addrs
}

// TestSoftnetIsolation is Softnet black-box with FAKETART_NET=vmnet: a
// softnet guest reaches the host at the gateway and a private address it
// is allowed, but not another private address of the host nor a listener
// in another softnet guest, which the host itself reaches. Stopping the
// VMs leaves no rule behind.
func TestSoftnetIsolation(t *testing.T) {
	if !faketarttest.VMNet(t) {
		t.Skip("no vmnet emulation here (reason logged above)")
	}
	port := hostListener(t)
	addrs := dummyAddrs(t, "10.254", 2)
	blocked, allowed := addrs[0], addrs[1]

	f := softnetOnPath(t, newFixture(t, "FAKETART_NET=vmnet"))
	const guestPort = 18080
	// Guest B listens (bash cannot: the test binary serves, see TestMain).
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	faketarttest.Template(t, f.home, "listener", []string{self, listenHelperArg, fmt.Sprint(guestPort)}, nil)
	f.ok("clone", "listener", "sn-b")
	runB := f.start("--no-graphics", "--net-softnet", "sn-b")
	var ipB string
	faketarttest.WaitFor(10*time.Second, func() bool {
		r := f.tart("ip", "sn-b")
		ipB = strings.TrimSpace(r.Stdout)
		return r.Code == 0
	})
	if ipB == "" {
		t.Fatalf("guest B has no address: %q", runB.err.String())
	}
	if !faketarttest.WaitFor(10*time.Second, func() bool {
		c, err := net.DialTimeout("tcp", net.JoinHostPort(ipB, fmt.Sprint(guestPort)), time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	}) {
		t.Fatalf("the host cannot reach guest B's listener at %s:%d", ipB, guestPort)
	}

	script := probe("gateway", "192.168.64.1", port) + probe("allowed", allowed, port) + probe("blocked", blocked, port) +
		probe("guest", ipB, guestPort) + `echo done > "$TART_FAKE_GUEST_ROOT/done"; sleep 60`
	faketarttest.Template(t, f.home, "prober", []string{"/bin/sh", "-c", script}, nil)
	f.ok("clone", "prober", "sn-a")
	runA := f.start("--no-graphics", "--net-softnet-allow", allowed+"/32", "sn-a")
	waitFile(t, f.vmPath("sn-a", ".faketart", "guest", "done"), 20*time.Second)
	ipA := strings.TrimSpace(f.ok("ip", "sn-a"))
	log, _ := os.ReadFile(f.vmPath("sn-a", ".faketart", "guest.log"))
	for _, want := range []string{"gateway=reached\n", "allowed=reached\n", "blocked=refused\n", "guest=refused\n"} {
		if !strings.Contains(string(log), want) {
			t.Errorf("guest A's probes lack %q:\n%s", want, log)
		}
	}
	if rules := iptablesRules(t); !strings.Contains(rules, "-s "+ipA+"/32 -j FA-SN-") {
		t.Fatalf("no Softnet rules for %s while it runs:\n%s", ipA, rules)
	}

	f.ok("stop", "sn-a")
	f.ok("stop", "sn-b")
	runA.wait(t, 10*time.Second)
	runB.wait(t, 10*time.Second)
	rules := iptablesRules(t)
	for _, ip := range []string{ipA, ipB} {
		n := strings.TrimPrefix(ip, "192.168.64.")
		if strings.Contains(rules, "-s "+ip+"/32 -j FA-SN-") || strings.Contains(rules, "-N FA-SN-"+n+"\n") {
			t.Errorf("rules of %s outlived its VM:\n%s", ip, rules)
		}
	}
}

// TestNetHostIsolation: --net-host is Softnet on a vmnet host-mode
// interface (Run.swift passes --vm-net-type host): the guest reaches the
// host at the gateway and nothing beyond, not even the globally routable
// addresses a --net-softnet guest reaches.
func TestNetHostIsolation(t *testing.T) {
	if !faketarttest.VMNet(t) {
		t.Skip("no vmnet emulation here (reason logged above)")
	}
	port := hostListener(t)
	// 100.63/16 is globally routable (is_global), just below CGNAT's 100.64/10.
	global := dummyAddrs(t, "100.63", 1)[0]
	f := softnetOnPath(t, newFixture(t, "FAKETART_NET=vmnet"))
	script := probe("gateway", vmnetGateway, port) + probe("global", global, port) + `echo done > "$TART_FAKE_GUEST_ROOT/done"; sleep 60`
	faketarttest.Template(t, f.home, "prober", []string{"/bin/sh", "-c", script}, nil)
	want := map[string][]string{
		"--net-softnet": {"gateway=reached\n", "global=reached\n"},
		"--net-host":    {"gateway=reached\n", "global=refused\n"},
	}
	for _, mode := range []string{"--net-softnet", "--net-host"} {
		vm := "nh" + strings.TrimPrefix(mode, "--net-")
		f.ok("clone", "prober", vm)
		run := f.start("--no-graphics", mode, vm)
		waitFile(t, f.vmPath(vm, ".faketart", "guest", "done"), 20*time.Second)
		log, _ := os.ReadFile(f.vmPath(vm, ".faketart", "guest.log"))
		for _, w := range want[mode] {
			if !strings.Contains(string(log), w) {
				t.Errorf("%s guest's probes lack %q:\n%s", mode, w, log)
			}
		}
		f.ok("stop", vm)
		run.wait(t, 10*time.Second)
	}
}

// TestSoftnetWithoutRoot: when tart runs as an ordinary user
// (FAKETART_SOFTNET_NO_ROOT=1) and softnet is neither setuid root nor
// allowed by sudo without a password, softnet exits with its error and
// Tart stops the VM with RuntimeFailed, exit 1 (Softnet.stop in
// Sources/tart/Network/Softnet.swift; softnet's src/main.rs). Tart's own
// fix, chown root and chmod u+s, lets the VM run.
func TestSoftnetWithoutRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a softnet owned by root needs a test running as root")
	}
	f := newFixture(t, "FAKETART_SOFTNET_NO_ROOT=1")
	faketarttest.Template(t, f.home, "vm", []string{"/bin/sh", "-c", "sleep 60"}, nil)
	softnet := faketarttest.Softnet(t)
	// No passwordless sudo: a sudo that refuses, as `sudo -n` does when it
	// would need a password.
	sudoDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(sudoDir, "sudo"), []byte("#!/bin/sh\necho 'sudo: a password is required' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	f = f.with("PATH=" + filepath.Dir(softnet) + ":" + sudoDir + ":" + os.Getenv("PATH"))
	if err := os.Chmod(softnet, 0o755); err != nil { // a fresh brew install
		t.Fatal(err)
	}
	const want = "root privileges are required to run and passwordless sudo was not available\n" +
		`RuntimeFailed(why: "Softnet process terminated prematurely")` + "\n"
	for _, mode := range []string{"--net-softnet", "--net-host"} {
		// Started, not run to the end: on a fake without the check the VM
		// would run on, and the wait fails the test.
		r := f.start("--no-graphics", mode, "vm")
		if code := r.wait(t, 10*time.Second); code != 1 || r.err.String() != want {
			t.Fatalf("run %s without root: exit %d stderr %q; want 1 and %q", mode, code, r.err.String(), want)
		}
	}
	// softnet parses its arguments before it asks for root.
	r := f.tart("run", "--no-graphics", "--net-softnet-allow", "x", "vm")
	if r.Code != 1 || !strings.HasPrefix(r.Stderr, "error: invalid value 'x' for '--allow") {
		t.Fatalf("a bad list without root: exit %d stderr %q; want softnet's argument error", r.Code, r.Stderr)
	}
	// Tart's shared network needs no softnet.
	run := f.start("--no-graphics", "vm")
	faketarttest.WaitFor(5*time.Second, func() bool { return f.state("vm") == "running" || run.exited() })
	if run.exited() {
		t.Fatalf("shared network: %q", run.err.String())
	}
	f.ok("stop", "vm")
	run.wait(t, 5*time.Second)
	// The fix Tart runs through sudo when it has a terminal.
	if err := os.Chmod(softnet, 0o755|os.ModeSetuid); err != nil {
		t.Fatal(err)
	}
	run = f.start("--no-graphics", "--net-softnet", "vm")
	faketarttest.WaitFor(5*time.Second, func() bool { return f.state("vm") == "running" || run.exited() })
	if run.exited() {
		t.Fatalf("setuid root softnet: %q", run.err.String())
	}
	f.ok("stop", "vm")
	run.wait(t, 5*time.Second)
}
