package bytesize

import (
	"math"
	"testing"
)

func TestFormats(t *testing.T) {
	for _, c := range []struct {
		n       int64
		iec, si string
	}{
		{0, "0 B", "0 B"},
		{999, "999 B", "999 B"},
		{1000, "1000 B", "1.0 kB"},
		{1024, "1.0 KiB", "1.0 kB"},
		{1536, "1.5 KiB", "1.5 kB"},
		{2 << 30, "2.0 GiB", "2.1 GB"},
		{2_200_000_000, "2.0 GiB", "2.2 GB"},
		{math.MaxInt64, "8.0 EiB", "9.2 EB"},
	} {
		if got := IEC(c.n); got != c.iec {
			t.Errorf("IEC(%d) = %q, want %q", c.n, got, c.iec)
		}
		if got := SI(c.n); got != c.si {
			t.Errorf("SI(%d) = %q, want %q", c.n, got, c.si)
		}
	}
}
