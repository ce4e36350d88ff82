package webhooks

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"time"
)

// sharedAddressSpace is RFC 6598's carrier-grade NAT range: not public,
// yet not covered by netip's IsPrivate.
var sharedAddressSpace = netip.MustParsePrefix("100.64.0.0/10")

// ParseAllow parses a comma-separated list of CIDR prefixes or addresses
// (an address allows itself): the non-public webhook targets an admin allows.
func ParseAllow(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		if a, err := netip.ParseAddr(f); err == nil {
			out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			return nil, fmt.Errorf("%q is neither an address nor a CIDR prefix such as 10.0.0.0/8", f)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// publicOnly refuses addresses that are not on the public internet
// (loopback, private, link-local — the cloud metadata service lives
// there —, shared, unspecified, multicast) unless allow holds them. It runs
// at connect time on the address actually dialled, so a name that
// resolves (or is re-bound) to an inside address is caught too.
func publicOnly(allow []netip.Prefix) func(network, address string, _ syscall.RawConn) error {
	return func(network, address string, _ syscall.RawConn) error {
		host, _, err := net.SplitHostPort(address)
		if err != nil {
			return err
		}
		ip, err := netip.ParseAddr(host)
		if err != nil {
			return err
		}
		ip = ip.Unmap()
		for _, p := range allow {
			if p.Contains(ip) {
				return nil
			}
		}
		if ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
			ip.IsUnspecified() || ip.IsMulticast() || ip.IsInterfaceLocalMulticast() || sharedAddressSpace.Contains(ip) {
			return fmt.Errorf("webhook target %s is not a public address: allow it with --webhook-allow %s (FREEAGENT_WEBHOOK_ALLOW)", ip, ip)
		}
		return nil
	}
}

// dialer connects only where publicOnly allows.
func dialer(allow []netip.Prefix, timeout time.Duration) *net.Dialer {
	return &net.Dialer{Timeout: timeout, Control: publicOnly(allow)}
}
