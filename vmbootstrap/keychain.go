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
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/freeagent-build/freeagent/controller/api"
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
// runs. The VM is single-user and destroyed after the build, the keychain
// password is random and per build, and the build's own processes start only
// after these calls. They never appear in this program's logs or errors:
// error messages name the subcommand only and redact the tool's output.
type SecurityKeychain struct {
	tool    string
	path    string
	secrets []string
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
	if _, err := k.security(ctx, "import", p12Path, "-k", k.path, "-f", "pkcs12", "-P", p12Password,
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

// SigningIdentity implements Keychain. find-identity prints lines like
//
//  1. 0123…CDEF "Apple Distribution: Example Ltd (TEAM123456)"
func (k *SecurityKeychain) SigningIdentity(ctx context.Context) (string, error) {
	out, err := k.security(ctx, "find-identity", "-v", "-p", "codesigning", k.path)
	if err != nil {
		return "", err
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && strings.HasSuffix(f[0], ")") && len(f[1]) == 40 && validUUID(f[1]) {
			return f[1], nil
		}
	}
	return "", errors.New("the signing certificate holds no valid code-signing identity (is the .p12 a distribution certificate with its private key, and not expired?)")
}

// Delete implements Keychain.
func (k *SecurityKeychain) Delete(ctx context.Context) error {
	_, err := k.security(ctx, "delete-keychain", k.path)
	return err
}

func (k *SecurityKeychain) security(ctx context.Context, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, k.tool, args...)
	cmd.Stdin = nil
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		msg := strings.TrimSpace(out.String())
		for _, s := range k.secrets {
			if s != "" {
				msg = strings.ReplaceAll(msg, s, redactedMark)
			}
		}
		if msg != "" {
			msg = ": " + msg
		}
		// args[0] is the subcommand; the other arguments may hold passwords.
		return out.Bytes(), fmt.Errorf("security %s: %w%s", args[0], err, msg)
	}
	return out.Bytes(), nil
}

// signing is the installed signing material of an iOS build.
type signing struct {
	keychain Keychain
	identity string
	profiles []ProvisioningProfile
	files    []string // installed profile files
}

// profileDirs are where Xcode looks for provisioning profiles: the
// classic location and the one of Xcode 16+.
func profileDirs(home string) []string {
	return []string{
		filepath.Join(home, "Library", "MobileDevice", "Provisioning Profiles"),
		filepath.Join(home, "Library", "Developer", "Xcode", "UserData", "Provisioning Profiles"),
	}
}

// installSigning creates the keychain, imports the identity and installs
// the profiles. The returned cleanup deletes the keychain and the profiles;
// it must run on every path, and is returned (non-nil) even with an error.
func installSigning(ctx context.Context, kc Keychain, certs api.CertsResponse, home string, log io.Writer) (*signing, func(context.Context) error, error) {
	s := &signing{keychain: kc}
	created := false
	cleanup := func(ctx context.Context) error {
		var errs []error
		for _, f := range s.files {
			if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
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
	password := certs.KeychainPassword
	if password == "" {
		b := make([]byte, 24)
		rand.Read(b) //nolint:errcheck // crypto/rand does not fail on supported platforms
		password = base64.RawURLEncoding.EncodeToString(b)
	}
	created = true // from here on a partial keychain may exist
	if err := kc.Create(ctx, password); err != nil {
		return nil, cleanup, fmt.Errorf("create the temporary keychain: %w", err)
	}
	if err := kc.Import(ctx, certs.P12, certs.P12Password, password); err != nil {
		return nil, cleanup, fmt.Errorf("import the signing certificate: %w", err)
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
	for _, raw := range certs.ProvisioningProfiles {
		p := ParseProvisioningProfile(raw)
		for _, dir := range profileDirs(home) {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return nil, cleanup, fmt.Errorf("install provisioning profile: %w", err)
			}
			f := filepath.Join(dir, p.UUID+".mobileprovision")
			if err := os.WriteFile(f, raw, 0o644); err != nil {
				return nil, cleanup, fmt.Errorf("install provisioning profile: %w", err)
			}
			s.files = append(s.files, f)
		}
		s.profiles = append(s.profiles, p)
		fmt.Fprintf(log, "▸ installed provisioning profile %q (%s, %s, %s)\n", p.Name, p.UUID, p.BundleID, p.Method)
	}
	return s, cleanup, nil
}
