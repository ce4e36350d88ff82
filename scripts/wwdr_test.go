package scripts

import (
	"crypto/sha1"
	"crypto/x509/pkix"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/internal/provisioning/provisioningtest"
)

// wwdrStubs are the guest's commands the template's WWDR step runs (openssl
// is the real one), logging to $LOG. curl serves $CERTS/<file name> and
// fails for a file not there; security verify-cert checks the certificate
// against $ROOTS with openssl verify, the System keychain is $SYSTEM (one
// SHA-1 a line) and add-certificates adds to it.
var wwdrStubs = map[string]string{
	"sudo": `[ "$1" = -n ] && shift; echo "sudo $*" >>"$LOG"; exec "$@"`,
	"curl": `for a; do url=$a; done; echo "curl $url" >>"$LOG"
while [ $# -gt 0 ]; do [ "$1" = -o ] && out=$2; shift; done
[ -f "$CERTS/${url##*/}" ] && cp "$CERTS/${url##*/}" "$out"`,
	"security": `echo "security $*" >>"$LOG"
case $1 in
verify-cert) openssl x509 -inform DER -in "$3" -out "$3.pem" && openssl verify -CAfile "$ROOTS" "$3.pem" ;;
find-certificate) [ "$4" = /Library/Keychains/System.keychain ] && sed 's/^/SHA-1 hash: /' "$SYSTEM" ;;
add-certificates) [ "$2" = -k ] && [ "$3" = /Library/Keychains/System.keychain ] &&
	openssl x509 -inform DER -in "$4" -noout -fingerprint -sha1 | sed 's/.*=//; s/://g' >>"$SYSTEM" ;;
*) exit 1 ;;
esac`,
}

// TestTemplateWWDR runs the WWDR step of build-vm-template.sh with the
// guest's commands stubbed: Apple's intermediates reach the System keychain
// (through sudo, where every user finds them) only when they are the WWDR
// authority and verify against an Apple root; one already there counts; an
// iOS template gets none and the build dies naming the fix; a template
// without iOS skips the step.
func TestTemplateWWDR(t *testing.T) {
	openssl := provisioningtest.RequireOpenSSL(t)
	script, err := os.ReadFile("build-vm-template.sh")
	if err != nil {
		t.Fatal(err)
	}
	var step []string
	for _, l := range strings.Split(string(script), "\n") {
		if strings.HasPrefix(l, "wwdr_certs=") || len(step) > 0 {
			step = append(step, l)
			if l == "fi" {
				break
			}
		}
	}
	if len(step) == 0 || step[len(step)-1] != "fi" {
		t.Fatal("build-vm-template.sh: the WWDR step (wwdr_certs=… through its fi) is not where this test looks")
	}

	year := time.Now().Add(-time.Hour)
	apple := func(cn, ou string) pkix.Name {
		return pkix.Name{Country: []string{"US"}, Organization: []string{"Apple Inc."}, OrganizationalUnit: []string{ou}, CommonName: cn}
	}
	root := provisioningtest.NewECIdentity(t, apple("Apple Root CA", "Apple Certification Authority"), year, year.AddDate(10, 0, 0), nil)
	// The same name, another key: its certificates do not verify.
	forger := provisioningtest.NewECIdentity(t, apple("Apple Root CA", "Apple Certification Authority"), year, year.AddDate(10, 0, 0), nil)
	const wwdrName = "Apple Worldwide Developer Relations Certification Authority"
	wwdr := func(gen string, issuer *provisioningtest.Identity) []byte {
		return provisioningtest.NewECIdentity(t, apple(wwdrName, gen), year, year.AddDate(5, 0, 0), issuer).DER
	}
	g3, g4, g5, g6 := wwdr("G3", &root), wwdr("G4", &root), wwdr("G5", &root), wwdr("G6", &root)
	sha := func(der []byte) string { return fmt.Sprintf("%X", sha1.Sum(der)) }

	for _, c := range []struct {
		name      string
		platforms string
		certs     map[string][]byte
		system    []string // SHA-1s in the System keychain before
		wantOK    bool
		wantOut   []string
		wantAdded []string // SHA-1s added, in order
	}{
		{"all four", "ios,android", map[string][]byte{"G3": g3, "G4": g4, "G5": g5, "G6": g6}, nil,
			true, []string{"in the System keychain: G3 G4 G5 G6"}, []string{sha(g3), sha(g4), sha(g5), sha(g6)}},
		{"checked one by one", "ios", map[string][]byte{
			"G3": g3,                  // already in the System keychain
			"G4": wwdr("G4", &forger), // Apple's names, another key
			"G5": g5,
			"G6": provisioningtest.NewECIdentity(t, apple("Developer ID Certification Authority", "G2"), year, year.AddDate(5, 0, 0), &root).DER,
		}, []string{sha(g3)},
			true, []string{"in the System keychain: G3 G5", "AppleWWDRCAG4.cer does not verify", "AppleWWDRCAG6.cer is not Apple's WWDR intermediate"}, []string{sha(g5)}},
		{"none can be had", "ios", map[string][]byte{"G4": wwdr("G4", &forger)}, nil,
			false, []string{"cannot download AppleWWDRCAG3.cer", "none of Apple's WWDR intermediate certificates", "https://www.apple.com/certificateauthority/"}, nil},
		{"no iOS", "android", map[string][]byte{"G3": g3}, nil, true, nil, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			bin, certs := filepath.Join(dir, "bin"), filepath.Join(dir, "certs")
			for _, d := range []string{bin, certs} {
				if err := os.Mkdir(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			for name, text := range wwdrStubs {
				if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/bash\n"+text+"\n"), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			for gen, der := range c.certs {
				if err := os.WriteFile(filepath.Join(certs, "AppleWWDRCA"+gen+".cer"), der, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			log, system, roots := filepath.Join(dir, "log"), filepath.Join(dir, "system"), filepath.Join(dir, "roots.pem")
			if err := os.WriteFile(system, []byte(strings.Join(append(c.system, ""), "\n")), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(roots, root.CertPEM(), 0o644); err != nil {
				t.Fatal(err)
			}
			run := `set -euo pipefail
platforms=` + c.platforms + `
guest() { PATH="` + bin + `:` + filepath.Dir(openssl) + `:$PATH" bash -c "$1"; }
die() { echo "die: $*" >&2; exit 1; }
` + strings.Join(step, "\n") + "\n"
			cmd := exec.Command("bash", "-c", run)
			cmd.Env = append(os.Environ(), "LOG="+log, "CERTS="+certs, "SYSTEM="+system, "ROOTS="+roots)
			out, err := cmd.CombinedOutput()
			logged, _ := os.ReadFile(log)
			if (err == nil) != c.wantOK {
				t.Fatalf("exit %v, want success %v; output:\n%s\nlog:\n%s", err, c.wantOK, out, logged)
			}
			for _, w := range c.wantOut {
				if !strings.Contains(string(out), w) {
					t.Errorf("the output lacks %q:\n%s", w, out)
				}
			}
			have, _ := os.ReadFile(system)
			if added := strings.Fields(strings.TrimPrefix(string(have), strings.Join(append(c.system, ""), "\n"))); strings.Join(added, " ") != strings.Join(c.wantAdded, " ") {
				t.Errorf("added to the System keychain %q, want %q; log:\n%s", added, c.wantAdded, logged)
			}
			for _, line := range strings.Split(string(logged), "\n") {
				switch {
				case strings.HasPrefix(line, "curl ") && !strings.HasPrefix(line, "curl https://www.apple.com/certificateauthority/AppleWWDRCAG"):
					t.Errorf("downloaded from elsewhere than Apple: %s", line)
				case strings.HasPrefix(line, "security add-certificates") && !strings.Contains(string(logged), "sudo "+line):
					t.Errorf("%s ran without sudo", line)
				}
			}
			if c.platforms == "android" && len(logged) > 0 {
				t.Errorf("a template without iOS ran the WWDR step:\n%s", logged)
			}
		})
	}
}
