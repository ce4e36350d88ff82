package hostcheck

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/freeagent-build/freeagent/internal/plist"
)

// InternetSharingPlist is where macOS's DHCP server (bootpd), which gives
// Tart's VMs on the shared network (vmnet, 192.168.64.0/24) their
// addresses, reads its lease time.
const InternetSharingPlist = "/Library/Preferences/SystemConfiguration/com.apple.InternetSharing.default.plist"

const (
	// defaultDHCPLease is bootpd's lease when the plist does not set one.
	defaultDHCPLease = 24 * time.Hour
	// maxDHCPLease is the longest lease a busy worker can live with; what
	// Orchard checks too.
	maxDHCPLease = time.Hour
	// vmnetAddresses is what 192.168.64.0/24 can lease: .2 to .254 (.1 is the host).
	vmnetAddresses = 253
	// dhcpLeaseFix sets a 10-minute lease, as Tart's FAQ recommends; it
	// persists across reboots.
	dhcpLeaseFix = "sudo defaults write " + InternetSharingPlist + " bootpd -dict DHCPLeaseTimeSecs -int 600" +
		" (if VMs already get no address, also `sudo rm /var/db/dhcpd_leases`)"
)

// DHCPLease checks the lease time of the DHCP server that Tart's VMs use.
// Each build clones the template with a new MAC address (`tart set
// --random-mac`), so each build holds one lease until it expires: with
// macOS's default of a day the 253 addresses run out after about 250 builds
// in a day, and the next VM boots without an IP address. path is
// InternetSharingPlist on a Mac; tests pass their own.
func DHCPLease(path string) Result {
	r := Result{ID: IDDHCPLease, Fix: dhcpLeaseFix}
	lease, err := dhcpLease(path)
	if err != nil {
		r.Severity, r.Message = Warn, fmt.Sprintf("cannot read the DHCP lease time of Tart's VM network: %v", err)
		return r
	}
	secs := int(lease / time.Second)
	if lease > maxDHCPLease {
		r.Severity = Warn
		r.Message = fmt.Sprintf("DHCP leases for Tart VMs last %d s: each build takes a new address, so %d builds within %s use up 192.168.64.0/24 and the next VM gets no IP address",
			secs, vmnetAddresses, lease)
		return r
	}
	r.Severity, r.Fix = OK, ""
	r.Message = fmt.Sprintf("DHCP leases for Tart VMs last %d s (room for about %d builds a day)", secs, vmnetAddresses*int(24*time.Hour/lease))
	return r
}

// dhcpLease reads bootpd's DHCPLeaseTimeSecs from the Internet Sharing
// plist (XML or binary, as `defaults write` leaves it). A missing file or
// key means macOS's default.
func dhcpLease(path string) (time.Duration, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return defaultDHCPLease, nil
	}
	if err != nil {
		return 0, err
	}
	var doc struct {
		Bootpd map[string]any `plist:"bootpd"`
	}
	if _, err := plist.Unmarshal(b, &doc); err != nil {
		return 0, fmt.Errorf("%s does not parse: %w", path, err)
	}
	v, ok := doc.Bootpd["DHCPLeaseTimeSecs"]
	if !ok {
		return defaultDHCPLease, nil
	}
	var secs int64
	switch n := v.(type) {
	case uint64:
		secs = int64(min(n, 1<<40))
	case int64:
		secs = n
	default:
		// `defaults write … -dict DHCPLeaseTimeSecs 600` without -int stores
		// the string "600", which bootpd does not take as a number.
		return 0, fmt.Errorf("%s has bootpd DHCPLeaseTimeSecs %#v (a %T), not an integer: write it with -int", path, v, v)
	}
	if secs <= 0 {
		return 0, fmt.Errorf("%s has bootpd DHCPLeaseTimeSecs %d, not a positive number of seconds", path, secs)
	}
	return time.Duration(secs) * time.Second, nil
}
