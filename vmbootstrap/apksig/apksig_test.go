package apksig

import (
	"archive/zip"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/freeagent-build/freeagent/internal/testsupport/testtool"
)

func run(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(testtool.Path(t, name), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// testKey is a keystore made by keytool.
type testKey struct {
	file, alias, storePw, keyPw string
}

func newKey(t testing.TB, dir, alias, keyalg string, size int, dname string) testKey {
	k := testKey{file: filepath.Join(dir, alias+".jks"), alias: alias, storePw: "store-" + alias, keyPw: "key-" + alias}
	run(t, "keytool", "-genkeypair", "-keystore", k.file, "-storetype", "JKS", "-storepass", k.storePw, "-keypass", k.keyPw,
		"-alias", alias, "-keyalg", keyalg, "-keysize", fmt.Sprint(size), "-validity", "10000", "-dname", dname)
	return k
}

// unsignedZip writes a small archive standing in for an APK or AAB: a
// real AndroidManifest is not needed with --min-sdk-version.
func unsignedZip(t testing.TB, file string) {
	t.Helper()
	entries := []struct {
		name string
		body string
		m    uint16
	}{
		{"AndroidManifest.xml", "<manifest/>", zip.Store},
		{"classes.dex", strings.Repeat("dex\x00", 50), zip.Deflate},
		{"assets/index.android.bundle", "console.log('hi')", zip.Deflate},
	}
	if !smallArtifacts {
		// More than 1 MiB: several chunks of the content digest.
		entries = append(entries, struct {
			name string
			body string
			m    uint16
		}{"res/raw/big.bin", strings.Repeat("0123456789abcdef", 80_000), zip.Store})
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range entries {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: e.name, Method: e.m})
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprint(w, e.body)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// signAPK zipaligns and signs with the real apksigner.
func signAPK(t testing.TB, dir, name string, v1, v2, v3 bool, keys ...testKey) string {
	t.Helper()
	unsigned, aligned, out := filepath.Join(dir, name+".unsigned.zip"), filepath.Join(dir, name+".aligned.apk"), filepath.Join(dir, name+".apk")
	unsignedZip(t, unsigned)
	run(t, "zipalign", "-f", "4", unsigned, aligned)
	args := []string{"sign", "--min-sdk-version", "24",
		"--v1-signing-enabled", fmt.Sprint(v1), "--v2-signing-enabled", fmt.Sprint(v2),
		"--v3-signing-enabled", fmt.Sprint(v3), "--v4-signing-enabled", "false", "--out", out}
	for i, k := range keys {
		if i > 0 {
			args = append(args, "--next-signer")
		}
		args = append(args, "--ks", k.file, "--ks-pass", "pass:"+k.storePw, "--ks-key-alias", k.alias, "--key-pass", "pass:"+k.keyPw)
	}
	run(t, "apksigner", append(args, aligned)...)
	return out
}

// signAAB signs with the real jarsigner, as bundletool's users do.
func signAAB(t testing.TB, dir, name string, k testKey) string {
	t.Helper()
	out := filepath.Join(dir, name+".aab")
	unsignedZip(t, out)
	run(t, "jarsigner", "-keystore", k.file, "-storepass", k.storePw, "-keypass", k.keyPw, out, k.alias)
	return out
}

var (
	apksignerCert = regexp.MustCompile(`(?m)^Signer #\d+ certificate SHA-256 digest: ([0-9a-f]+)$`)
	apksignerDN   = regexp.MustCompile(`(?m)^Signer #\d+ certificate DN: (.+)$`)
	apksignerUses = regexp.MustCompile(`(?m)^Verified using (v\d) scheme .*: (true|false)$`)
	keytoolSHA256 = regexp.MustCompile(`(?m)^\s*SHA256: ([0-9A-F:]+)$`)
	keytoolOwner  = regexp.MustCompile(`(?m)^Owner: (.+)$`)
)

type verdict struct {
	schemes  []string // schemes apksigner verified, "v1".."v3"
	sha256s  []string
	subjects []string
}

func apksignerVerify(t testing.TB, file string) verdict {
	out := run(t, "apksigner", "verify", "--print-certs", "--min-sdk-version", "24", "-v", file)
	var v verdict
	for _, m := range apksignerUses.FindAllStringSubmatch(out, -1) {
		if m[2] == "true" {
			v.schemes = append(v.schemes, m[1])
		}
	}
	for _, m := range apksignerCert.FindAllStringSubmatch(out, -1) {
		v.sha256s = append(v.sha256s, m[1])
	}
	for _, m := range apksignerDN.FindAllStringSubmatch(out, -1) {
		v.subjects = append(v.subjects, strings.ReplaceAll(m[1], ", ", ","))
	}
	return v
}

func keytoolPrintcert(t testing.TB, file string) verdict {
	out := run(t, "keytool", "-printcert", "-jarfile", file)
	var v verdict
	for _, m := range keytoolSHA256.FindAllStringSubmatch(out, -1) {
		v.sha256s = append(v.sha256s, strings.ToLower(strings.ReplaceAll(m[1], ":", "")))
	}
	for _, m := range keytoolOwner.FindAllStringSubmatch(out, -1) {
		v.subjects = append(v.subjects, strings.ReplaceAll(m[1], ", ", ","))
	}
	return v
}

// TestDifferential signs artifacts with the real tools and compares our
// reading with apksigner's (APKs) and keytool's (AABs).
func TestDifferential(t *testing.T) {
	dir := t.TempDir()
	rsa := newKey(t, dir, "upload", "RSA", 2048, "CN=Upload, O=Acme, C=US")
	rsaBig := newKey(t, dir, "bigrsa", "RSA", 4096, "CN=Big RSA") // apksigner picks SHA-512 for it
	ec := newKey(t, dir, "eckey", "EC", 256, "CN=EC Upload, OU=Mobile")
	ecBig := newKey(t, dir, "ec384", "EC", 384, "CN=EC 384")

	apks := []struct {
		name       string
		v1, v2, v3 bool
		keys       []testKey
		scheme     Scheme
	}{
		{"rsa-v1v2v3", true, true, true, []testKey{rsa}, SchemeV3},
		{"rsa-v2", false, true, false, []testKey{rsa}, SchemeV2},
		{"rsa-v1", true, false, false, []testKey{rsa}, SchemeV1},
		{"ec-v1v2v3", true, true, true, []testKey{ec}, SchemeV3},
		{"ec-v2", false, true, false, []testKey{ec}, SchemeV2},
		{"ec-v1", true, false, false, []testKey{ec}, SchemeV1},
		{"rsa4096-v1v2v3", true, true, true, []testKey{rsaBig}, SchemeV3},
		{"ec384-v2v3", false, true, true, []testKey{ecBig}, SchemeV3},
		{"two-signers-v1v2", true, true, false, []testKey{rsa, ec}, SchemeV2},
	}
	for _, c := range apks {
		t.Run(c.name, func(t *testing.T) {
			file := signAPK(t, dir, c.name, c.v1, c.v2, c.v3, c.keys...)
			want := apksignerVerify(t, file)
			got, err := SignerCertificates(file)
			if err != nil {
				t.Fatal(err)
			}
			if got.Scheme != c.scheme {
				t.Errorf("scheme %q, want %q (apksigner verified %v)", got.Scheme, c.scheme, want.schemes)
			}
			if wantScheme := map[Scheme]string{SchemeV1: "v1", SchemeV2: "v2", SchemeV3: "v3"}[got.Scheme]; !slices.Contains(want.schemes, wantScheme) {
				t.Errorf("we report %s, which apksigner did not verify (%v)", got.Scheme, want.schemes)
			}
			assertSigners(t, got, want)
		})
	}
	for _, k := range []testKey{rsa, ec} {
		t.Run("aab-"+k.alias, func(t *testing.T) {
			file := signAAB(t, dir, "bundle-"+k.alias, k)
			want := keytoolPrintcert(t, file)
			got, err := SignerCertificates(file)
			if err != nil {
				t.Fatal(err)
			}
			if got.Scheme != SchemeV1 {
				t.Errorf("scheme %q", got.Scheme)
			}
			assertSigners(t, got, want)
		})
	}
}

func assertSigners(t *testing.T, got Signers, want verdict) {
	t.Helper()
	var sums, subjects []string
	for _, s := range got.Signers {
		sums = append(sums, s.SHA256)
		subjects = append(subjects, s.Subject)
	}
	if len(want.sha256s) == 0 || !slices.Equal(sorted(sums), sorted(want.sha256s)) {
		t.Errorf("certificates %v, the tool says %v", sums, want.sha256s)
	}
	if !slices.Equal(sorted(subjects), sorted(want.subjects)) {
		t.Errorf("subjects %q, the tool says %q", subjects, want.subjects)
	}
}

func sorted(s []string) []string { s = slices.Clone(s); slices.Sort(s); return s }

func TestRejects(t *testing.T) {
	dir := t.TempDir()
	k := newKey(t, dir, "upload", "RSA", 2048, "CN=Upload")

	t.Run("unsigned", func(t *testing.T) {
		file := filepath.Join(dir, "unsigned.apk")
		unsignedZip(t, file)
		_, err := SignerCertificates(file)
		if !errors.Is(err, ErrNotSigned) || !strings.Contains(err.Error(), "unsigned.apk: not signed") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("not a zip", func(t *testing.T) {
		file := filepath.Join(dir, "text.apk")
		os.WriteFile(file, []byte(strings.Repeat("not a zip at all\n", 100)), 0o644)
		if _, err := SignerCertificates(file); !errors.Is(err, ErrNotZip) {
			t.Fatalf("err = %v", err)
		}
		empty := filepath.Join(dir, "empty.aab")
		os.WriteFile(empty, nil, 0o644)
		if _, err := SignerCertificates(empty); !errors.Is(err, ErrNotZip) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("v2 APK modified after signing", func(t *testing.T) {
		file := signAPK(t, dir, "tampered", false, true, false, k)
		b, _ := os.ReadFile(file)
		i := bytes.Index(b, []byte("0123456789abcdef"))
		b[i] = 'X' // inside the stored big.bin entry
		os.WriteFile(file, b, 0o644)
		if out, err := exec.Command("apksigner", "verify", "--min-sdk-version", "24", file).CombinedOutput(); err == nil {
			t.Fatalf("apksigner accepts the tampered APK:\n%s", out)
		}
		_, err := SignerCertificates(file)
		if err == nil || !strings.Contains(err.Error(), "do not match the signed digest") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("v2 signature modified", func(t *testing.T) {
		file := signAPK(t, dir, "badsig", false, true, false, k)
		b, _ := os.ReadFile(file)
		z, err := locateZip(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatal(err)
		}
		block, err := z.signingBlock()
		if err != nil {
			t.Fatal(err)
		}
		signer := &lpReader{b: block[blockIDv2]}
		signer = &lpReader{b: signer.sequence()[0]}
		signer.prefixed() // signed data
		sig := &lpReader{b: signer.sequence()[0]}
		sig.u32() // algorithm
		at := bytes.Index(b, sig.prefixed())
		if signer.err != nil || sig.err != nil || at < 0 {
			t.Fatalf("cannot find the signature: %v %v", signer.err, sig.err)
		}
		b[at+10] ^= 0x01
		_, err = Read(bytes.NewReader(b), int64(len(b)))
		if err == nil || !strings.Contains(err.Error(), "does not verify") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("v1 .SF modified", func(t *testing.T) {
		file := signAAB(t, dir, "tampered-sf", k)
		rewriteEntry(t, file, "META-INF/UPLOAD.SF", func(b []byte) []byte { return append(b, "Extra: yes\r\n"...) })
		_, err := SignerCertificates(file)
		// jarsigner signs attributes that carry the .SF's digest.
		if err == nil || !strings.Contains(err.Error(), "META-INF/UPLOAD.RSA: the .SF file does not match the digest its signature covers") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("v1 manifest modified", func(t *testing.T) {
		file := signAAB(t, dir, "tampered-mf", k)
		rewriteEntry(t, file, "META-INF/MANIFEST.MF", func(b []byte) []byte { return append(b, "Name: evil\r\n\r\n"...) })
		_, err := SignerCertificates(file)
		if err == nil || !strings.Contains(err.Error(), "manifest was modified") {
			t.Fatalf("err = %v", err)
		}
	})
}

// rewriteEntry copies a zip with one entry's content changed.
func rewriteEntry(t *testing.T, file, name string, change func([]byte) []byte) {
	t.Helper()
	zr, err := zip.OpenReader(file)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		var body bytes.Buffer
		body.ReadFrom(rc)
		rc.Close()
		b := body.Bytes()
		if f.Name == name {
			b = change(b)
		}
		w, err := zw.CreateHeader(&zip.FileHeader{Name: f.Name, Method: f.Method})
		if err != nil {
			t.Fatal(err)
		}
		w.Write(b)
	}
	zr.Close()
	zw.Close()
	if err := os.WriteFile(file, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}
