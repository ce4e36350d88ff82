//go:build linux

package main

import (
	"bufio"
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

// With FAKETART_NET=vmnet, a softnet guest's packets go through a chain of
// the host's filter table, FA-SN-<n> for the lease 192.168.64.<n>, jumped
// to from INPUT (to the host) and FORWARD (beyond it) for its source
// address, in softnet's order (see softnet.go). What softnet refuses it
// drops, and so does the chain: a refused connect waits for its own
// timeout, as on a Mac, rather than failing at once. Bridged traffic
// between guests never reaches iptables: the guest's bridge port is
// isolated instead, as vmnet isolates its bridge. The host-side rules hold
// even against a guest's root, which owns only its namespace; they do not
// emulate softnet's MAC and source-address pinning.

func softnetChain(n int) string { return "FA-SN-" + strconv.Itoa(n) }

func iptables(args ...string) error {
	bin, err := exec.LookPath("iptables")
	if err != nil {
		return fmt.Errorf("faketart: Softnet's emulation needs iptables (apt-get install iptables): %v", err)
	}
	out, err := exec.Command(bin, append([]string{"-w"}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("iptables %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// removeSoftnet removes lease n's chain and the jumps to it, whatever a
// killed run left behind. The lease is this run's, so are they.
func removeSoftnet(n int) {
	chain, src := softnetChain(n), vmnetNet+strconv.Itoa(n)+"/32"
	for _, parent := range []string{"INPUT", "FORWARD"} {
		for iptables("-D", parent, "-s", src, "-j", chain) == nil {
		}
	}
	_ = iptables("-F", chain)
	_ = iptables("-X", chain)
}

// applySoftnet installs pol for lease l.
func applySoftnet(l *vmnetLease, pol *softnetPolicy) error {
	chain, src := softnetChain(l.n), l.addr()+"/32"
	if err := iptables("-N", chain); err != nil {
		return err
	}
	var rules [][]string
	if pol.hostOnly {
		// vmnet host mode: the host and nothing beyond it.
		rules = append(rules, []string{"-d", vmnetGateway + "/32", "-j", "RETURN"}, []string{"-j", "DROP"})
	}
	for _, r := range pol.rules {
		target := "DROP"
		if r.allow {
			target = "RETURN"
		}
		rules = append(rules, []string{"-d", r.prefix.String(), "-j", target})
	}
	rules = append(rules, []string{"-d", vmnetGateway + "/32", "-j", "RETURN"})
	for _, ns := range nameservers() {
		rules = append(rules, []string{"-p", "udp", "--dport", "53", "-d", ns + "/32", "-j", "RETURN"})
	}
	for _, p := range nonGlobal {
		rules = append(rules, []string{"-d", p, "-j", "DROP"})
	}
	for _, r := range rules {
		if err := iptables(append([]string{"-A", chain}, r...)...); err != nil {
			removeSoftnet(l.n)
			return err
		}
	}
	for _, parent := range []string{"INPUT", "FORWARD"} {
		if err := iptables("-I", parent, "1", "-s", src, "-j", chain); err != nil {
			removeSoftnet(l.n)
			return err
		}
	}
	l.isolated = pol.isolated
	return nil
}

// nameservers are the IPv4 DNS servers the guest uses: the host's, as the
// guest shares its /etc/resolv.conf (on a Mac, those of the DHCP lease).
func nameservers() []string {
	f, err := os.Open("/etc/resolv.conf")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "nameserver" {
			if a, err := netip.ParseAddr(fields[1]); err == nil && a.Is4() {
				out = append(out, a.String())
			}
		}
	}
	return out
}
