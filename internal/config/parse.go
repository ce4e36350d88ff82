package config

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// DurationSyntax is what a duration setting accepts, for help and errors.
const DurationSyntax = "a duration such as 90s, 2h or 1h30m, a number of seconds such as 7200, or whole days such as 30d"

// SizeSyntax is what a size setting accepts, for help and errors.
const SizeSyntax = "a size in bytes such as 1048576, or with a unit: 64KiB, 2MiB, 10GiB, 1TiB (powers of 1024) or 500MB, 5GB (powers of 1000)"

// ParseDuration reads a duration the way every Free Agent binary does: a Go
// duration ("90s", "2h", "1h30m"), a bare number of seconds ("7200", the
// spelling of timeouts in shell scripts and CI settings), or whole days
// ("30d", the natural unit of retention). Surrounding spaces are ignored.
// Negative durations are refused; whether 0 is allowed is the setting's
// decision (see Set).
func ParseDuration(s string) (time.Duration, error) {
	d, err := parseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q: %w", s, err)
	}
	return d, nil
}

func parseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return scale(n, time.Second)
	}
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseInt(days, 10, 64)
		if err != nil {
			return 0, errors.New("want " + DurationSyntax)
		}
		return scale(n, 24*time.Hour)
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, errors.New("want " + DurationSyntax)
	}
	if d < 0 {
		return 0, errors.New("negative; want " + DurationSyntax)
	}
	return d, nil
}

func scale(n int64, unit time.Duration) (time.Duration, error) {
	if n < 0 {
		return 0, errors.New("negative; want " + DurationSyntax)
	}
	if n > math.MaxInt64/int64(unit) {
		return 0, errors.New("too long; want " + DurationSyntax)
	}
	return time.Duration(n) * unit, nil
}

// FormatDuration writes d so that ParseDuration reads it back, the short
// way a person would: "2h", "1h30m", "45s", "30d", "0".
func FormatDuration(d time.Duration) string {
	const day = 24 * time.Hour
	switch {
	case d == 0:
		return "0"
	case d%day == 0:
		return strconv.FormatInt(int64(d/day), 10) + "d"
	}
	s := d.String()
	if d%time.Minute == 0 {
		s = strings.TrimSuffix(s, "0s")
	}
	if d%time.Hour == 0 {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// sizeUnits are the size suffixes, longest first so "KiB" is not read as
// "B". Binary units (KiB, and the single letters K, M, G, T of older
// settings) are powers of 1024; SI units (kB, MB, GB, TB) powers of 1000.
// Units are case-insensitive.
var sizeUnits = []struct {
	suffix string
	mult   int64
}{
	{"KIB", 1 << 10}, {"MIB", 1 << 20}, {"GIB", 1 << 30}, {"TIB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
	{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40},
	{"B", 1},
}

// ParseSize reads a size in bytes the way every Free Agent binary does: a
// number of bytes ("1048576"), or a number with a unit ("64KiB", "2MiB",
// "10GiB", "500MB", "5GB"; "1.5GiB" too). KiB, MiB, GiB, TiB and the single
// letters K, M, G, T are powers of 1024; kB, MB, GB, TB powers of 1000, as
// disks and download tools count. A fraction of a byte is dropped.
// Negative sizes are refused; whether 0 is allowed is the setting's
// decision (see Set).
func ParseSize(s string) (int64, error) {
	n, err := parseSize(s)
	if err != nil {
		return 0, fmt.Errorf("%q: %w", s, err)
	}
	return n, nil
}

func parseSize(s string) (int64, error) {
	num := strings.TrimSpace(s)
	mult := int64(1)
	upper := strings.ToUpper(num)
	for _, u := range sizeUnits {
		if strings.HasSuffix(upper, u.suffix) {
			num, mult = strings.TrimSpace(num[:len(num)-len(u.suffix)]), u.mult
			break
		}
	}
	if n, err := strconv.ParseInt(num, 10, 64); err == nil {
		if n < 0 {
			return 0, errors.New("negative; want " + SizeSyntax)
		}
		if n > math.MaxInt64/mult {
			return 0, errors.New("too large; want " + SizeSyntax)
		}
		return n * mult, nil
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || strings.ContainsAny(num, "xXpP_") {
		return 0, errors.New("want " + SizeSyntax)
	}
	if f < 0 {
		return 0, errors.New("negative; want " + SizeSyntax)
	}
	if f*float64(mult) >= math.MaxInt64 {
		return 0, errors.New("too large; want " + SizeSyntax)
	}
	return int64(f * float64(mult)), nil
}

// FormatSize writes n so that ParseSize reads it back exactly: in the
// largest binary unit that divides it ("10GiB", "64KiB"), else in bytes.
func FormatSize(n int64) string {
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n != 0 && n%u.mult == 0 {
			return strconv.FormatInt(n/u.mult, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}

// ParsePrefixes reads a comma-separated list of addresses and CIDR
// prefixes (an address stands for itself): the webhook targets an admin
// allows, the proxies the controller trusts.
func ParsePrefixes(s string) ([]netip.Prefix, error) {
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
