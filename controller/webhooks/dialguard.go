package webhooks

import (
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"time"
)

// sharedAddressSpace is RFC 6598's carrier-grade NAT range: not public,
// yet not covered by netip's IsPrivate.
var sharedAddressSpace = netip.MustParsePrefix("100.64.0.0/10")

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
