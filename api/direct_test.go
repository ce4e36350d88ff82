package api

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestUploadSums: the part sums a client declares are the SHA-256s of the
// byte ranges the controller's plan signs, whether the size was known
// before hashing, not known (hashed in 16 MiB parts), or given wrong (read
// again); a file sent in one PUT declares none.
func TestUploadSums(t *testing.T) {
	if got := []int{Parts(0), Parts(MultipartThreshold), Parts(MultipartThreshold + 1), Parts(4 << 30), Parts(4<<30 + 1)}; !slices.Equal(got, []int{0, 0, 5, 256, 241}) {
		t.Fatalf("plans: %v", got)
	}
	if PartSize(4<<30) != 16<<20 || PartSize(4<<30+1) != 17<<20 {
		t.Fatalf("part sizes past 4 GiB: %d %d", PartSize(4<<30), PartSize(4<<30+1))
	}
	data := make([]byte, 5*minPartSize)
	r := rand.NewChaCha8([32]byte{'p'})
	r.Read(data) //nolint:errcheck // ChaCha8 never fails
	want := func(n int) []string {
		var sums []string
		ps := int(PartSize(int64(n)))
		for off := 0; off < n && Parts(int64(n)) > 0; off += ps {
			s := sha256.Sum256(data[off:min(off+ps, n)])
			sums = append(sums, hex.EncodeToString(s[:]))
		}
		return sums
	}
	for _, n := range []int{1 << 20, MultipartThreshold, MultipartThreshold + 1, 5 * minPartSize} {
		whole := sha256.Sum256(data[:n])
		for _, hint := range []int64{int64(n), -1, 5 << 30} {
			u := NewUploadSums(hint)
			// Writes of odd sizes, across part boundaries.
			for off := 0; off < n; off += 3<<20 + 7 {
				u.Write(data[off:min(off+3<<20+7, n)])
			}
			req, err := u.Declare("f", bytes.NewReader(data[:n]))
			if err != nil || req.Size != int64(n) || req.SHA256 != hex.EncodeToString(whole[:]) || !slices.Equal(req.PartSHA256, want(n)) {
				t.Fatalf("%d bytes, size given %d: %d bytes, %d part sums (want %d), %v", n, hint, req.Size, len(req.PartSHA256), len(want(n)), err)
			}
		}
	}
	u := NewUploadSums(5 << 30)
	u.Write(data)
	if _, err := u.Declare("f", nil); err == nil {
		t.Fatal("parts hashed at another plan's size, and nothing to read again: declared")
	}
}
