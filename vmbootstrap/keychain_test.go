package vmbootstrap

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/internal/plist"
	"github.com/freeagent-build/freeagent/internal/provisioning"
	"github.com/freeagent-build/freeagent/internal/provisioning/provisioningtest"
)

const fakeIdentity = "0123456789ABCDEF0123456789ABCDEF01234567"

// fakeSecurity writes a stand-in for /usr/bin/security that records each
// invocation's argv (one line, arguments separated by \x1f) in log, keeps a
// copy of the imported p12, answers list-keychains and find-identity like
// the real tool, and fails the subcommand named in failOn, echoing its
// arguments (passwords included) to stderr as a careless tool might.
// invalid makes the imported identity invalid for that reason (e.g.
// CSSMERR_TP_NOT_TRUSTED): find-identity -v lists no valid identity and
// find-identity without -v lists it with the reason; "-" makes the p12
// hold no identity at all; "" leaves it valid.
// import parses its options as macOS's security does (import inputfile
// [-k keychain] [-t type] [-f format] [-w] [-P passphrase] [-a attr value]
// [-A] [-T appPath] [-x]; an unknown option is a usage error, exit 2) and
// writes "non-extractable" to log.x when -x was given.
func fakeSecurity(t testing.TB, dir, failOn, invalid string) (tool, log string) {
	t.Helper()
	tool = filepath.Join(dir, "security")
	log = filepath.Join(dir, "security.log")
	script := `#!/bin/sh
log='` + log + `'
{ for a in "$@"; do printf '%s\037' "$a"; done; printf '\n'; } >> "$log"
if [ "$1" = '` + failOn + `' ]; then echo "security: $1 failed for: $*" >&2; exit 1; fi
case "$1" in
list-keychains)
	if [ "$#" -eq 3 ]; then
		printf '    "/Users/admin/Library/Keychains/login.keychain-db"\n    "/Library/Keychains/System.keychain"\n'
	fi ;;
find-identity)
	# As macOS prints it: -v lists the valid identities only, without -v
	# every identity, an invalid one with its reason, then the valid ones.
	identity='  1) ` + fakeIdentity + ` "Apple Distribution: Example Ltd (TEAM123456)"'
	invalid='` + invalid + `'
	if [ "$2" = -v ]; then
		if [ -z "$invalid" ]; then printf '%s\n     1 valid identities found\n' "$identity"; else printf '     0 valid identities found\n'; fi
	else
		printf 'Policy: Code Signing\n  Matching identities\n'
		case $invalid in
		'') printf '%s\n     1 identities found\n\n  Valid identities only\n%s\n     1 valid identities found\n' "$identity" "$identity" ;;
		-) printf '     0 identities found\n\n  Valid identities only\n     0 valid identities found\n' ;;
		*) printf '%s (%s)\n     1 identities found\n\n  Valid identities only\n     0 valid identities found\n' "$identity" "$invalid" ;;
		esac
	fi ;;
import)
	file=$2; shift 2
	extractable=extractable
	while [ "$#" -gt 0 ]; do
		case "$1" in
		-k|-t|-f|-P|-T) [ "$#" -ge 2 ] || { echo "security: import: option $1 needs an argument" >&2; exit 2; }; shift 2 ;;
		-a) [ "$#" -ge 3 ] || { echo "security: import: -a needs a name and a value" >&2; exit 2; }; shift 3 ;;
		-w|-A) shift ;;
		-x) extractable=non-extractable; shift ;;
		*) echo "security: import: illegal option $1" >&2; exit 2 ;;
		esac
	done
	cp "$file" "$log.p12"
	echo "$extractable" > "$log.x" ;;
esac
exit 0
`
	writeExecutable(t, tool, script)
	return tool, log
}

// writeExecutable creates an executable file through a separate process.
// Written by this process, a concurrent fork (parallel tests start
// processes all the time) could inherit the open file and make exec fail
// with "text file busy" (golang/go#22315).
func writeExecutable(t testing.TB, path, content string) {
	t.Helper()
	src := path + ".src"
	if err := os.WriteFile(src, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(src)
	if out, err := exec.Command("install", "-m", "0755", src, path).CombinedOutput(); err != nil {
		t.Fatalf("install %s: %v: %s", path, err, out)
	}
}

func readCalls(t testing.TB, log string) [][]string {
	t.Helper()
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	var calls [][]string
	for _, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		calls = append(calls, strings.Split(strings.TrimSuffix(line, "\x1f"), "\x1f"))
	}
	return calls
}

// testProfile is a provisioning profile as Apple ships it: an
// indefinite-length CMS envelope around an XML plist; with devices it is
// an ad hoc profile, else an App Store one.
// testProfileFor is an ad hoc profile named name for bundle.
func testProfileFor(uuid, name, bundle string) []byte {
	p := provisioningtest.Profile{UUID: uuid, Name: name, TeamID: "TEAM123456", TeamName: "Example Ltd", AppID: "TEAM123456." + bundle,
		Devices: []string{"00008101-000A1B2C3D4E5F6A"}, Created: time.Now().Add(-24 * time.Hour), Expires: time.Now().Add(365 * 24 * time.Hour)}
	return provisioningtest.WrapBER(p.Plist(), 512)
}

func mustParse(raw []byte) provisioning.Profile {
	p, err := provisioning.Parse(raw)
	if err != nil {
		panic(err)
	}
	return p
}

func testProfile(uuid, bundle string, devices bool) []byte {
	p := provisioningtest.Profile{UUID: uuid, Name: "Example App Store & Co", TeamID: "TEAM123456", TeamName: "Example Ltd",
		AppID: "TEAM123456." + bundle, Created: time.Now().Add(-24 * time.Hour), Expires: time.Now().Add(365 * 24 * time.Hour)}
	if devices {
		p.Name, p.Devices = "Example Ad Hoc", []string{"00008101-000A1B2C3D4E5F6A"}
	}
	return provisioningtest.WrapBER(p.Plist(), 512)
}

// TestSecurityKeychainSequence drives the real SecurityKeychain against a
// fake security program and checks the exact commands, the installed
// profiles and the cleanup.
func TestSecurityKeychainSequence(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tool, log := fakeSecurity(t, dir, "", "")
	kcPath := filepath.Join(dir, "keychains", "freeagent-b1.keychain-db")
	home := filepath.Join(dir, "home")
	certs := api.CertsResponse{P12: []byte("P12-BYTES"), P12Password: "p12-secret", KeychainPassword: "kc-secret-123",
		ProvisioningProfiles: [][]byte{testProfile("9F2B3C4D-1111-2222-3333-444455556666", "com.example.app", false)}}
	var out bytes.Buffer
	s, cleanup, err := installSigning(context.Background(), NewSecurityKeychain(tool, kcPath), materialFromCerts(certs), home, &out)
	if err != nil {
		t.Fatal(err)
	}
	if s.identity != fakeIdentity || len(s.profiles) != 1 || s.profiles[0].profile.BundleID != "com.example.app" {
		t.Fatalf("signing %+v", s)
	}
	var installed []string
	for _, d := range profileDirs(home) {
		f := filepath.Join(d, "9F2B3C4D-1111-2222-3333-444455556666.mobileprovision")
		if b, err := os.ReadFile(f); err != nil || !bytes.Equal(b, certs.ProvisioningProfiles[0]) {
			t.Fatalf("profile not installed at %s: %v", f, err)
		}
		installed = append(installed, f)
	}
	if b, _ := os.ReadFile(log + ".p12"); string(b) != "P12-BYTES" {
		t.Fatalf("security imported %q", b)
	}
	if b, _ := os.ReadFile(log + ".x"); string(b) != "non-extractable\n" {
		t.Fatalf("the key was imported %q, want non-extractable (security import -x)", b)
	}
	if err := cleanup(context.Background()); err != nil {
		t.Fatal(err)
	}
	calls := readCalls(t, log)
	if len(calls) < 4 || len(calls[3]) < 2 {
		t.Fatalf("calls: %q", calls)
	}
	p12Path := calls[3][1]
	want := [][]string{
		{"create-keychain", "-p", "kc-secret-123", kcPath},
		{"set-keychain-settings", "-lut", "21600", kcPath},
		{"unlock-keychain", "-p", "kc-secret-123", kcPath},
		{"import", p12Path, "-k", kcPath, "-f", "pkcs12", "-P", "p12-secret", "-x", "-T", "/usr/bin/codesign", "-T", "/usr/bin/security"},
		{"set-key-partition-list", "-S", "apple-tool:,apple:,codesign:", "-s", "-k", "kc-secret-123", kcPath},
		{"list-keychains", "-d", "user"},
		{"list-keychains", "-d", "user", "-s", kcPath, "/Users/admin/Library/Keychains/login.keychain-db", "/Library/Keychains/System.keychain"},
		{"find-identity", "-v", "-p", "codesigning", kcPath},
		{"delete-keychain", kcPath},
	}
	if strings.Join(flatten(calls), "|") != strings.Join(flatten(want), "|") {
		t.Fatalf("security calls:\n%q\nwant:\n%q", calls, want)
	}
	if _, err := os.Stat(p12Path); !os.IsNotExist(err) {
		t.Fatalf("the p12 file %s was left behind: %v", p12Path, err)
	}
	for _, f := range installed {
		if _, err := os.Stat(f); !os.IsNotExist(err) {
			t.Fatalf("profile %s left installed", f)
		}
	}
	if strings.Contains(out.String(), "secret") {
		t.Fatalf("secrets in the log: %q", out.String())
	}
}

// TestSecurityKeychainDeletedOnFailure: a failing step still deletes the
// keychain, and the error carries no password.
func TestSecurityKeychainDeletedOnFailure(t *testing.T) {
	t.Parallel()
	for _, failOn := range []string{"create-keychain", "import", "set-key-partition-list", "find-identity"} {
		t.Run(failOn, func(t *testing.T) {
			dir := t.TempDir()
			tool, log := fakeSecurity(t, dir, failOn, "")
			kcPath := filepath.Join(dir, "k.keychain-db")
			certs := api.CertsResponse{P12: []byte("P12"), P12Password: "p12-secret", KeychainPassword: "kc-secret-123"}
			_, cleanup, err := installSigning(context.Background(), NewSecurityKeychain(tool, kcPath), materialFromCerts(certs), dir, &bytes.Buffer{})
			if err == nil {
				t.Fatal("no error")
			}
			if strings.Contains(err.Error(), "secret") || !strings.Contains(err.Error(), "security "+failOn) {
				t.Fatalf("error %q (must name the subcommand and no password)", err)
			}
			if err := cleanup(context.Background()); err != nil {
				t.Fatal(err)
			}
			calls := readCalls(t, log)
			if last := calls[len(calls)-1]; strings.Join(last, " ") != "delete-keychain "+kcPath {
				t.Fatalf("last call %q, want delete-keychain", last)
			}
		})
	}
}

// TestSigningIdentityInvalid: when find-identity -v lists no valid
// identity, the error names the one find-identity lists without -v, its
// reason and the fix (for a chain missing Apple's WWDR intermediate: the
// template), and still no password; with no identity at all, the p12 is
// to blame as before.
func TestSigningIdentityInvalid(t *testing.T) {
	t.Parallel()
	const name = `"Apple Distribution: Example Ltd (TEAM123456)"`
	for _, c := range []struct {
		reason string
		want   []string
	}{
		{"CSSMERR_TP_NOT_TRUSTED", []string{name, "(CSSMERR_TP_NOT_TRUSTED)", "the chain to Apple's root is incomplete", "WWDR intermediate", "scripts/build-vm-template.sh", "System keychain"}},
		{"CSSMERR_TP_CERT_EXPIRED", []string{name, "(CSSMERR_TP_CERT_EXPIRED)", "the certificate expired", "make a new distribution certificate", "eas credentials"}},
		{"CSSMERR_TP_CERT_REVOKED", []string{name, "(CSSMERR_TP_CERT_REVOKED)", "the certificate was revoked", "make a new distribution certificate", "eas credentials"}},
		{"CSSMERR_TP_CERT_NOT_VALID_YET", []string{name, "is not valid for code signing (CSSMERR_TP_CERT_NOT_VALID_YET)"}},
		{"-", []string{"holds no valid code-signing identity", "private key"}},
	} {
		t.Run(c.reason, func(t *testing.T) {
			dir := t.TempDir()
			tool, log := fakeSecurity(t, dir, "", c.reason)
			kcPath := filepath.Join(dir, "k.keychain-db")
			certs := api.CertsResponse{P12: []byte("P12"), P12Password: "p12-secret", KeychainPassword: "kc-secret-123"}
			_, cleanup, err := installSigning(context.Background(), NewSecurityKeychain(tool, kcPath), materialFromCerts(certs), dir, &bytes.Buffer{})
			if err == nil {
				t.Fatal("an invalid identity was accepted")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("error %q holds a password", err)
			}
			if err := cleanup(context.Background()); err != nil {
				t.Fatal(err)
			}
			calls := flatten(readCalls(t, log))
			want := []string{"find-identity -v -p codesigning " + kcPath, "find-identity -p codesigning " + kcPath, "delete-keychain " + kcPath}
			if len(calls) < 3 || strings.Join(calls[len(calls)-3:], "|") != strings.Join(want, "|") {
				t.Fatalf("security calls end with %q, want %q", calls, want)
			}
		})
	}
}

func flatten(calls [][]string) []string {
	var out []string
	for _, c := range calls {
		out = append(out, strings.Join(c, " "))
	}
	return out
}

func TestExportOptionsPlist(t *testing.T) {
	t.Parallel()
	got := string(exportOptionsPlist("app-store", "TEAM123456", map[string]string{"com.example.app": "UUID-1", "com.example.app.widget": "UUID-2"}))
	m, err := plist.Parse([]byte(got))
	if err != nil {
		t.Fatal(err)
	}
	d := m.(map[string]any)
	profiles := d["provisioningProfiles"].(map[string]any)
	if d["method"] != "app-store" || d["signingStyle"] != "manual" || d["teamID"] != "TEAM123456" ||
		profiles["com.example.app"] != "UUID-1" || profiles["com.example.app.widget"] != "UUID-2" {
		t.Fatalf("ExportOptions.plist:\n%s", got)
	}
}
