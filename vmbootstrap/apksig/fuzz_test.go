package apksig

import (
	"bytes"
	"errors"
	"os"
	"testing"
)

// smallArtifacts makes the fuzz seeds small: the fuzzer mutates every byte.
// Only FuzzRead sets it, before any other test of the binary runs
// artifacts in parallel (none does).
var smallArtifacts bool

// FuzzRead feeds arbitrary bytes (seeded with APKs signed by apksigner
// under each scheme, a jarsigner-signed AAB, an unsigned zip and junk) to
// Read: it never panics, and its errors are errors, not crashes or
// unbounded allocations. `go test` runs the seeds:
//
//	go test -run XXX -fuzz FuzzRead -fuzztime 30s ./vmbootstrap/apksig/
func FuzzRead(f *testing.F) {
	smallArtifacts = true
	defer func() { smallArtifacts = false }()
	dir := f.TempDir()
	k := newKey(f, dir, "fuzz", "EC", 256, "CN=Fuzz")
	for _, file := range []string{
		signAPK(f, dir, "v1v2v3", true, true, true, k),
		signAPK(f, dir, "v2", false, true, false, k),
		signAPK(f, dir, "v1", true, false, false, k),
		signAAB(f, dir, "bundle", k),
	} {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		if _, err := Read(bytes.NewReader(b), int64(len(b))); err != nil {
			f.Fatalf("seed %s: %v", file, err)
		}
		f.Add(b)
	}
	unsigned := dir + "/unsigned.zip"
	unsignedZip(f, unsigned)
	b, _ := os.ReadFile(unsigned)
	f.Add(b)
	f.Add([]byte("PK\x05\x06" + string(make([]byte, 18))))
	f.Add([]byte("not a zip"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := Read(bytes.NewReader(b), int64(len(b)))
		if err == nil && len(s.Signers) == 0 {
			t.Fatal("success without a signer")
		}
		if errors.Is(err, ErrNotSigned) && len(s.Signers) > 0 {
			t.Fatal("signers and ErrNotSigned")
		}
	})
}
