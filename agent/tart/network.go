package tart

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strings"
)

// The VMs' network. Tart's default, shared (NAT through vmnet), lets a VM
// reach the owner's LAN and, by ARP spoofing, other VMs' traffic. Softnet
// (github.com/cirruslabs/softnet, run by `tart run --net-softnet`) is a
// userspace packet filter between the VM and vmnet: a VM may send only from
// its own MAC and DHCP address, only to globally routable IPv4 addresses,
// the vmnet gateway (the host, 192.168.64.1), the DNS servers its DHCP
// lease names and DHCP broadcasts; everything else (private, link-local
// and CGNAT ranges: the LAN, other VMs; IPv6) is dropped unless
// --net-softnet-allow lets it through (longest prefix wins). vmnet's bridge
// isolation stays on unless 0.0.0.0/0 is allowed. See agent/README.md,
// "VM network".
const (
	NetworkSoftnet = "softnet"
	NetworkShared  = "shared"
)

// ErrSoftnetMissing means the softnet binary was not found.
var ErrSoftnetMissing = errors.New("softnet is not installed (brew install cirruslabs/cli/softnet; `freeagent doctor` says how to give it root), or run VMs on Tart's shared network with --vm-network shared")

// ParseNetwork checks a --vm-network value ("" is softnet).
func ParseNetwork(s string) (string, error) {
	switch strings.TrimSpace(s) {
	case "", NetworkSoftnet:
		return NetworkSoftnet, nil
	case NetworkShared:
		return NetworkShared, nil
	}
	return "", fmt.Errorf("%q is neither %s nor %s", s, NetworkSoftnet, NetworkShared)
}

// ParseAllow reads a comma-separated list of IPv4 CIDRs (a bare address is
// its /32) as Softnet's --allow takes them, normalised ("10.1.2.3/8" is
// 10.0.0.0/8). Softnet filters IPv4 only.
func ParseAllow(s string) ([]string, error) {
	var out []string
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if !strings.Contains(f, "/") {
			f += "/32"
		}
		p, err := netip.ParsePrefix(f)
		if err != nil || !p.Addr().Is4() {
			return nil, fmt.Errorf("%q is not an IPv4 CIDR (e.g. 10.0.0.5/32 or 192.168.1.0/24): Softnet filters IPv4 only", f)
		}
		out = append(out, p.Masked().String())
	}
	return out, nil
}

// ControllerAllow is what a softnet VM needs to reach the controller at
// host (the host of the URL the VM is given): its IPv4 addresses as /32s.
// Global addresses pass Softnet anyway and the vmnet gateway is allowed by
// default; naming them does no harm and keeps the rule explicit. A name is
// resolved now: a controller that moves to another private address needs
// an agent restart.
func ControllerAllow(host string, lookup func(host string) ([]net.IP, error)) ([]string, error) {
	host = strings.Trim(host, "[]")
	var ips []net.IP
	if ip := net.ParseIP(host); ip != nil {
		ips = []net.IP{ip}
	} else {
		var err error
		if ips, err = lookup(host); err != nil {
			return nil, fmt.Errorf("resolve the controller's host %s for the VMs' Softnet allow list: %w", host, err)
		}
	}
	var out []string
	for _, ip := range ips {
		if v4 := ip.To4(); v4 != nil && !v4.IsLoopback() {
			out = append(out, v4.String()+"/32")
		}
	}
	return out, nil
}

// networkArgs are the `tart run` flags of the VMs' network.
func (d *Driver) networkArgs() []string {
	if d.Network == NetworkShared {
		return nil
	}
	args := []string{"--net-softnet"}
	if len(d.SoftnetAllow) > 0 {
		args = append(args, "--net-softnet-allow", strings.Join(d.SoftnetAllow, ","))
	}
	return args
}

// runEnv is the environment of `tart run`: Tart finds softnet on its PATH
// only, which under launchd lacks Homebrew's bin; the directory of the
// softnet the agent found goes first.
func (d *Driver) runEnv() ([]string, error) {
	env := d.env()
	if d.Network == NetworkShared {
		return env, nil
	}
	softnet, err := d.SoftnetPath()
	if err != nil {
		return nil, err
	}
	path := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v // the last one wins, as in exec
		}
	}
	return append(env, "PATH="+filepath.Dir(softnet)+string(filepath.ListSeparator)+path), nil
}

// SoftnetPath is the softnet binary the VMs use: Driver.Softnet, a path or
// a name looked up on PATH.
func (d *Driver) SoftnetPath() (string, error) {
	name := d.Softnet
	if name == "" {
		name = "softnet"
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrSoftnetMissing, err)
	}
	return filepath.Abs(p)
}
