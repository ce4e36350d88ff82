package credentials

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzValidateKeystore feeds arbitrary bytes (seeded with keytool's JKS and
// PKCS12 keystores and mangled copies) to ValidateKeystore: it never
// panics and fails only with a *KeystoreError. `go test` runs the seeds:
//
//	go test -run XXX -fuzz FuzzValidateKeystore -fuzztime 30s ./cli/credentials/
func FuzzValidateKeystore(f *testing.F) {
	dir := f.TempDir()
	for _, typ := range []string{TypeJKS, TypePKCS12} {
		file := filepath.Join(dir, "k."+typ)
		keytool(f, "-genkeypair", "-keystore", file, "-storetype", typ, "-storepass", "fuzz-pass", "-keypass", "fuzz-pass",
			"-alias", "k", "-keyalg", "EC", "-dname", "CN=fuzz")
		raw, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
		f.Add(raw[:len(raw)-1])
		flipped := append([]byte(nil), raw...)
		flipped[len(flipped)/2] ^= 0xff
		f.Add(flipped)
	}
	huge := binary.BigEndian.AppendUint32(nil, jksMagic)
	huge = binary.BigEndian.AppendUint32(huge, 2)
	huge = binary.BigEndian.AppendUint32(huge, 0xffffffff) // entry count
	huge = binary.BigEndian.AppendUint32(huge, 1)
	f.Add(huge)
	f.Add([]byte{0x30, 0x82, 0xff, 0xff})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, raw []byte) {
		_, err := ValidateKeystore(raw, "fuzz-pass", "k", "")
		var ke *KeystoreError
		if err != nil && !errors.As(err, &ke) {
			t.Fatalf("error of type %T: %v", err, err)
		}
	})
}

// FuzzValidateIOS feeds arbitrary .p12 bytes (seeded with go-pkcs12's and
// openssl's encodings and mangled copies) with a valid profile to
// ValidateIOS: it never panics, and accepts only the real certificate.
//
//	go test -run XXX -fuzz FuzzValidateIOS -fuzztime 30s ./cli/credentials/
func FuzzValidateIOS(f *testing.F) {
	m := material(f)
	prof := m.profile(f, profileSpec{name: "fuzz"})
	for _, raw := range m.p12s {
		f.Add(raw)
		f.Add(raw[:len(raw)-1])
		flipped := append([]byte(nil), raw...)
		flipped[len(flipped)/2] ^= 0xff
		f.Add(flipped)
	}
	f.Add(m.certOnly)
	f.Add(m.mismatched)
	f.Add([]byte{0x30, 0x80, 0, 0})
	f.Fuzz(func(t *testing.T, p12 []byte) {
		s, err := ValidateIOS(prof, p12, p12Pass, appTarget, "store", "", now)
		if err == nil && s.Targets[0].CertificateSHA1 != m.sha1 {
			t.Fatalf("accepted a certificate the profile does not hold: %+v", s)
		}
	})
}
