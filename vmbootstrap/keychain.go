package vmbootstrap

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/internal/provisioning"
)

// Keychain is the temporary keychain holding a build's signing identity.
type Keychain interface {
	// Path is the keychain file (what codesign's --keychain takes).
	Path() string
	// Create creates the keychain with password, sets it to lock only
	// after 6 hours and unlocks it.
	Create(ctx context.Context, password string) error
	// Import imports a PKCS#12 identity and lets codesign use its key
	// without a prompt.
	Import(ctx context.Context, p12 []byte, p12Password, keychainPassword string) error
	// AddToSearchList puts the keychain first in the user's search list.
	AddToSearchList(ctx context.Context) error
	// SigningIdentity returns the SHA-1 of the first valid code-signing
	// identity in the keychain.
	SigningIdentity(ctx context.Context) (string, error)
	// Delete removes the keychain (and with it its search-list entry).
	Delete(ctx context.Context) error
}

// SecurityKeychain is a Keychain driven through macOS's /usr/bin/security.
//
// Passwords: `security` takes the keychain and p12 passwords only as
// arguments (-p, -P, -k) or through an interactive prompt, so they are
// visible in the process list of the VM for the few milliseconds each call
// runs. The VM is destroyed after the build, the keychain password is
// random and per build, and the build's own processes start only after
// these calls (with a build user, the calls run as it: the keychain is
// its own, for its codesign). They never appear in this program's logs or errors:
// error messages name the subcommand only and redact the tool's output.
type SecurityKeychain struct {
	tool    string
	path    string
	secrets []string
	// user, when set, runs security (with env): the keychain is the build
	// user's, in its search list, for its codesign.
	user *buildUser
	env  []string
}

// NewSecurityKeychain returns a keychain at path (ending in .keychain-db)
// managed with the security program at tool.
func NewSecurityKeychain(tool, path string) *SecurityKeychain {
	return &SecurityKeychain{tool: tool, path: path}
}

// Path implements Keychain.
func (k *SecurityKeychain) Path() string { return k.path }

// Create implements Keychain.
func (k *SecurityKeychain) Create(ctx context.Context, password string) error {
	k.secrets = append(k.secrets, password)
	if err := os.MkdirAll(filepath.Dir(k.path), 0o700); err != nil {
		return fmt.Errorf("create keychain directory: %w", err)
	}
	if k.user != nil {
		if err := k.user.share(filepath.Dir(k.path), 0o770); err != nil {
			return fmt.Errorf("create keychain directory: %w", err)
		}
	}
	if _, err := k.security(ctx, "create-keychain", "-p", password, k.path); err != nil {
		return err
	}
	if _, err := k.security(ctx, "set-keychain-settings", "-lut", "21600", k.path); err != nil {
		return err
	}
	_, err := k.security(ctx, "unlock-keychain", "-p", password, k.path)
	return err
}

// Import implements Keychain. The p12 goes through a private temporary
// file (security reads identities only from files), removed at once.
func (k *SecurityKeychain) Import(ctx context.Context, p12 []byte, p12Password, keychainPassword string) error {
	k.secrets = append(k.secrets, p12Password, keychainPassword)
	dir, err := os.MkdirTemp(filepath.Dir(k.path), "p12-")
	if err != nil {
		return fmt.Errorf("import signing certificate: %w", err)
	}
	defer os.RemoveAll(dir)
	p12Path := filepath.Join(dir, "identity.p12")
	if err := os.WriteFile(p12Path, p12, 0o600); err != nil {
		return fmt.Errorf("import signing certificate: %w", err)
	}
	if k.user != nil {
		// security reads it as the build user, before any build command
		// runs; it is removed right after.
		if err := k.user.shareTree(dir); err != nil {
			return fmt.Errorf("import signing certificate: %w", err)
		}
	}
	// -x: the private key is non-extractable (security export and
	// SecItemExport refuse it), so not even the build's own code can take
	// it out of the VM; codesign still signs with it.
	if _, err := k.security(ctx, "import", p12Path, "-k", k.path, "-f", "pkcs12", "-P", p12Password, "-x",
		"-T", "/usr/bin/codesign", "-T", "/usr/bin/security"); err != nil {
		return err
	}
	_, err = k.security(ctx, "set-key-partition-list", "-S", "apple-tool:,apple:,codesign:", "-s", "-k", keychainPassword, k.path)
	return err
}

// AddToSearchList implements Keychain.
func (k *SecurityKeychain) AddToSearchList(ctx context.Context) error {
	out, err := k.security(ctx, "list-keychains", "-d", "user")
	if err != nil {
		return err
	}
	args := []string{"list-keychains", "-d", "user", "-s", k.path}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		p := strings.Trim(strings.TrimSpace(sc.Text()), `"`)
		if p != "" && p != k.path {
			args = append(args, p)
		}
	}
	_, err = k.security(ctx, args...)
	return err
}

// SigningIdentity implements Keychain. find-identity -v lists the valid
// identities:
//
//	% security find-identity -v -p codesigning KEYCHAIN
//	  1) 0123…CDEF "Apple Distribution: Example Ltd (TEAM123456)"
//	     1 valid identities found
//
// When it lists none, find-identity without -v lists them all, an invalid
// one with the reason after its name, which says what to fix:
//
//	% security find-identity -p codesigning KEYCHAIN
//	Policy: Code Signing
//	  Matching identities
//	  1) 0123…CDEF "Apple Distribution: Example Ltd (TEAM123456)" (CSSMERR_TP_NOT_TRUSTED)
//	     1 identities found
//
//	  Valid identities only
//	     0 valid identities found
func (k *SecurityKeychain) SigningIdentity(ctx context.Context) (string, error) {
	out, err := k.security(ctx, "find-identity", "-v", "-p", "codesigning", k.path)
	if err != nil {
		return "", err
	}
	if ids := listedIdentities(out); len(ids) > 0 {
		return ids[0].sha1, nil
	}
	out, err = k.security(ctx, "find-identity", "-p", "codesigning", k.path)
	if err != nil {
		return "", err
	}
	var invalid []string
	for _, id := range listedIdentities(out) {
		if id.reason != "" {
			invalid = append(invalid, id.whyInvalid())
		}
	}
	if len(invalid) > 0 {
		// The names come from the tool's output, as the redacted errors do.
		return "", errors.New(k.redact(strings.Join(invalid, "; ")))
	}
	return "", errors.New("the signing certificate holds no valid code-signing identity (is the .p12 a distribution certificate with its private key, and not expired?)")
}

// listedIdentity is one identity find-identity lists; reason is what
// makes it invalid ("" when it is valid).
type listedIdentity struct {
	sha1, name, reason string
}

var identityLine = regexp.MustCompile(`^\s*\d+\)\s+([0-9A-Fa-f]{40})\s+"(.*)"(?:\s+\(([^()]+)\))?\s*$`)

func listedIdentities(out []byte) []listedIdentity {
	var ids []listedIdentity
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if m := identityLine.FindStringSubmatch(sc.Text()); m != nil {
			ids = append(ids, listedIdentity{sha1: m[1], name: m[2], reason: m[3]})
		}
	}
	return ids
}

const newCertificateFix = "make a new distribution certificate (with `eas credentials` or in the Apple Developer portal) and put its .p12 in credentials.json"

// whyInvalid says why codesign cannot sign with the identity, and the fix.
func (id listedIdentity) whyInvalid() string {
	what := fmt.Sprintf("the signing certificate %q is not valid for code signing (%s)", id.name, id.reason)
	switch id.reason {
	case "CSSMERR_TP_NOT_TRUSTED":
		return what + ": the chain to Apple's root is incomplete: the template lacks Apple's WWDR intermediate certificate; rebuild it with scripts/build-vm-template.sh, which installs it in the System keychain"
	case "CSSMERR_TP_CERT_EXPIRED":
		return what + ": the certificate expired; " + newCertificateFix
	case "CSSMERR_TP_CERT_REVOKED":
		return what + ": the certificate was revoked; " + newCertificateFix
	default:
		return what
	}
}

// Delete implements Keychain.
func (k *SecurityKeychain) Delete(ctx context.Context) error {
	_, err := k.security(ctx, "delete-keychain", k.path)
	return err
}

func (k *SecurityKeychain) security(ctx context.Context, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var cmd *exec.Cmd
	if k.user != nil {
		cmd = k.user.command(ctx, k.tool, append([]string{"security"}, args...), k.env)
	} else {
		cmd = exec.CommandContext(ctx, k.tool, args...)
		cmd.Stdin = nil
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		msg := k.redact(strings.TrimSpace(out.String()))
		if msg != "" {
			msg = ": " + msg
		}
		// args[0] is the subcommand; the other arguments may hold passwords.
		return out.Bytes(), fmt.Errorf("security %s: %w%s", args[0], err, msg)
	}
	return out.Bytes(), nil
}

// redact hides the keychain's and the p12's passwords in the tool's output.
func (k *SecurityKeychain) redact(msg string) string {
	for _, s := range k.secrets {
		if s != "" {
			msg = strings.ReplaceAll(msg, s, redactedMark)
		}
	}
	return msg
}

// profileFiles writes and removes provisioning profiles in a home.
type profileFiles interface {
	write(ctx context.Context, path string, data []byte) error
	remove(ctx context.Context, path string) error
}

// profileFilesOf is how profiles reach the home of the keychain's user:
// the build user's through the build user (this process cannot write its
// home), else directly.
func profileFilesOf(kc Keychain) profileFiles {
	if k, ok := kc.(*SecurityKeychain); ok && k.user != nil {
		return k
	}
	return localFiles{}
}

type localFiles struct{}

func (localFiles) write(_ context.Context, path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

func (localFiles) remove(_ context.Context, path string) error { return os.Remove(path) }

// write puts data at path as the build user: staged in the keychain's
// directory (shared with it), then copied by it.
func (k *SecurityKeychain) write(ctx context.Context, path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(k.path), "profile-")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = k.user.share(f.Name(), 0o640)
	}
	if err != nil {
		return err
	}
	return k.asUser(ctx, `mkdir -p "$(dirname "$1")" && cp "$2" "$1" && chmod 644 "$1"`, path, f.Name())
}

// remove removes path as the build user.
func (k *SecurityKeychain) remove(ctx context.Context, path string) error {
	return k.asUser(ctx, `rm -f "$1"`, path)
}

func (k *SecurityKeychain) asUser(ctx context.Context, script string, args ...string) error {
	cmd := k.user.command(ctx, "/bin/sh", append([]string{"sh", "-c", script, "sh"}, args...), k.env)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("as the build user %s: %w: %s", k.user.name, err, bytes.TrimSpace(out))
	}
	return nil
}

// signing is the installed signing material of an iOS build.
type signing struct {
	keychain Keychain
	identity string // the first signing identity's SHA-1
	profiles []installedProfile
	files    []string // installed profile files
}

// installedProfile is an installed provisioning profile and the target
// it was sent for ("" when it came in a certs zip, for whichever target
// its application identifier fits).
type installedProfile struct {
	target  string
	profile provisioning.Profile
}

// profileFor returns the profile that signs target: the one sent for it,
// else the certs zip's profile for its bundle identifier (exact before
// wildcard, the most specific wildcard first).
func (s *signing) profileFor(target, bundleID string) (provisioning.Profile, error) {
	var best *provisioning.Profile
	for i := range s.profiles {
		ip := &s.profiles[i]
		switch {
		case ip.target == target:
			return ip.profile, nil
		case ip.target != "" || !ip.profile.Matches(bundleID):
		case best == nil || ip.profile.BundleID == bundleID || (best.BundleID != bundleID && len(ip.profile.BundleID) > len(best.BundleID)):
			best = &ip.profile
		}
	}
	if best != nil {
		return *best, nil
	}
	var have []string
	for _, ip := range s.profiles {
		have = append(have, fmt.Sprintf("%q for %s", ip.profile.Name, orAny(ip.target, ip.profile.BundleID)))
	}
	return provisioning.Profile{}, fmt.Errorf("%w: no provisioning profile for target %q (bundle identifier %s); the credentials hold %s: add the target's profile to credentials.json (ios.%s)",
		errConfig, target, bundleID, strings.Join(have, ", "), target)
}

func orAny(target, bundleID string) string {
	if target != "" {
		return "target " + target
	}
	return bundleID
}

// signingMaterial is an iOS build's credentials as they arrive: per
// target from the build's credentials, or one certs zip (raw API).
type signingMaterial struct {
	keychainPassword string
	identities       []identityFile
	profiles         []targetProfile
}

type identityFile struct {
	p12      []byte
	password string
}

type targetProfile struct {
	target string // "": any target whose bundle identifier the profile fits
	raw    []byte
}

// materialFromCredentials takes a spec's per-target credentials; a
// certificate shared by several targets is imported once.
func materialFromCredentials(creds map[string]api.IOSTargetCredentials) signingMaterial {
	var m signingMaterial
	for _, name := range slices.Sorted(maps.Keys(creds)) {
		c := creds[name]
		m.profiles = append(m.profiles, targetProfile{target: name, raw: c.ProvisioningProfile})
		if !slices.ContainsFunc(m.identities, func(id identityFile) bool { return bytes.Equal(id.p12, c.Certificate) }) {
			m.identities = append(m.identities, identityFile{p12: c.Certificate, password: c.CertificatePassword})
		}
	}
	return m
}

// materialFromCerts takes a certs zip: one identity, profiles for any target.
func materialFromCerts(c api.CertsResponse) signingMaterial {
	m := signingMaterial{keychainPassword: c.KeychainPassword, identities: []identityFile{{p12: c.P12, password: c.P12Password}}}
	for _, raw := range c.ProvisioningProfiles {
		m.profiles = append(m.profiles, targetProfile{raw: raw})
	}
	return m
}

// profileDirs are where Xcode looks for provisioning profiles: the
// classic location and the one of Xcode 16+.
func profileDirs(home string) []string {
	return []string{
		filepath.Join(home, "Library", "MobileDevice", "Provisioning Profiles"),
		filepath.Join(home, "Library", "Developer", "Xcode", "UserData", "Provisioning Profiles"),
	}
}

// installSigning creates the keychain, imports the identities and
// installs the profiles. The returned cleanup deletes the keychain and the
// profiles; it must run on every path, and is returned (non-nil) even with
// an error.
func installSigning(ctx context.Context, kc Keychain, m signingMaterial, home string, log io.Writer) (*signing, func(context.Context) error, error) {
	s := &signing{keychain: kc}
	created := false
	files := profileFilesOf(kc)
	cleanup := func(ctx context.Context) error {
		var errs []error
		for _, f := range s.files {
			if err := files.remove(ctx, f); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
		}
		if created {
			if err := kc.Delete(ctx); err != nil {
				errs = append(errs, fmt.Errorf("delete the temporary keychain: %w", err))
			} else {
				fmt.Fprintf(log, "▸ deleted the temporary keychain\n")
			}
		}
		return errors.Join(errs...)
	}
	// Profiles are read first: a bad one fails the build before the
	// keychain exists.
	for _, tp := range m.profiles {
		p, err := provisioning.Parse(tp.raw)
		if err != nil {
			return nil, cleanup, fmt.Errorf("the provisioning profile of %s: %w", orAny(tp.target, "the certs zip"), err)
		}
		s.profiles = append(s.profiles, installedProfile{target: tp.target, profile: p})
	}
	password := m.keychainPassword
	if password == "" {
		b := make([]byte, 24)
		rand.Read(b) //nolint:errcheck // crypto/rand does not fail on supported platforms
		password = base64.RawURLEncoding.EncodeToString(b)
	}
	created = true // from here on a partial keychain may exist
	if err := kc.Create(ctx, password); err != nil {
		return nil, cleanup, fmt.Errorf("create the temporary keychain: %w", err)
	}
	for _, id := range m.identities {
		if err := kc.Import(ctx, id.p12, id.password, password); err != nil {
			return nil, cleanup, fmt.Errorf("import the signing certificate: %w", err)
		}
	}
	if err := kc.AddToSearchList(ctx); err != nil {
		return nil, cleanup, fmt.Errorf("add the keychain to the search list: %w", err)
	}
	id, err := kc.SigningIdentity(ctx)
	if err != nil {
		return nil, cleanup, fmt.Errorf("find the signing identity: %w", err)
	}
	s.identity = id
	fmt.Fprintf(log, "▸ signing identity %s imported into a temporary keychain\n", id)
	for _, ip := range s.profiles {
		p := ip.profile
		for _, dir := range profileDirs(home) {
			f := filepath.Join(dir, p.UUID+".mobileprovision")
			if err := files.write(ctx, f, p.Raw); err != nil {
				return nil, cleanup, fmt.Errorf("install provisioning profile: %w", err)
			}
			s.files = append(s.files, f)
		}
		fmt.Fprintf(log, "▸ installed provisioning profile %q (%s, %s, %s) for %s\n", p.Name, p.UUID, p.BundleID, p.Type, orAny(ip.target, "the targets it fits"))
	}
	return s, cleanup, nil
}
