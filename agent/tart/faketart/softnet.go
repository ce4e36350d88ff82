package main

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"
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
// once the softnet child is gone (Softnet.stop: RuntimeFailed).
func softnetFailed(opt, value, why string) *exitError {
	return &exitError{code: 1, msg: fmt.Sprintf("error: invalid value '%s' for '--%s <comma-separated CIDRs or @-alias>': %s\n\nFor more information, try '--help'.\n", value, opt, why) +
		`Error: RuntimeFailed(why: "Softnet process terminated prematurely")`}
}

// parseSoftnet reads the allow and block lists as softnet does.
func parseSoftnet(allow, block string) (*softnetPolicy, error) {
	pol := &softnetPolicy{isolated: true}
	for _, l := range []struct {
		opt, val string
		allow    bool
	}{{"allow", allow, true}, {"block", block, false}} {
		if l.val == "" {
			continue
		}
		for _, v := range strings.Split(l.val, ",") {
			var p netip.Prefix
			if v == "@host" {
				p = netip.PrefixFrom(netip.MustParseAddr(vmnetGateway), 32)
			} else {
				var err error
				p, err = netip.ParsePrefix(v)
				if err != nil || !p.Addr().Is4() {
					return nil, softnetFailed(l.opt, v, "invalid IP address syntax")
				}
				p = p.Masked()
			}
			if l.allow && p.Bits() == 0 {
				pol.isolated = false
			}
			pol.rules = append(pol.rules, softnetRule{prefix: p, allow: l.allow})
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
