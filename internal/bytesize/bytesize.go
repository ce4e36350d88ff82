// Package bytesize writes byte counts for people to read.
package bytesize

import "strconv"

// IEC formats n in binary units as the controller shows sizes (logs,
// messages, the dashboard): 512 B, 1.5 KiB, 2.0 GiB.
func IEC(n int64) string { return format(n, 1024, "KMGTPE", "iB") }

// SI formats n in powers of 1000 as download tools and EAS show sizes:
// 512 B, 12.3 kB, 4.5 MB, 1.2 GB.
func SI(n int64) string { return format(n, 1000, "kMGTPE", "B") }

func format(n, unit int64, prefixes, suffix string) string {
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	div, exp := unit, 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return strconv.FormatFloat(float64(n)/float64(div), 'f', 1, 64) + " " + prefixes[exp:exp+1] + suffix
}
