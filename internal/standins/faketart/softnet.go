package main

import (
	"cmp"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// Softnet (github.com/cirruslabs/softnet, lib/proxy) as `tart run
// --net-softnet` starts it: Tart passes --net-softnet-allow/-block on as
// softnet's --allow/--block and validates nothing in them; softnet parses
// each comma-separated element as an IPv4 CIDR (ipnet's Ipv4Net) or the
// alias @host (the vmnet gateway) and exits at once on anything else, and
// Tart then fails the run. A guest's packets pass when
//
//  1. the longest --allow/--block prefix matching the destination says
//     allow (block wins over allow for the same prefix), else
//  2. the destination is globally routable, else
//  3. it is the vmnet gateway (the host), else
//  4. it is a DNS request to a DNS server of the guest's DHCP lease;
//
// everything else is dropped: private, link-local, CGNAT and other special
// ranges (the LAN, other VMs), and anything not IPv4. vmnet's bridge
// isolation (VMs cannot reach each other at layer 2) is on unless
// --allow holds 0.0.0.0/0.
type softnetPolicy struct {
	rules    []softnetRule // longest prefix first, block before allow at equal length
	isolated bool
	// hostOnly is --net-host (softnet's --vm-net-type host, a vmnet
	// host-mode interface): vmnet gives no route beyond the host, so of
	// what softnet lets through only the gateway is reachable.
	hostOnly bool
}

type softnetRule struct {
	prefix netip.Prefix
	allow  bool
}

// nonGlobal are the IPv4 ranges Rust's ip_network IpNetwork::is_global
// (what softnet asks) is false for.
var nonGlobal = []string{
	"0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
	"192.0.0.0/24", "192.0.2.0/24", "192.168.0.0/16", "198.18.0.0/15", "198.51.100.0/24",
	"203.0.113.0/24", "224.0.0.0/4", "240.0.0.0/4",
}

// softnetFailed is how the run ends when softnet refuses its arguments:
// clap's error on softnet's stderr (which Tart shares), then Tart's error
// once the softnet child is gone (Softnet.stop throws RuntimeFailed inside
// Run's VM task, whose catch prints "\(error)" with no "Error: " prefix
// and exits 1: Sources/tart/Commands/Run.swift, VM.swift's run()).
func softnetFailed(opt, valueName, value, why string) *exitError {
	return &exitError{code: 1, msg: fmt.Sprintf("error: invalid value '%s' for '--%s <%s>': %s\n\nFor more information, try '--help'.\n", value, opt, valueName, why) +
		`RuntimeFailed(why: "Softnet process terminated prematurely")`}
}

// softnetArgs are the run flags Tart hands to softnet: the lists as given
// (nil when the flag is absent; Tart passes even an empty value on) and
// --net-host, which Tart turns into softnet's --vm-net-type host.
type softnetArgs struct {
	allow, block, expose *string
	host                 bool
}

// parseSoftnet reads the lists as softnet's clap parser does: in the order
// Tart passes them (--allow, --block, --expose), each split at every comma
// (an empty value or element is an element too), the first bad element
// ending softnet.
func parseSoftnet(a softnetArgs) (*softnetPolicy, error) {
	pol := &softnetPolicy{isolated: true, hostOnly: a.host}
	for _, l := range []struct {
		opt   string
		val   *string
		allow bool
	}{{"allow", a.allow, true}, {"block", a.block, false}} {
		if l.val == nil {
			continue
		}
		for _, v := range strings.Split(*l.val, ",") {
			var p netip.Prefix
			if v == "@host" {
				p = netip.PrefixFrom(netip.MustParseAddr(vmnetGateway), 32)
			} else {
				var err error
				p, err = netip.ParsePrefix(v)
				if err != nil || !p.Addr().Is4() {
					return nil, softnetFailed(l.opt, "comma-separated CIDRs or @-alias", v, "invalid IP address syntax")
				}
				p = p.Masked()
			}
			if l.allow && p.Bits() == 0 {
				pol.isolated = false
			}
			pol.rules = append(pol.rules, softnetRule{prefix: p, allow: l.allow})
		}
	}
	if a.expose != nil {
		for _, v := range strings.Split(*a.expose, ",") {
			if why := checkExposedPort(v); why != "" {
				return nil, softnetFailed("expose", "comma-separated port specifications", v, why)
			}
		}
	}
	slices.SortStableFunc(pol.rules, func(a, b softnetRule) int {
		if c := cmp.Compare(b.prefix.Bits(), a.prefix.Bits()); c != 0 {
			return c
		}
		if a.allow == b.allow {
			return 0
		}
		if !a.allow {
			return -1
		}
		return 1
	})
	return pol, nil
}

// checkExposedPort is softnet's ExposedPort::from_str (lib/proxy/
// exposed_port.rs): EXTERNAL:INTERNAL, both u16. It returns what clap
// shows after the value (the outermost anyhow context), or "".
func checkExposedPort(s string) string {
	parts := strings.Split(s, ":")
	if len(parts) != 2 {
		return fmt.Sprintf("invalid exposed port specification %s, the format should be EXTERNAL:INTERNAL", rustQuote(s))
	}
	if !rustU16(parts[0]) {
		return "invalid external port " + rustQuote(parts[0])
	}
	if !rustU16(parts[1]) {
		return "invalid internal port " + rustQuote(parts[1])
	}
	return ""
}

// rustU16 reports whether Rust's u16::from_str accepts s: an optional '+',
// then one or more ASCII digits, at most 65535.
func rustU16(s string) bool {
	s = strings.TrimPrefix(s, "+")
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return false
	}
	_, err := strconv.ParseUint(s, 10, 16)
	return err == nil
}

// rustQuote is Rust's {:?} of a str for the printable ASCII that port
// specifications hold: double quotes, with '"' and '\\' escaped.
func rustQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u{%x}`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// softnetBecomesRoot is softnet's start (src/main.rs, try_main) after its
// arguments parsed: it needs root, so an unprivileged softnet re-executes
// itself through `sudo -n` if a probe that way succeeds, and otherwise
// exits. The fake runs as root in tests, so FAKETART_SOFTNET_NO_ROOT=1
// stands for "tart runs as an ordinary user": then softnet is root only
// when its binary (symlinks resolved) is owned by root with the setuid
// bit, or `sudo -n <softnet> --sudo-escalation-probing` exits 0.
func softnetBecomesRoot() *exitError {
	if os.Getenv("FAKETART_SOFTNET_NO_ROOT") != "1" {
		return nil
	}
	bin, err := exec.LookPath("softnet")
	if err != nil {
		return genericErr(`InitializationFailed(why: "softnet not found in PATH")`)
	}
	if real, err := filepath.EvalSymlinks(bin); err == nil {
		bin = real
	}
	if st, err := os.Stat(bin); err == nil {
		if sys, ok := st.Sys().(*syscall.Stat_t); ok && sys.Uid == 0 && st.Mode()&os.ModeSetuid != 0 {
			return nil
		}
	}
	if exec.Command("sudo", "-n", bin, "--sudo-escalation-probing").Run() == nil {
		return nil
	}
	// softnet's anyhow error on the stderr it shares with Tart, then Tart's
	// RuntimeFailed once the child is gone (as in softnetFailed).
	return &exitError{code: 1, msg: "root privileges are required to run and passwordless sudo was not available\n" +
		`RuntimeFailed(why: "Softnet process terminated prematurely")`}
}
