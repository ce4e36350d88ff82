package provisioningtest

import (
	"crypto/rand"
	"crypto/sha1"
	"crypto/x509/pkix"
	"fmt"
	"strings"
	"testing"
	"time"

	pkcs12 "software.sslmate.com/src/go-pkcs12"
)

// Kit is a team's signing material as a developer has it: a distribution
// certificate's .p12 and one provisioning profile per bundle identifier,
// all valid for a year from now.
type Kit struct {
	TeamID   string
	P12      []byte
	Password string
	// CertSHA1 is the certificate's SHA-1, uppercase hex.
	CertSHA1 string
	// Profiles maps a bundle identifier to its .mobileprovision, named
	// "<bundle id> Ad Hoc" (or "App Store") with a UUID derived from it.
	Profiles map[string][]byte
	Identity Identity
}

// NewKit makes a Kit for team with profiles for bundleIDs: ad hoc ones
// (with a device) when adHoc, else App Store ones.
func NewKit(t testing.TB, team, password string, adHoc bool, bundleIDs ...string) Kit {
	t.Helper()
	now := time.Now()
	ca := NewIdentity(t, pkix.Name{CommonName: "Test Apple Worldwide Developer Relations CA"}, now.AddDate(-1, 0, 0), now.AddDate(5, 0, 0), nil)
	id := NewIdentity(t, pkix.Name{CommonName: "Apple Distribution: Example Ltd (" + team + ")", OrganizationalUnit: []string{team}}, now.Add(-time.Hour), now.AddDate(1, 0, 0), &ca)
	p12, err := pkcs12.Modern2023.WithRand(rand.Reader).Encode(id.Key, id.Cert, nil, password)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha1.Sum(id.DER)
	k := Kit{TeamID: team, P12: p12, Password: password, CertSHA1: strings.ToUpper(fmt.Sprintf("%x", sum)), Profiles: map[string][]byte{}, Identity: id}
	for i, bundle := range bundleIDs {
		p := Profile{UUID: fmt.Sprintf("9F2B3C4D-1111-2222-3333-%012d", i+1), Name: bundle + " App Store", TeamID: team, TeamName: "Example Ltd",
			AppID: team + "." + bundle, Created: now.Add(-time.Hour), Expires: now.AddDate(1, 0, 0), Certificates: [][]byte{id.DER}}
		if adHoc {
			p.Name, p.Devices = bundle+" Ad Hoc", []string{"00008101-000A1B2C3D4E5F6A"}
		}
		k.Profiles[bundle] = WrapBER(p.Plist(), 512)
	}
	return k
}
