// Package provisioningtest makes real signing material for tests: X.509
// identities (a CA and the distribution certificates it issues) made with
// crypto/x509, and provisioning profiles signed by the real `openssl cms`
// or wrapped by Go in the indefinite-length BER Apple writes.
package provisioningtest

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"encoding/xml"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/internal/testsupport/testtool"
)

// Identity is a key and its certificate.
type Identity struct {
	Key  crypto.Signer
	Cert *x509.Certificate
	DER  []byte
}

// KeyPEM is the key in PKCS#8 PEM.
func (id Identity) KeyPEM(t testing.TB) []byte {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(id.Key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

// CertPEM is the certificate in PEM.
func (id Identity) CertPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: id.DER})
}

// NewIdentity makes an RSA 2048 key (Apple's distribution certificates
// are RSA) and a certificate for it valid from notBefore to notAfter,
// issued by issuer, or self-signed as a CA when issuer is nil.
func NewIdentity(t testing.TB, subject pkix.Name, notBefore, notAfter time.Time, issuer *Identity) Identity {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return newIdentity(t, key, subject, notBefore, notAfter, issuer)
}

// NewECIdentity is NewIdentity with a P-256 key (cheaper, for signers
// whose algorithm does not matter).
func NewECIdentity(t testing.TB, subject pkix.Name, notBefore, notAfter time.Time, issuer *Identity) Identity {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return newIdentity(t, key, subject, notBefore, notAfter, issuer)
}

func newIdentity(t testing.TB, key crypto.Signer, subject pkix.Name, notBefore, notAfter time.Time, issuer *Identity) Identity {
	t.Helper()
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 64))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      subject,
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
	parent, signer := tmpl, key
	if issuer == nil {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage |= x509.KeyUsageCertSign
	} else {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageCodeSigning}
		parent, signer = issuer.Cert, issuer.Key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), signer)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return Identity{Key: key, Cert: cert, DER: der}
}

// Profile is the content of a provisioning profile.
type Profile struct {
	UUID, Name, TeamID, TeamName string
	// AppID is the full application-identifier ("TEAMID.com.example.app").
	AppID string
	// Prefix is ApplicationIdentifierPrefix[0]; TeamID when empty.
	Prefix           string
	Created, Expires time.Time
	// Devices: nil leaves ProvisionedDevices out; an empty, non-nil
	// slice writes an empty array.
	Devices      []string
	AllDevices   bool
	GetTaskAllow bool
	Certificates [][]byte
}

// Plist renders the profile as Apple's XML property list.
func (p Profile) Plist() []byte {
	var b bytes.Buffer
	esc := func(s string) string {
		var e bytes.Buffer
		_ = xml.EscapeText(&e, []byte(s))
		return e.String()
	}
	str := func(k, v string) { fmt.Fprintf(&b, "\t<key>%s</key>\n\t<string>%s</string>\n", k, esc(v)) }
	date := func(k string, v time.Time) {
		fmt.Fprintf(&b, "\t<key>%s</key>\n\t<date>%s</date>\n", k, v.UTC().Format(time.RFC3339))
	}
	prefix := p.Prefix
	if prefix == "" {
		prefix = p.TeamID
	}
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<plist version="1.0">
<dict>
	<key>AppIDName</key>
	<string>XC Wildcard</string>
`)
	fmt.Fprintf(&b, "\t<key>ApplicationIdentifierPrefix</key>\n\t<array>\n\t<string>%s</string>\n\t</array>\n", esc(prefix))
	date("CreationDate", p.Created)
	b.WriteString("\t<key>Platform</key>\n\t<array>\n\t\t<string>iOS</string>\n\t\t<string>xrOS</string>\n\t</array>\n")
	b.WriteString("\t<key>IsXcodeManaged</key>\n\t<false/>\n")
	b.WriteString("\t<key>DeveloperCertificates</key>\n\t<array>\n")
	for _, c := range p.Certificates {
		fmt.Fprintf(&b, "\t\t<data>%s</data>\n", wrap76(base64.StdEncoding.EncodeToString(c)))
	}
	b.WriteString("\t</array>\n")
	b.WriteString("\t<key>DER-Encoded-Profile</key>\n\t<data>MIIN</data>\n")
	b.WriteString("\t<key>Entitlements</key>\n\t<dict>\n")
	fmt.Fprintf(&b, "\t\t<key>application-identifier</key>\n\t\t<string>%s</string>\n", esc(p.AppID))
	fmt.Fprintf(&b, "\t\t<key>keychain-access-groups</key>\n\t\t<array>\n\t\t\t<string>%s.*</string>\n\t\t</array>\n", esc(prefix))
	fmt.Fprintf(&b, "\t\t<key>get-task-allow</key>\n\t\t<%t/>\n", p.GetTaskAllow)
	fmt.Fprintf(&b, "\t\t<key>com.apple.developer.team-identifier</key>\n\t\t<string>%s</string>\n", esc(p.TeamID))
	b.WriteString("\t</dict>\n")
	date("ExpirationDate", p.Expires)
	str("Name", p.Name)
	if p.Devices != nil {
		b.WriteString("\t<key>ProvisionedDevices</key>\n\t<array>\n")
		for _, d := range p.Devices {
			fmt.Fprintf(&b, "\t\t<string>%s</string>\n", esc(d))
		}
		b.WriteString("\t</array>\n")
	}
	if p.AllDevices {
		b.WriteString("\t<key>ProvisionsAllDevices</key>\n\t<true/>\n")
	}
	fmt.Fprintf(&b, "\t<key>TeamIdentifier</key>\n\t<array>\n\t\t<string>%s</string>\n\t</array>\n", esc(p.TeamID))
	str("TeamName", p.TeamName)
	b.WriteString("\t<key>TimeToLive</key>\n\t<integer>365</integer>\n")
	str("UUID", p.UUID)
	b.WriteString("\t<key>Version</key>\n\t<integer>1</integer>\n</dict>\n</plist>\n")
	return b.Bytes()
}

func wrap76(s string) string {
	var b strings.Builder
	for len(s) > 76 {
		b.WriteString("\n\t\t" + s[:76])
		s = s[76:]
	}
	b.WriteString("\n\t\t" + s + "\n\t\t")
	return b.String()
}

// RequireOpenSSL returns openssl's path, failing the test when it is not
// installed.
func RequireOpenSSL(t testing.TB) string {
	t.Helper()
	return testtool.Path(t, "openssl")
}

// OpenSSL runs openssl with args in dir and returns its standard output.
func OpenSSL(t testing.TB, dir string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(RequireOpenSSL(t), args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("openssl %s: %v\n%s", strings.Join(args, " "), err, stderr.Bytes())
	}
	return out
}

// SignOpenSSL signs content as Apple signs a profile, with the real
// `openssl cms -sign -nodetach -outform DER`: DER with definite lengths,
// or with stream set, BER with indefinite lengths and the content in a
// constructed OCTET STRING.
func SignOpenSSL(t testing.TB, content []byte, signer Identity, stream bool) []byte {
	t.Helper()
	dir := t.TempDir()
	write := func(name string, data []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("content", content)
	write("signer.pem", signer.CertPEM())
	write("signer.key", signer.KeyPEM(t))
	args := []string{"cms", "-sign", "-nodetach", "-binary", "-outform", "DER",
		"-in", "content", "-signer", "signer.pem", "-inkey", "signer.key", "-out", "signed"}
	if stream {
		args = append(args, "-stream")
	}
	OpenSSL(t, dir, args...)
	out, err := os.ReadFile(filepath.Join(dir, "signed"))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// WrapBER wraps content in a CMS SignedData the way Apple's profiles are
// laid out, every constructed element with an indefinite length and the
// content split into chunk-byte OCTET STRING segments. It has no
// signers: readers of the content do not look at them.
func WrapBER(content []byte, chunk int) []byte {
	indef := func(tag byte, parts ...[]byte) []byte {
		out := []byte{tag, 0x80}
		for _, p := range parts {
			out = append(out, p...)
		}
		return append(out, 0, 0)
	}
	var segments [][]byte
	for len(content) > 0 {
		n := min(chunk, len(content))
		segments = append(segments, tlv(0x04, content[:n]))
		content = content[n:]
	}
	oidSignedData := tlv(0x06, []byte{0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x07, 0x02})
	oidData := tlv(0x06, []byte{0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x07, 0x01})
	sha256Alg := tlv(0x30, append(tlv(0x06, []byte{0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x01}), 0x05, 0x00))
	signedData := indef(0x30,
		tlv(0x02, []byte{1}),
		tlv(0x31, sha256Alg),
		indef(0x30, oidData, indef(0xa0, indef(0x24, segments...))),
		tlv(0x31, nil),
	)
	return indef(0x30, oidSignedData, indef(0xa0, signedData))
}

// tlv is a DER element with a definite length.
func tlv(tag byte, content []byte) []byte {
	out := []byte{tag}
	switch n := len(content); {
	case n < 0x80:
		out = append(out, byte(n))
	case n < 0x100:
		out = append(out, 0x81, byte(n))
	case n < 0x10000:
		out = append(out, 0x82, byte(n>>8), byte(n))
	default:
		out = append(out, 0x83, byte(n>>16), byte(n>>8), byte(n))
	}
	return append(out, content...)
}
