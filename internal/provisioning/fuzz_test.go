package provisioning_test

import (
	"crypto/x509/pkix"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/internal/provisioning"
	"github.com/freeagent-build/freeagent/internal/provisioning/provisioningtest"
)

// FuzzParse feeds arbitrary bytes (seeded with openssl's DER and BER
// profiles, Go-built BER and mangled copies) to Parse: it never panics,
// and what it accepts has the fields it promises. `go test` runs the seeds:
//
//	go test -run XXX -fuzz FuzzParse -fuzztime 30s ./internal/provisioning/
func FuzzParse(f *testing.F) {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	ca := provisioningtest.NewECIdentity(f, pkix.Name{CommonName: "fuzz"}, now, now.AddDate(1, 0, 0), nil)
	plist := provisioningtest.Profile{UUID: "AAAABBBB-0000", TeamID: "T", AppID: "T.*", Created: now, Expires: now.AddDate(1, 0, 0),
		Devices: []string{"d"}, Certificates: [][]byte{ca.DER}}.Plist()
	for _, raw := range [][]byte{
		provisioningtest.SignOpenSSL(f, plist, ca, false),
		provisioningtest.SignOpenSSL(f, plist, ca, true),
		provisioningtest.WrapBER(plist, 64),
	} {
		f.Add(raw)
		f.Add(raw[:len(raw)/2])
		flipped := append([]byte(nil), raw...)
		flipped[len(flipped)/3] ^= 0xff
		f.Add(flipped)
	}
	f.Add([]byte{0x30, 0x80})
	f.Add([]byte{0x30, 0x84, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0x1f, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, raw []byte) {
		p, err := provisioning.Parse(raw)
		if err != nil {
			return
		}
		if p.UUID == "" || p.TeamID == "" || p.AppID == "" || p.Expires.IsZero() || p.Type == "" {
			t.Fatalf("accepted a profile without its fields: %+v", p)
		}
	})
}
