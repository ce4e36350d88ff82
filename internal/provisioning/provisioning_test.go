package provisioning_test

import (
	"bytes"
	"crypto/x509/pkix"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/internal/provisioning"
	"github.com/freeagent-build/freeagent/internal/provisioning/provisioningtest"
)

var (
	created = time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	expires = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
)

type material struct {
	apple, dist, other provisioningtest.Identity
}

func newMaterial(t testing.TB) material {
	t.Helper()
	apple := provisioningtest.NewECIdentity(t, pkix.Name{CommonName: "Test Apple Root"}, created.AddDate(-1, 0, 0), created.AddDate(10, 0, 0), nil)
	dist := provisioningtest.NewECIdentity(t, pkix.Name{CommonName: "Apple Distribution: Example Ltd (ABCDE12345)"}, created, expires, &apple)
	other := provisioningtest.NewECIdentity(t, pkix.Name{CommonName: "Apple Development: Someone (ZZZZZ99999)"}, created, expires, &apple)
	return material{apple, dist, other}
}

func baseProfile(m material) provisioningtest.Profile {
	return provisioningtest.Profile{
		UUID: "9F2B3C4D-1111-2222-3333-444455556666", Name: "Example App Store <&>", TeamID: "ABCDE12345", TeamName: "Example Ltd",
		AppID: "ABCDE12345.com.example.app", Created: created, Expires: expires,
		Certificates: [][]byte{m.other.DER, m.dist.DER},
	}
}

// Every envelope: openssl's DER, openssl's streamed BER, and Go-built
// BER with small and large segments. openssl's own reading of the
// envelope (cms -verify -noverify) is the oracle for its content.
func TestParseEnvelopes(t *testing.T) {
	m := newMaterial(t)
	content := baseProfile(m).Plist()
	envelopes := map[string][]byte{
		"openssl DER":             provisioningtest.SignOpenSSL(t, content, m.apple, false),
		"openssl streamed BER":    provisioningtest.SignOpenSSL(t, content, m.apple, true),
		"Go BER, 1000-byte parts": provisioningtest.WrapBER(content, 1000),
		"Go BER, 7-byte parts":    provisioningtest.WrapBER(content, 7),
		"Go BER, one part":        provisioningtest.WrapBER(content, len(content)),
	}
	if bytes.Equal(envelopes["openssl DER"], envelopes["openssl streamed BER"]) {
		t.Fatal("openssl -stream wrote the same bytes as without it")
	}
	if !bytes.Contains(envelopes["openssl streamed BER"], []byte{0x24, 0x80}) {
		t.Fatal("openssl -stream wrote no indefinite-length constructed OCTET STRING")
	}
	for name, raw := range envelopes {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "p.mobileprovision"), raw, 0o600); err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(name, "Go") {
				oracle := provisioningtest.OpenSSL(t, dir, "cms", "-verify", "-noverify", "-binary", "-inform", "DER", "-in", "p.mobileprovision")
				if !bytes.Equal(oracle, content) {
					t.Fatalf("openssl reads %d bytes of content, we signed %d", len(oracle), len(content))
				}
			}
			p, err := provisioning.Parse(raw)
			if err != nil {
				t.Fatal(err)
			}
			if p.UUID != "9F2B3C4D-1111-2222-3333-444455556666" || p.Name != "Example App Store <&>" || p.TeamID != "ABCDE12345" ||
				p.TeamName != "Example Ltd" || p.AppID != "ABCDE12345.com.example.app" || p.BundleID != "com.example.app" ||
				p.Type != api.ExportAppStore || !p.Created.Equal(created) || !p.Expires.Equal(expires) ||
				p.HasDeviceList || p.ProvisionsAllDevices || !bytes.Equal(p.Raw, raw) {
				t.Errorf("parsed %+v", p)
			}
			if len(p.Certificates) != 2 || !bytes.Equal(p.Certificates[1], m.dist.DER) {
				t.Errorf("DeveloperCertificates: %d parsed", len(p.Certificates))
			}
			if !p.HasCertificate(m.dist.DER) || !p.HasCertificate(m.other.DER) || p.HasCertificate(m.apple.DER) {
				t.Error("HasCertificate does not answer by the DeveloperCertificates")
			}
			if p.Entitlements["get-task-allow"] != false || p.Entitlements["com.apple.developer.team-identifier"] != "ABCDE12345" {
				t.Errorf("entitlements %v", p.Entitlements)
			}
		})
	}
}

// The profile type in EAS's order, and eas-cli's independent predicates.
func TestType(t *testing.T) {
	m := newMaterial(t)
	for _, tc := range []struct {
		name       string
		devices    []string
		all, debug bool
		want       string
		adHoc, dev bool
	}{
		{"app store", nil, false, false, api.ExportAppStore, false, false},
		{"app store with get-task-allow", nil, false, true, api.ExportAppStore, false, false},
		{"ad hoc", []string{"00008030-001A2B3C4D5E6F70", "a1b2c3"}, false, false, api.ExportAdHoc, true, false},
		{"ad hoc, empty device list", []string{}, false, false, api.ExportAdHoc, true, false},
		{"development", []string{"00008030-001A2B3C4D5E6F70"}, false, true, api.ExportDevelopment, false, true},
		{"enterprise", nil, true, false, api.ExportEnterprise, false, false},
		// vmbootstrap's old order took get-task-allow first and called
		// this development; EAS checks ProvisionsAllDevices first.
		{"enterprise with get-task-allow", nil, true, true, api.ExportEnterprise, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prof := baseProfile(m)
			prof.Devices, prof.AllDevices, prof.GetTaskAllow = tc.devices, tc.all, tc.debug
			p, err := provisioning.Parse(provisioningtest.WrapBER(prof.Plist(), 512))
			if err != nil {
				t.Fatal(err)
			}
			if p.Type != tc.want || p.IsAdHoc() != tc.adHoc || p.IsDevelopment() != tc.dev || p.IsEnterprise() != tc.all {
				t.Errorf("type %s adhoc %v dev %v enterprise %v", p.Type, p.IsAdHoc(), p.IsDevelopment(), p.IsEnterprise())
			}
			if !slices.Equal(p.Devices, tc.devices) || p.HasDeviceList != (tc.devices != nil) {
				t.Errorf("devices %q (listed %v)", p.Devices, p.HasDeviceList)
			}
		})
	}
}

func TestMatches(t *testing.T) {
	for _, tc := range []struct {
		appID, prefix, bundle string
		want                  bool
		bundleID              string
	}{
		{"ABCDE12345.*", "", "com.example.app", true, "*"},
		{"ABCDE12345.*", "", "x", true, "*"},
		{"ABCDE12345.com.example.*", "", "com.example.app", true, "com.example.*"},
		{"ABCDE12345.com.example.*", "", "com.example.app.widget", true, "com.example.*"},
		{"ABCDE12345.com.example.*", "", "com.example", false, "com.example.*"},
		{"ABCDE12345.com.example.*", "", "com.example.", false, "com.example.*"},
		{"ABCDE12345.com.example.*", "", "com.examples.app", false, "com.example.*"},
		{"ABCDE12345.com.example.app", "", "com.example.app", true, "com.example.app"},
		{"ABCDE12345.com.example.app", "", "com.example.app.widget", false, "com.example.app"},
		{"ABCDE12345.com.example.app", "", "com.example.ap", false, "com.example.app"},
		{"ABCDE12345.com.example.app", "", "", false, "com.example.app"},
		// An old App ID prefix that is not the team's.
		{"Z9Y8X7W6V5.com.example.app", "Z9Y8X7W6V5", "com.example.app", true, "com.example.app"},
	} {
		prof := provisioningtest.Profile{UUID: "AAAABBBB-0000", TeamID: "ABCDE12345", AppID: tc.appID, Prefix: tc.prefix, Created: created, Expires: expires}
		p, err := provisioning.Parse(provisioningtest.WrapBER(prof.Plist(), 4096))
		if err != nil {
			t.Fatal(err)
		}
		if p.BundleID != tc.bundleID {
			t.Errorf("%s: BundleID %q, want %q", tc.appID, p.BundleID, tc.bundleID)
		}
		if got := p.Matches(tc.bundle); got != tc.want {
			t.Errorf("%s matches %q: %v, want %v", tc.appID, tc.bundle, got, tc.want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	m := newMaterial(t)
	good := baseProfile(m)
	plist := good.Plist()
	wrapped := provisioningtest.WrapBER(plist, 1000)
	replace := func(old, new string) []byte {
		if !bytes.Contains(plist, []byte(old)) {
			t.Fatalf("%q is not in the plist", old)
		}
		return provisioningtest.WrapBER(bytes.Replace(plist, []byte(old), []byte(new), 1), 1000)
	}
	// One segment, so that cutting 300 bytes always lands inside it.
	whole := provisioningtest.WrapBER(plist, len(plist))
	notSigned := bytes.Replace(wrapped, []byte{0x01, 0x07, 0x02}, []byte{0x01, 0x07, 0x03}, 1)
	huge := make([]byte, provisioning.MaxBytes+1)
	huge[0] = 0x30
	for _, tc := range []struct {
		name string
		raw  []byte
		want string
	}{
		{"empty", nil, "the provisioning profile is empty"},
		{"bare plist", plist, "a bare property list, not a .mobileprovision"},
		{"too large", huge, "more than the 4194304 a profile can be"},
		{"PEM", []byte("-----BEGIN CERTIFICATE-----\nMIIB\n"), "not a provisioning profile"},
		{"truncated", whole[:len(whole)-300], "not a provisioning profile (not a CMS envelope: truncated)"},
		{"missing end-of-contents", wrapped[:len(wrapped)-2], "not a CMS envelope"},
		{"trailing garbage", append(slices.Clone(wrapped), "junk"...), "4 bytes after its end"},
		{"not SignedData", notSigned, "the content type is not 1.2.840.113549.1.7.2"},
		{"content not a plist", provisioningtest.WrapBER([]byte("<plist><dict>"), 10), "content is not a property list: plist: error parsing XML property list"},
		{"plist not a dict", provisioningtest.WrapBER([]byte("<plist><array/></plist>"), 10), "not a dictionary"},
		{"no UUID", replace("<key>UUID</key>", "<key>UUUD</key>"), "UUID is missing"},
		{"UUID forms a path", replace(good.UUID, "../../etc/passwd"), `UUID "../../etc/passwd" is not a UUID`},
		{"no team", replace("<key>TeamIdentifier</key>", "<key>TeamIdentifiers</key>"), "TeamIdentifier is missing"},
		{"no expiry", replace("<key>ExpirationDate</key>", "<key>ExpiryDate</key>"), "ExpirationDate is missing or not a date"},
		{"bad date", replace(expires.Format(time.RFC3339), "next year"), `parsing time "next year"`},
		{"no application identifier", replace("<key>application-identifier</key>", "<key>app-id</key>"), "Entitlements.application-identifier is missing"},
		{"bad certificate data", replace("<key>DeveloperCertificates</key>\n\t<array>\n\t\t<data>", "<key>DeveloperCertificates</key>\n\t<array>\n\t\t<data>!!"), "illegal base64 data"},
		{"key without value", replace("<key>Version</key>\n\t<integer>1</integer>", "<key>Version</key>"), "missing value in dictionary"},
		{"bad integer", replace("<integer>365</integer>", "<integer>a year</integer>"), `parsing "a year": invalid syntax`},
		{"unknown element", replace("<false/>", "<maybe/>"), "unknown element maybe"},
		{"unclosed", provisioningtest.WrapBER(plist[:len(plist)-30], 1000), "not a property list: plist: error parsing XML property list: XML syntax error on line "},
		{"unclosed, the cause", provisioningtest.WrapBER(plist[:len(plist)-30], 1000), ": unexpected EOF"},
		{"several problems at once", replace("<key>UUID</key>", "<key>X</key>\n<string/>\n<key>TeamIdentifier</key>\n<array/>\n<key>Y</key>"), "UUID is missing\nTeamIdentifier is missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := provisioning.Parse(tc.raw)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v\nwant it to contain %q", err, tc.want)
			}
		})
	}
}
