package credentials

import (
	"bytes"
	"crypto/rand"
	"crypto/x509/pkix"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	pkcs12 "software.sslmate.com/src/go-pkcs12"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/internal/provisioning/provisioningtest"
)

// now is the clock of the iOS tests: the material is valid from
// 2025-01-01 to 2026-01-01 unless a case says otherwise.
var (
	now       = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	validFrom = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	validTo   = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
)

const (
	team      = "ABCDE12345"
	p12Pass   = "p12 pässword"
	appBundle = "com.example.app"
)

// iosMaterial is made once per test binary: a stand-in Apple CA, the
// team's distribution certificate and its .p12 in every encoding the
// tests read, another team's certificate, and an expired one.
type iosMaterial struct {
	apple, dist, other, expired provisioningtest.Identity
	// p12s of dist: go-pkcs12's LegacyRC2, LegacyDES and Modern2023
	// encoders, and the real openssl pkcs12 -export with -legacy (as
	// Keychain Access exports: RC2/3DES) and without (AES-256).
	p12s map[string][]byte
	// sha1 is openssl's SHA-1 of dist, read back from the openssl p12.
	sha1 string
	// certOnly is a .p12 without the private key (openssl -nokeys).
	certOnly []byte
	// expiredP12 holds the expired certificate.
	expiredP12 []byte
	// mismatched holds dist's key with other's certificate.
	mismatched []byte
}

var iosOnce struct {
	sync.Once
	m iosMaterial
}

func material(t testing.TB) iosMaterial {
	t.Helper()
	provisioningtest.RequireOpenSSL(t)
	iosOnce.Do(func() { iosOnce.m = makeMaterial(t) })
	if iosOnce.m.p12s == nil {
		t.Fatal("the iOS test material could not be made (see the first test that failed)")
	}
	return iosOnce.m
}

func makeMaterial(t testing.TB) iosMaterial {
	var m iosMaterial
	m.apple = provisioningtest.NewECIdentity(t, pkix.Name{CommonName: "Test Apple Worldwide Developer Relations CA"}, validFrom.AddDate(-5, 0, 0), validTo.AddDate(5, 0, 0), nil)
	m.dist = provisioningtest.NewIdentity(t, pkix.Name{CommonName: "Apple Distribution: Example Ltd (" + team + ")", OrganizationalUnit: []string{team}}, validFrom, validTo, &m.apple)
	m.other = provisioningtest.NewIdentity(t, pkix.Name{CommonName: "Apple Distribution: Other Ltd (ZZZZZ99999)"}, validFrom, validTo, &m.apple)
	m.expired = provisioningtest.NewIdentity(t, pkix.Name{CommonName: "Apple Distribution: Example Ltd (old)"}, validFrom.AddDate(-1, 0, 0), validFrom, &m.apple)
	m.p12s = map[string][]byte{}
	for name, enc := range map[string]*pkcs12.Encoder{"go-pkcs12 LegacyRC2": pkcs12.LegacyRC2, "go-pkcs12 LegacyDES": pkcs12.LegacyDES, "go-pkcs12 Modern2023": pkcs12.Modern2023} {
		raw, err := enc.WithRand(rand.Reader).Encode(m.dist.Key, m.dist.Cert, nil, p12Pass)
		if err != nil {
			t.Fatal(err)
		}
		m.p12s[name] = raw
	}
	dir := t.TempDir()
	write := func(name string, data []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	write("dist.pem", m.dist.CertPEM())
	write("dist.key", m.dist.KeyPEM(t))
	write("apple.pem", m.apple.CertPEM())
	write("expired.pem", m.expired.CertPEM())
	write("expired.key", m.expired.KeyPEM(t))
	pass := "pass:" + p12Pass
	provisioningtest.OpenSSL(t, dir, "pkcs12", "-export", "-legacy", "-in", "dist.pem", "-inkey", "dist.key", "-certfile", "apple.pem", "-name", "Apple Distribution", "-passout", pass, "-out", "legacy.p12")
	provisioningtest.OpenSSL(t, dir, "pkcs12", "-export", "-in", "dist.pem", "-inkey", "dist.key", "-passout", pass, "-out", "aes.p12")
	provisioningtest.OpenSSL(t, dir, "pkcs12", "-export", "-nokeys", "-in", "dist.pem", "-passout", pass, "-out", "certonly.p12")
	provisioningtest.OpenSSL(t, dir, "pkcs12", "-export", "-in", "expired.pem", "-inkey", "expired.key", "-passout", pass, "-out", "expired.p12")
	m.p12s["openssl -legacy, with the CA"] = read("legacy.p12")
	m.p12s["openssl AES-256"] = read("aes.p12")
	m.certOnly = read("certonly.p12")
	m.expiredP12 = read("expired.p12")
	// The oracle: openssl's own fingerprint of the certificate it reads
	// back from the .p12 (the client certificate, not the CA).
	pemOut := provisioningtest.OpenSSL(t, dir, "pkcs12", "-in", "legacy.p12", "-legacy", "-nokeys", "-clcerts", "-passin", pass)
	write("back.pem", pemOut)
	fp := string(provisioningtest.OpenSSL(t, dir, "x509", "-in", "back.pem", "-noout", "-fingerprint", "-sha1"))
	_, hexColons, ok := strings.Cut(strings.TrimSpace(fp), "=")
	if !ok {
		t.Fatalf("openssl x509 -fingerprint printed %q", fp)
	}
	m.sha1 = strings.ReplaceAll(hexColons, ":", "")
	mismatched, err := pkcs12.Modern2023.WithRand(rand.Reader).Encode(m.dist.Key, m.other.Cert, nil, p12Pass)
	if err != nil {
		t.Fatal(err)
	}
	m.mismatched = mismatched
	return m
}

// profile is a provisioning profile for the team, signed by openssl
// (streamed BER like Apple's when stream is set).
type profileSpec struct {
	uuid, name, teamID, appID string
	devices                   []string
	allDevices, debug         bool
	expires                   time.Time
	certs                     []provisioningtest.Identity
	stream                    bool
}

func (m iosMaterial) profile(t testing.TB, s profileSpec) []byte {
	t.Helper()
	if s.uuid == "" {
		s.uuid = "9F2B3C4D-1111-2222-3333-444455556666"
	}
	if s.teamID == "" {
		s.teamID = team
	}
	if s.appID == "" {
		s.appID = s.teamID + "." + appBundle
	}
	if s.expires.IsZero() {
		s.expires = validTo
	}
	if s.certs == nil {
		s.certs = []provisioningtest.Identity{m.dist}
	}
	p := provisioningtest.Profile{
		UUID: s.uuid, Name: s.name, TeamID: s.teamID, TeamName: "Team " + s.teamID, AppID: s.appID,
		Created: validFrom, Expires: s.expires, Devices: s.devices, AllDevices: s.allDevices, GetTaskAllow: s.debug,
	}
	for _, c := range s.certs {
		p.Certificates = append(p.Certificates, c.DER)
	}
	return provisioningtest.SignOpenSSL(t, p.Plist(), m.apple, s.stream)
}

// iosApp writes an app directory with files (relative paths) and a
// credentials.json whose ios section is ios.
func iosApp(t *testing.T, files map[string][]byte, ios any) *File {
	t.Helper()
	dir := t.TempDir()
	for name, data := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	doc := map[string]any{}
	if ios != nil {
		doc["ios"] = ios
	}
	data, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, FileName), data, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func entry(profile, p12, password string) map[string]any {
	return map[string]any{"provisioningProfilePath": profile, "distributionCertificate": map[string]any{"path": p12, "password": password}}
}

var (
	appTarget    = api.IOSTarget{Name: "App", BundleID: appBundle}
	widgetTarget = api.IOSTarget{Name: "Widget", BundleID: appBundle + ".widget"}
)

// Every encoding of the .p12 opens, and the certificate's SHA-1 is the
// one openssl computes.
func TestIOSCredentialsSingleTarget(t *testing.T) {
	m := material(t)
	for _, stream := range []bool{false, true} {
		prof := m.profile(t, profileSpec{name: "Example App Store", stream: stream})
		for name, p12 := range m.p12s {
			t.Run(name, func(t *testing.T) {
				f := iosApp(t, map[string][]byte{"certs/app.mobileprovision": prof, "certs/dist.p12": p12},
					entry("certs/app.mobileprovision", "certs/dist.p12", p12Pass))
				secrets, signing, err := f.IOSCredentials([]api.IOSTarget{appTarget}, "store", "", now)
				if err != nil {
					t.Fatal(err)
				}
				s := secrets["App"]
				if len(secrets) != 1 || !bytes.Equal(s.ProvisioningProfile, prof) || !bytes.Equal(s.Certificate, p12) || s.CertificatePassword != p12Pass {
					t.Errorf("secrets not returned as read: %d targets", len(secrets))
				}
				want := api.IOSTargetSigning{
					Target: "App", BundleID: appBundle, ProfileUUID: "9F2B3C4D-1111-2222-3333-444455556666", ProfileName: "Example App Store",
					ProfileType: api.ExportAppStore, Expires: validTo, CertificateSHA1: m.sha1, CertificateName: "Apple Distribution: Example Ltd (" + team + ")",
				}
				if signing.ExportMethod != api.ExportAppStore || signing.TeamID != team || len(signing.Targets) != 1 || signing.Targets[0] != want {
					t.Errorf("signing %+v\nwant target %+v", signing, want)
				}
			})
		}
	}
}

func TestIOSCredentialsTargetsAndTypes(t *testing.T) {
	m := material(t)
	p12 := m.p12s["openssl -legacy, with the CA"]
	devices := []string{"00008030-001A2B3C4D5E6F70"}
	adHocApp := m.profile(t, profileSpec{uuid: "AAAA0000-0000-0000-0000-000000000001", name: "App Ad Hoc", devices: devices, stream: true})
	adHocWidget := m.profile(t, profileSpec{uuid: "AAAA0000-0000-0000-0000-000000000002", name: "Widget Ad Hoc", devices: devices, appID: team + ".com.example.*"})
	files := map[string][]byte{"certs/app.mobileprovision": adHocApp, "certs/widget.mobileprovision": adHocWidget, "certs/dist.p12": p12}
	f := iosApp(t, files, map[string]any{
		"Widget": entry("certs/widget.mobileprovision", "certs/dist.p12", p12Pass),
		"App":    entry("certs/app.mobileprovision", "certs/dist.p12", p12Pass),
	})
	secrets, signing, err := f.IOSCredentials([]api.IOSTarget{appTarget, widgetTarget}, "internal", "", now)
	if err != nil {
		t.Fatal(err)
	}
	if len(secrets) != 2 || !bytes.Equal(secrets["Widget"].ProvisioningProfile, adHocWidget) || !bytes.Equal(secrets["App"].ProvisioningProfile, adHocApp) {
		t.Errorf("secrets by target wrong")
	}
	if signing.ExportMethod != api.ExportAdHoc || len(signing.Targets) != 2 || signing.Targets[0].Target != "App" || signing.Targets[1].Target != "Widget" ||
		signing.Targets[1].ProfileUUID != "AAAA0000-0000-0000-0000-000000000002" || signing.Targets[1].BundleID != widgetTarget.BundleID {
		t.Errorf("signing %+v", signing)
	}

	// The profile types each distribution accepts (the accepting half of
	// eas-cli's assertProvisioningProfileType; the refusing half is in
	// TestIOSCredentialsErrors).
	for _, tc := range []struct {
		name, distribution, enterprise string
		spec                           profileSpec
		method                         string
	}{
		{"internal, development", "internal", "", profileSpec{devices: devices, debug: true}, api.ExportDevelopment},
		{"internal, enterprise", "internal", "", profileSpec{allDevices: true}, api.ExportEnterprise},
		{"internal universal, enterprise", "internal", "universal", profileSpec{allDevices: true}, api.ExportEnterprise},
		{"internal adhoc, ad hoc", "internal", "adhoc", profileSpec{devices: devices}, api.ExportAdHoc},
		{"store, enterprise", "store", "", profileSpec{allDevices: true}, api.ExportEnterprise},
		{"store, app store, wildcard", "store", "", profileSpec{appID: team + ".*"}, api.ExportAppStore},
		{"unset distribution is store", "", "", profileSpec{}, api.ExportAppStore},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prof := m.profile(t, tc.spec)
			signing, err := ValidateIOS(prof, p12, p12Pass, appTarget, tc.distribution, tc.enterprise, now)
			if err != nil {
				t.Fatal(err)
			}
			if signing.ExportMethod != tc.method || signing.TeamID != team || signing.Targets[0].ProfileType != tc.method {
				t.Errorf("signing %+v", signing)
			}
		})
	}
}

func TestIOSCredentialsErrors(t *testing.T) {
	m := material(t)
	p12 := m.p12s["openssl -legacy, with the CA"]
	devices := []string{"00008030-001A2B3C4D5E6F70"}
	store := m.profile(t, profileSpec{name: "Example App Store"})
	adHoc := m.profile(t, profileSpec{name: "Example Ad Hoc", devices: devices})
	dev := m.profile(t, profileSpec{name: "Example Development", devices: devices, debug: true})
	enterprise := m.profile(t, profileSpec{name: "Example In House", allDevices: true})
	widgetOK := m.profile(t, profileSpec{name: "Widget", appID: team + "." + widgetTarget.BundleID})
	base := func() map[string][]byte {
		return map[string][]byte{"certs/app.mobileprovision": store, "certs/widget.mobileprovision": widgetOK, "certs/dist.p12": p12}
	}
	with := func(name string, data []byte) map[string][]byte {
		files := base()
		files[name] = data
		return files
	}
	single := entry("certs/app.mobileprovision", "certs/dist.p12", p12Pass)
	both := map[string]any{"App": single, "Widget": entry("certs/widget.mobileprovision", "certs/dist.p12", p12Pass)}
	app := []api.IOSTarget{appTarget}
	appAndWidget := []api.IOSTarget{appTarget, widgetTarget}
	for _, tc := range []struct {
		name                     string
		files                    map[string][]byte
		ios                      any
		targets                  []api.IOSTarget
		distribution, enterprise string
		want                     []string
	}{
		{"no ios section", base(), nil, app, "store", "",
			[]string{`credentials.json has no "ios" section: add ios {"provisioningProfilePath"`}},
		{"single-target form for an app with an extension", base(), single, appAndWidget, "store", "",
			[]string{`credentials.json: missing target in the credentials map: ios is in the single-target form, which covers only the application target "App", but the app also signs target "Widget" (com.example.app.widget); write ios as a map`}},
		{"map without a target", base(), map[string]any{"App": single}, appAndWidget, "store", "",
			[]string{`credentials.json: missing target in the credentials map: no credentials for target "Widget" (com.example.app.widget); add "Widget": {"provisioningProfilePath"`}},
		{"map entry naming no target", base(), map[string]any{"App": single, "Widget": single, "OldWidget": single}, appAndWidget, "store", "",
			[]string{`credentials.json: ios.OldWidget names no target of the app, whose targets are "App", "Widget"; rename the key`}},
		{"profile file missing", base(), entry("certs/missing.mobileprovision", "certs/dist.p12", p12Pass), app, "store", "",
			[]string{`credentials.json: ios.provisioningProfilePath names certs/missing.mobileprovision, which does not exist (paths are relative to`, "download the profile from the Apple Developer portal"}},
		{"p12 file missing", base(), map[string]any{"App": single, "Widget": entry("certs/widget.mobileprovision", "certs/nope.p12", p12Pass)}, appAndWidget, "store", "",
			[]string{`credentials.json: ios.Widget.distributionCertificate.path names certs/nope.p12, which does not exist`, "Keychain Access"}},
		{"profile too large", with("certs/app.mobileprovision", make([]byte, 4<<20+1)), single, app, "store", "",
			[]string{"ios.provisioningProfilePath:", "is larger than 4194304 bytes"}},
		{"profile not a profile", with("certs/app.mobileprovision", []byte("-----BEGIN CERTIFICATE-----\nMIIB\n")), single, app, "store", "",
			[]string{`credentials.json: ios.provisioningProfilePath (certs/app.mobileprovision), for target "App" (com.example.app): not a provisioning profile`}},
		{"profile expired", with("certs/app.mobileprovision", m.profile(t, profileSpec{name: "Old", expires: time.Date(2025, 5, 1, 9, 30, 0, 0, time.UTC)})), single, app, "store", "",
			[]string{`ios.provisioningProfilePath (certs/app.mobileprovision), "Old" (UUID 9F2B3C4D-1111-2222-3333-444455556666), for target "App" (com.example.app), expired on 2025-05-01 09:30 UTC; make a new one in the Apple Developer portal`, "eas credentials"}},
		{"bundle identifier not covered", base(), map[string]any{"App": single, "Widget": single}, appAndWidget, "store", "",
			[]string{`ios.Widget.provisioningProfilePath (certs/app.mobileprovision), "Example App Store" (UUID 9F2B3C4D-1111-2222-3333-444455556666), is for the application identifier ABCDE12345.com.example.app, which does not cover the bundle identifier com.example.app.widget of target "Widget"`}},
		{"wrong password", base(), entry("certs/app.mobileprovision", "certs/dist.p12", "wrong"), app, "store", "",
			[]string{`credentials.json: ios.distributionCertificate.password does not open ios.distributionCertificate.path (certs/dist.p12); check the password`}},
		{"wrong password, AES p12", with("certs/dist.p12", m.p12s["openssl AES-256"]), map[string]any{"App": entry("certs/app.mobileprovision", "certs/dist.p12", "")}, app, "store", "",
			[]string{`ios.App.distributionCertificate.password does not open ios.App.distributionCertificate.path (certs/dist.p12)`}},
		{"p12 without its private key", with("certs/dist.p12", m.certOnly), single, app, "store", "",
			[]string{`ios.distributionCertificate.path (certs/dist.p12) holds a certificate but no private key; in Keychain Access`}},
		{"p12 not a p12", with("certs/dist.p12", []byte("not a p12 at all")), single, app, "store", "",
			[]string{`ios.distributionCertificate.path (certs/dist.p12) is not a readable .p12`}},
		{"p12 empty", with("certs/dist.p12", nil), single, app, "store", "",
			[]string{`ios.distributionCertificate.path (certs/dist.p12) is empty`}},
		{"p12 certificate of another key", with("certs/dist.p12", m.mismatched), single, app, "store", "",
			[]string{`holds a private key and a certificate "Apple Distribution: Other Ltd (ZZZZZ99999)" that is not that key's`}},
		{"certificate expired", with("certs/app.mobileprovision", m.profile(t, profileSpec{name: "P", certs: []provisioningtest.Identity{m.expired}})), map[string]any{"App": entry("certs/app.mobileprovision", "certs/old.p12", p12Pass)}, app, "store", "",
			[]string{`ios.App.distributionCertificate.path (certs/old.p12), "Apple Distribution: Example Ltd (old)" (SHA-1 `, "expired on 2025-01-01 00:00 UTC; create a new distribution certificate"}},
		{"certificate not in the profile", with("certs/app.mobileprovision", m.profile(t, profileSpec{name: "Others", certs: []provisioningtest.Identity{m.other, m.expired}})), single, app, "store", "",
			[]string{`ios.distributionCertificate.path (certs/dist.p12), "Apple Distribution: Example Ltd (ABCDE12345)" (SHA-1 ` + m.sha1 + `) for target "App" (com.example.app), is not one of the certificates of ios.provisioningProfilePath (certs/app.mobileprovision), "Others" (UUID 9F2B3C4D-1111-2222-3333-444455556666), which allows only "Apple Distribution: Other Ltd (ZZZZZ99999)", SHA-1 ` + certSHA1(m.other.DER) + `; "Apple Distribution: Example Ltd (old)", SHA-1 ` + certSHA1(m.expired.DER) + `; use the certificate the profile was made with`}},
		{"store with ad hoc", with("certs/app.mobileprovision", adHoc), single, app, "store", "",
			[]string{`"Example Ad Hoc" (UUID 9F2B3C4D-1111-2222-3333-444455556666), for target "App" (com.example.app): is an ad hoc profile, which store distribution cannot use; use an App Store profile, or set "distribution": "internal"`}},
		{"store with development", with("certs/app.mobileprovision", dev), single, app, "", "",
			[]string{`is a development profile, which store distribution cannot use`}},
		{"internal with app store", base(), single, app, "internal", "",
			[]string{`for target "App" (com.example.app): is an App Store profile, but internal distribution needs an ad hoc, development or enterprise profile`}},
		{"internal universal with ad hoc", with("certs/app.mobileprovision", adHoc), single, app, "internal", "universal",
			[]string{`is an ad hoc profile, but "enterpriseProvisioning": "universal" in eas.json needs a universal (enterprise, In House) profile for internal distribution`}},
		{"internal adhoc with enterprise", with("certs/app.mobileprovision", enterprise), single, app, "internal", "adhoc",
			[]string{`is an enterprise (In House) profile, but "enterpriseProvisioning": "adhoc" in eas.json needs an ad hoc profile`}},
		{"internal adhoc with development", with("certs/app.mobileprovision", dev), single, app, "internal", "adhoc",
			[]string{`is a development profile, but "enterpriseProvisioning": "adhoc"`}},
		{"teams differ", with("certs/widget.mobileprovision", m.profile(t, profileSpec{name: "W", teamID: "ZZZZZ99999", appID: "ZZZZZ99999." + widgetTarget.BundleID})), both, appAndWidget, "store", "",
			[]string{`credentials.json: ios.Widget.provisioningProfilePath (certs/widget.mobileprovision) for target "Widget" (com.example.app.widget) belongs to team ZZZZZ99999 (Team ZZZZZ99999), but ios.App.provisioningProfilePath (certs/app.mobileprovision) for the application target "App" (com.example.app) belongs to team ABCDE12345 (Team ABCDE12345); all targets must be signed by one team`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files := tc.files
			if tc.name == "certificate expired" {
				files["certs/old.p12"] = m.expiredP12
			}
			f := iosApp(t, files, tc.ios)
			secrets, signing, err := f.IOSCredentials(tc.targets, tc.distribution, tc.enterprise, now)
			if err == nil {
				t.Fatalf("IOSCredentials succeeded: %+v", signing)
			}
			t.Log(err)
			if secrets != nil || signing != nil {
				t.Error("an error returned secrets or signing too")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\n does not contain %q", err, w)
				}
			}
		})
	}

	// The same checks for bytes given directly, named for flags.
	_, err := ValidateIOS(store, p12, "wrong", appTarget, "store", "", now)
	if err == nil || !strings.Contains(err.Error(), "the certificate's password does not open the distribution certificate (.p12)") {
		t.Errorf("ValidateIOS, wrong password: %v", err)
	}
	_, err = ValidateIOS(store, p12, p12Pass, api.IOSTarget{Name: "App", BundleID: "com.other"}, "store", "", now)
	if err == nil || !strings.Contains(err.Error(), `the provisioning profile, "Example App Store" (UUID 9F2B3C4D-1111-2222-3333-444455556666), is for the application identifier ABCDE12345.com.example.app, which does not cover the bundle identifier com.other`) {
		t.Errorf("ValidateIOS, other bundle identifier: %v", err)
	}
}
