package credentials

import (
	"crypto"
	"crypto/sha1"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"time"

	pkcs12 "software.sslmate.com/src/go-pkcs12"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/internal/boundedfile"
	"github.com/freeagent-build/freeagent/internal/provisioning"
)

// MaxP12Bytes bounds a distribution certificate's .p12 read into memory:
// one is about 3 KB.
const MaxP12Bytes = 1 << 20

// Distributions as eas.json names them; any other value is store
// distribution to eas-cli.
const distributionInternal = "internal"

// eas.json's enterpriseProvisioning values.
const (
	enterpriseUniversal = "universal"
	enterpriseAdHoc     = "adhoc"
)

// IOSCredentials reads and validates the ios section for the app's targets
// (targets[0] is the application target, the rest its extensions) as
// eas-cli does (credentialsJson/read.ts readIosCredentialsAsync, then
// IosCredentialsProvider.getLocalAsync and assertProvisioningProfileType),
// and more: every file is opened, each certificate must open with its
// password, be in its target's profile and unexpired, each profile must
// be unexpired and cover its target's bundle identifier, and all targets
// must belong to one team. distribution and enterpriseProvisioning are the
// build profile's. It returns, by target name, the secrets to seal into
// the submit, and the signing the build is checked against.
//
// The single-target form of credentials.json applies to the application
// target; the map form needs an entry for every target and nothing else.
func (f *File) IOSCredentials(targets []api.IOSTarget, distribution, enterpriseProvisioning string, now time.Time) (map[string]api.IOSTargetCredentials, *api.IOSSigning, error) {
	if f.ios == nil {
		return nil, nil, fmt.Errorf("%s has no \"ios\" section: add ios {\"provisioningProfilePath\", \"distributionCertificate\": {\"path\", \"password\"}} (https://docs.expo.dev/app-signing/local-credentials/), or use remote credentials (credentialsSource \"remote\" in eas.json)", FileName)
	}
	if len(targets) == 0 {
		return nil, nil, errors.New("no iOS targets to sign: the application target is unknown")
	}
	entries, err := f.iosEntries(targets)
	if err != nil {
		return nil, nil, err
	}
	secrets := make(map[string]api.IOSTargetCredentials, len(targets))
	checked := make([]checkedTarget, 0, len(targets))
	for i, target := range targets {
		e := entries[i]
		src := iosSources{
			target:      describeTarget(target),
			profile:     fmt.Sprintf("%s.provisioningProfilePath (%s)", e.field, filepath.ToSlash(e.ProvisioningProfilePath)),
			certificate: fmt.Sprintf("%s.distributionCertificate.path (%s)", e.field, filepath.ToSlash(e.DistributionCertificate.Path)),
			password:    e.field + ".distributionCertificate.password",
		}
		profileRaw, err := f.readNamed(e.ProvisioningProfilePath, e.field+".provisioningProfilePath", provisioning.MaxBytes,
			"download the profile from the Apple Developer portal or with `eas credentials`")
		if err != nil {
			return nil, nil, err
		}
		p12, err := f.readNamed(e.DistributionCertificate.Path, e.field+".distributionCertificate.path", MaxP12Bytes,
			"export the distribution certificate with its private key from Keychain Access as .p12, or download it with `eas credentials`")
		if err != nil {
			return nil, nil, err
		}
		c, err := checkIOSTarget(src, profileRaw, p12, e.DistributionCertificate.Password, target, distribution, enterpriseProvisioning, now)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", FileName, err)
		}
		checked = append(checked, c)
		secrets[target.Name] = api.IOSTargetCredentials{
			ProvisioningProfile: profileRaw,
			Certificate:         p12,
			CertificatePassword: e.DistributionCertificate.Password,
		}
	}
	signing, err := combine(checked)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", FileName, err)
	}
	return secrets, signing, nil
}

// ValidateIOS checks the credentials of an app with a single target given
// as bytes (the CLI's --provisioning-profile, --p12 and --p12-password
// flags) exactly as IOSCredentials checks each target of credentials.json:
// the profile parses, covers target.BundleID, has not expired and suits
// distribution and enterpriseProvisioning as eas-cli requires; the .p12
// opens with password, holds a private key and its unexpired certificate,
// and that certificate is one of the profile's. It returns the signing of
// the build.
func ValidateIOS(profile, p12 []byte, password string, target api.IOSTarget, distribution, enterpriseProvisioning string, now time.Time) (*api.IOSSigning, error) {
	src := iosSources{
		target:      describeTarget(target),
		profile:     "the provisioning profile",
		certificate: "the distribution certificate (.p12)",
		password:    "the certificate's password",
	}
	c, err := checkIOSTarget(src, profile, p12, password, target, distribution, enterpriseProvisioning, now)
	if err != nil {
		return nil, err
	}
	return combine([]checkedTarget{c})
}

// iosEntry is a target's credentials as written, with the field they are
// at for messages ("ios" or "ios.Widget").
type iosEntry struct {
	IOSTarget
	field string
}

// iosEntries pairs each target with its entry of credentials.json, as
// eas-cli's readIosCredentialsAsync and ensureAllTargetsAreConfigured do,
// and also refuses entries that name no target (eas-cli ignores them:
// they are usually a renamed target, whose credentials would otherwise
// silently go unused).
func (f *File) iosEntries(targets []api.IOSTarget) ([]iosEntry, error) {
	app := targets[0]
	if single, ok := f.ios[""]; ok {
		if len(targets) > 1 {
			var ext []string
			for _, t := range targets[1:] {
				ext = append(ext, describeTarget(t))
			}
			return nil, fmt.Errorf("%s: missing target in the credentials map: ios is in the single-target form, which covers only the application target %q, but the app also signs %s; write ios as a map of target name to credentials: {%q: {\"provisioningProfilePath\": ..., \"distributionCertificate\": {...}}, %q: {...}}",
				FileName, app.Name, strings.Join(ext, ", "), app.Name, targets[1].Name)
		}
		return []iosEntry{{IOSTarget: single, field: "ios"}}, nil
	}
	names := make([]string, len(targets))
	for i, t := range targets {
		names[i] = t.Name
	}
	var unknown []string
	for name := range f.ios {
		if !slices.Contains(names, name) {
			unknown = append(unknown, name)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return nil, fmt.Errorf("%s: ios.%s names no target of the app, whose targets are %s; rename the key to the target it is for, or remove it",
			FileName, strings.Join(unknown, ", ios."), strings.Join(quoteAll(names), ", "))
	}
	entries := make([]iosEntry, len(targets))
	for i, t := range targets {
		e, ok := f.ios[t.Name]
		if !ok {
			return nil, fmt.Errorf("%s: missing target in the credentials map: no credentials for %s; add %q: {\"provisioningProfilePath\": \"<its .mobileprovision>\", \"distributionCertificate\": {\"path\": \"<the .p12>\", \"password\": \"...\"}} to ios",
				FileName, describeTarget(t), t.Name)
		}
		entries[i] = iosEntry{IOSTarget: e, field: "ios." + t.Name}
	}
	return entries, nil
}

// readNamed reads a file credentials.json names in field.
func (f *File) readNamed(p, field string, limit int64, fix string) ([]byte, error) {
	raw, err := boundedfile.Read(f.abs(p), limit)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: %s names %s, which does not exist (paths are relative to %s); fix the path, or %s", FileName, field, filepath.ToSlash(p), f.dir, fix)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", FileName, field, err)
	}
	return raw, nil
}

// iosSources names a target's credentials in messages.
type iosSources struct {
	target      string // `target "Widget" (com.example.app.widget)`
	profile     string // where the profile comes from
	certificate string // where the .p12 comes from
	password    string // where its password comes from
}

// checkedTarget is a target whose credentials passed.
type checkedTarget struct {
	signing api.IOSTargetSigning
	profile provisioning.Profile
	src     iosSources
}

func checkIOSTarget(src iosSources, profileRaw, p12 []byte, password string, target api.IOSTarget, distribution, enterpriseProvisioning string, now time.Time) (checkedTarget, error) {
	p, err := provisioning.Parse(profileRaw)
	if err != nil {
		return checkedTarget{}, fmt.Errorf("%s, for %s: %w", src.profile, src.target, err)
	}
	shown := fmt.Sprintf("%s, %q (UUID %s),", src.profile, p.Name, p.UUID)
	if p.Expires.Before(now) {
		return checkedTarget{}, fmt.Errorf("%s for %s, expired on %s; make a new one in the Apple Developer portal (Certificates, Identifiers & Profiles) or with `eas credentials`, and point to it",
			shown, src.target, day(p.Expires))
	}
	if !p.Matches(target.BundleID) {
		return checkedTarget{}, fmt.Errorf("%s is for the application identifier %s, which does not cover the bundle identifier %s of %s; use a profile made for %s (or a wildcard one that covers it)",
			shown, p.AppID, target.BundleID, src.target, target.BundleID)
	}
	if err := assertProfileType(p, distribution, enterpriseProvisioning); err != nil {
		return checkedTarget{}, fmt.Errorf("%s for %s: %w", shown, src.target, err)
	}
	cert, err := openP12(p12, password, src)
	if err != nil {
		return checkedTarget{}, err
	}
	sha := certSHA1(cert.Raw)
	certShown := fmt.Sprintf("%s, %q (SHA-1 %s),", src.certificate, cert.Subject.CommonName, sha)
	if cert.NotAfter.Before(now) {
		return checkedTarget{}, fmt.Errorf("%s expired on %s; create a new distribution certificate in the Apple Developer portal or with `eas credentials`, and a provisioning profile that includes it",
			certShown, day(cert.NotAfter))
	}
	if cert.NotBefore.After(now) {
		return checkedTarget{}, fmt.Errorf("%s is not valid before %s; check this machine's clock", certShown, day(cert.NotBefore))
	}
	if !p.HasCertificate(cert.Raw) {
		return checkedTarget{}, fmt.Errorf("%s for %s, is not one of the certificates of %s which allows only %s; use the certificate the profile was made with, or regenerate the profile with this certificate in the Apple Developer portal",
			strings.TrimSuffix(certShown, ","), src.target, shown, describeCertificates(p.Certificates))
	}
	return checkedTarget{
		signing: api.IOSTargetSigning{
			Target:          target.Name,
			BundleID:        target.BundleID,
			ProfileUUID:     p.UUID,
			ProfileName:     p.Name,
			ProfileType:     p.Type,
			Expires:         p.Expires,
			CertificateSHA1: sha,
			CertificateName: cert.Subject.CommonName,
		},
		profile: p,
		src:     src,
	}, nil
}

// assertProfileType is eas-cli's assertProvisioningProfileType: internal
// distribution needs the enterpriseProvisioning's kind of profile, or when
// it is unset any but an App Store one; store distribution (any other
// value) refuses ad hoc and development profiles.
func assertProfileType(p provisioning.Profile, distribution, enterpriseProvisioning string) error {
	if distribution == distributionInternal {
		switch {
		case enterpriseProvisioning == enterpriseUniversal && !p.IsEnterprise():
			return fmt.Errorf("is %s profile, but \"enterpriseProvisioning\": \"universal\" in eas.json needs a universal (enterprise, In House) profile for internal distribution; use one of your Apple Developer Enterprise Program team, or set \"enterpriseProvisioning\": \"adhoc\"", article(p))
		case enterpriseProvisioning == enterpriseAdHoc && !p.IsAdHoc():
			return fmt.Errorf("is %s profile, but \"enterpriseProvisioning\": \"adhoc\" in eas.json needs an ad hoc profile for internal distribution; make an Ad Hoc profile with the devices to install on", article(p))
		case enterpriseProvisioning == "" && !p.IsEnterprise() && !p.IsAdHoc() && !p.IsDevelopment():
			return fmt.Errorf("is %s profile, but internal distribution needs an ad hoc, development or enterprise profile; make an Ad Hoc profile with the devices to install on, or set \"distribution\": \"store\" in the build profile of eas.json for an App Store build", article(p))
		}
		return nil
	}
	if p.IsAdHoc() || p.IsDevelopment() {
		return fmt.Errorf("is %s profile, which store distribution cannot use; use an App Store profile, or set \"distribution\": \"internal\" in the build profile of eas.json", article(p))
	}
	return nil
}

// article names the profile's kind for messages ("an ad hoc").
func article(p provisioning.Profile) string {
	switch p.Type {
	case api.ExportAdHoc:
		return "an ad hoc"
	case api.ExportDevelopment:
		return "a development"
	case api.ExportEnterprise:
		return "an enterprise (In House)"
	}
	return "an App Store"
}

// openP12 opens a distribution certificate's .p12 (Keychain Access's
// legacy RC2/3DES encryption or OpenSSL 3's AES) and returns the
// certificate of its private key.
func openP12(p12 []byte, password string, src iosSources) (*x509.Certificate, error) {
	if len(p12) == 0 {
		return nil, fmt.Errorf("%s is empty; export the distribution certificate with its private key from Keychain Access as .p12", src.certificate)
	}
	key, leaf, chain, err := pkcs12.DecodeChain(p12, password)
	var notImpl pkcs12.NotImplementedError
	switch {
	case errors.Is(err, pkcs12.ErrIncorrectPassword):
		return nil, fmt.Errorf("%s does not open %s; check the password (the one chosen when the .p12 was exported)", src.password, src.certificate)
	case errors.As(err, &notImpl):
		return nil, fmt.Errorf("%s uses a PKCS#12 feature this tool cannot read (%v); export it again from Keychain Access, or convert it with `openssl pkcs12 -in old.p12 -nodes | openssl pkcs12 -export -out new.p12`", src.certificate, err)
	case err != nil && strings.Contains(err.Error(), "private key missing"):
		return nil, fmt.Errorf("%s holds a certificate but no private key; in Keychain Access, expand the certificate, select it with its private key and export both as .p12", src.certificate)
	case err != nil && strings.Contains(err.Error(), "certificate missing"):
		return nil, fmt.Errorf("%s holds a private key but no certificate; export the certificate together with its private key as .p12", src.certificate)
	case err != nil && strings.Contains(err.Error(), "indefinite length"):
		return nil, fmt.Errorf("%s is BER-encoded, which this tool cannot read; convert it with `openssl pkcs12 -in old.p12 -nodes | openssl pkcs12 -export -out new.p12`", src.certificate)
	case err != nil:
		return nil, fmt.Errorf("%s is not a readable .p12 (%v); export the distribution certificate with its private key from Keychain Access as .p12", src.certificate, err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("%s holds a private key of an unsupported kind (%T)", src.certificate, key)
	}
	pub, ok := signer.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok {
		return nil, fmt.Errorf("%s holds a private key of an unsupported kind (%T)", src.certificate, key)
	}
	// The leaf is the certificate of the key, wherever it sits in the
	// file (DecodeChain takes the first certificate as the leaf).
	for _, c := range append([]*x509.Certificate{leaf}, chain...) {
		if pub.Equal(c.PublicKey) {
			return c, nil
		}
	}
	return nil, fmt.Errorf("%s holds a private key and a certificate %q that is not that key's; export the distribution certificate together with its own private key", src.certificate, leaf.Subject.CommonName)
}

// combine checks that all targets belong to one team and builds the
// signing. The application target's profile decides the export method
// and the team. (EAS takes the profile of the lexically smallest bundle
// identifier as the application's; the two differ only for an extension
// whose bundle identifier sorts before the app's, which Apple's rule that
// an extension's identifier extends its app's rules out.)
func combine(targets []checkedTarget) (*api.IOSSigning, error) {
	app := targets[0]
	s := &api.IOSSigning{ExportMethod: app.profile.Type, TeamID: app.profile.TeamID}
	for _, t := range targets {
		if t.profile.TeamID != app.profile.TeamID {
			return nil, fmt.Errorf("%s for %s belongs to team %s, but %s for the application %s belongs to team %s; all targets must be signed by one team: use a profile of team %s",
				t.src.profile, t.src.target, describeTeam(t.profile), app.src.profile, app.src.target, describeTeam(app.profile), app.profile.TeamID)
		}
		s.Targets = append(s.Targets, t.signing)
	}
	return s, nil
}

func describeTarget(t api.IOSTarget) string {
	if t.BundleID == "" {
		return fmt.Sprintf("target %q", t.Name)
	}
	return fmt.Sprintf("target %q (%s)", t.Name, t.BundleID)
}

func describeTeam(p provisioning.Profile) string {
	if p.TeamName == "" {
		return p.TeamID
	}
	return fmt.Sprintf("%s (%s)", p.TeamID, p.TeamName)
}

// describeCertificates lists a profile's certificates by common name
// and SHA-1.
func describeCertificates(certs [][]byte) string {
	if len(certs) == 0 {
		return "none"
	}
	var out []string
	for _, der := range certs {
		name := "unreadable certificate"
		if c, err := x509.ParseCertificate(der); err == nil {
			name = fmt.Sprintf("%q", c.Subject.CommonName)
		}
		out = append(out, fmt.Sprintf("%s, SHA-1 %s", name, certSHA1(der)))
	}
	return strings.Join(out, "; ")
}

// certSHA1 is the uppercase hex SHA-1 of a certificate, as Keychain
// Access and `security find-identity` show it.
func certSHA1(der []byte) string {
	sum := sha1.Sum(der)
	return strings.ToUpper(hex.EncodeToString(sum[:]))
}

func day(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 MST") }
