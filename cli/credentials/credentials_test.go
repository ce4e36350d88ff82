package credentials

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/freeagent-build/freeagent/internal/testsupport/testtool"
)

// The keystores are made by the real keytool, once per test binary: a JVM
// start costs about a second.
type keystoreFixture struct {
	file     string // absolute path
	typ      string
	storePw  string
	entries  []fixtureKey
	describe string
}

type fixtureKey struct {
	alias, keyPw, keyalg, dname string
}

var fixtureOnce struct {
	sync.Once
	dir      string
	stores   []keystoreFixture
	err      error
	teardown func()
}

func keytool(t testing.TB, args ...string) string {
	t.Helper()
	out, err := exec.Command(testtool.Path(t, "keytool"), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("keytool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func TestMain(m *testing.M) {
	code := m.Run()
	if fixtureOnce.dir != "" {
		os.RemoveAll(fixtureOnce.dir)
	}
	os.Exit(code)
}

func fixtures(t *testing.T) []keystoreFixture {
	t.Helper()
	testtool.Path(t, "keytool")
	fixtureOnce.Do(func() {
		dir, err := os.MkdirTemp("", "credentials-test")
		if err != nil {
			fixtureOnce.err = err
			return
		}
		fixtureOnce.dir = dir
		stores := []keystoreFixture{
			{file: "upload.jks", typ: TypeJKS, storePw: "store-pass-1", describe: "JKS, RSA key with its own password, EC key", entries: []fixtureKey{
				{alias: "upload", keyPw: "key-pass-22", keyalg: "RSA", dname: "CN=Upload Key, O=Acme Inc, C=US"},
				{alias: "second", keyPw: "store-pass-1", keyalg: "EC", dname: "CN=Second"},
			}},
			{file: "eas.jks", typ: TypeJKS, storePw: "été-ünïcode", describe: "JKS, non-ASCII password, EC key with its own password", entries: []fixtureKey{
				{alias: "ec", keyPw: "another-one", keyalg: "EC", dname: "CN=EC Key, OU=Mobile"},
			}},
			{file: "upload.p12", typ: TypePKCS12, storePw: "p12-pass-3", describe: "PKCS12, RSA and EC keys", entries: []fixtureKey{
				{alias: "release", keyPw: "p12-pass-3", keyalg: "RSA", dname: "CN=Release, O=Acme"},
				{alias: "ec-key", keyPw: "p12-pass-3", keyalg: "EC", dname: "CN=Release EC"},
			}},
		}
		for i := range stores {
			s := &stores[i]
			s.file = filepath.Join(dir, s.file)
			for _, k := range s.entries {
				args := []string{"-genkeypair", "-keystore", s.file, "-storetype", s.typ, "-storepass", s.storePw,
					"-alias", k.alias, "-keyalg", k.keyalg, "-validity", "10000", "-dname", k.dname}
				if s.typ == TypeJKS {
					args = append(args, "-keypass", k.keyPw)
				}
				if k.keyalg == "RSA" {
					args = append(args, "-keysize", "2048")
				}
				keytool(t, args...)
			}
		}
		fixtureOnce.stores = stores
	})
	if fixtureOnce.err != nil {
		t.Fatal(fixtureOnce.err)
	}
	return fixtureOnce.stores
}

var sha256Line = regexp.MustCompile(`(?m)^\s*SHA256:\s*([0-9A-F:]+)\s*$`)
var ownerLine = regexp.MustCompile(`(?m)^Owner:\s*(.+)$`)

// TestFingerprintsMatchKeytool is the differential test: for every key of
// every keystore, our certificate SHA-256 and subject equal what
// `keytool -list -v` prints for that alias.
func TestFingerprintsMatchKeytool(t *testing.T) {
	cases := 0
	for _, s := range fixtures(t) {
		raw, err := os.ReadFile(s.file)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range s.entries {
			out := keytool(t, "-list", "-v", "-keystore", s.file, "-storepass", s.storePw, "-alias", k.alias)
			m := sha256Line.FindStringSubmatch(out)
			o := ownerLine.FindStringSubmatch(out)
			if m == nil || o == nil {
				t.Fatalf("keytool -list -v printed no SHA256/Owner line:\n%s", out)
			}
			want := strings.ToLower(strings.ReplaceAll(m[1], ":", ""))
			// Upper-case alias: Java looks aliases up case-insensitively.
			info, err := ValidateKeystore(raw, s.storePw, strings.ToUpper(k.alias), k.keyPw)
			if err != nil {
				t.Fatalf("%s (%s) alias %s: %v", s.file, s.describe, k.alias, err)
			}
			if info.CertificateSHA256 != want {
				t.Errorf("%s alias %s: sha256 %s, keytool says %s", s.file, k.alias, info.CertificateSHA256, want)
			}
			if info.Type != s.typ {
				t.Errorf("%s: type %q, want %q", s.file, info.Type, s.typ)
			}
			if got, want := info.Subject, strings.ReplaceAll(strings.TrimSpace(o[1]), ", ", ","); got != want {
				t.Errorf("%s alias %s: subject %q, keytool's owner %q", s.file, k.alias, got, want)
			}
			cases++
		}
	}
	if cases != 5 {
		t.Fatalf("compared %d keys, want 5", cases)
	}
}

// writeApp makes an app directory with the keystore copied to
// android/keystores/ and a credentials.json with the given keystore block.
func writeApp(t *testing.T, keystore []byte, ksName string, block map[string]any) string {
	t.Helper()
	dir := t.TempDir()
	if keystore != nil {
		if err := os.MkdirAll(filepath.Join(dir, "android/keystores"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "android/keystores", ksName), keystore, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	data, err := json.MarshalIndent(map[string]any{"android": map[string]any{"keystore": block}}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, FileName), data, 0o600); err != nil {
		t.Fatal(err)
	}
	// The keystore is gitignored, as eas credentials leaves it; Android()
	// reads it regardless.
	if err := os.WriteFile(filepath.Join(dir, ".gitignore"), []byte("android/keystores/\ncredentials.json\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestAndroid(t *testing.T) {
	stores := fixtures(t)
	jks, p12 := stores[0], stores[2]
	jksRaw, _ := os.ReadFile(jks.file)
	p12Raw, _ := os.ReadFile(p12.file)

	t.Run("valid JKS with distinct key password", func(t *testing.T) {
		dir := writeApp(t, jksRaw, "upload.jks", map[string]any{
			"keystorePath": "android/keystores/upload.jks", "keystorePassword": jks.storePw, "keyAlias": "upload", "keyPassword": "key-pass-22"})
		f, err := Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		ks, info, err := f.Android()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(ks.Keystore, jksRaw) || ks.KeystorePassword != jks.storePw || ks.KeyAlias != "upload" || ks.KeyPassword != "key-pass-22" {
			t.Errorf("keystore secrets not returned as read: %+v", ks)
		}
		if info.Type != TypeJKS || info.KeyAlias != "upload" || len(info.CertificateSHA256) != 64 || info.Subject != "CN=Upload Key,O=Acme Inc,C=US" {
			t.Errorf("info = %+v", info)
		}
		if got, want := f.Paths(), []string{"android/keystores/upload.jks", "credentials.json"}; !slices.Equal(got, want) {
			t.Errorf("Paths() = %q, want %q", got, want)
		}
	})

	t.Run("absent keyPassword means the store password", func(t *testing.T) {
		dir := writeApp(t, p12Raw, "upload.p12", map[string]any{
			"keystorePath": "android/keystores/upload.p12", "keystorePassword": p12.storePw, "keyAlias": "release"})
		f, err := Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		ks, info, err := f.Android()
		if err != nil {
			t.Fatal(err)
		}
		if ks.KeyPassword != p12.storePw || info.Type != TypePKCS12 {
			t.Errorf("key password %q, info %+v", ks.KeyPassword, info)
		}
	})

	truncated := jksRaw[:len(jksRaw)/2]
	for _, tc := range []struct {
		name    string
		raw     []byte
		ksName  string
		block   map[string]any
		problem Problem
		want    []string
	}{
		{"wrong JKS store password", jksRaw, "upload.jks",
			map[string]any{"keystorePath": "android/keystores/upload.jks", "keystorePassword": "nope-nope", "keyAlias": "upload", "keyPassword": "key-pass-22"},
			WrongStorePassword, []string{"credentials.json: android.keystore.keystorePassword does not open android/keystores/upload.jks (keytool reports the same as 'keystore password was incorrect'); check the password"}},
		{"wrong PKCS12 store password", p12Raw, "upload.p12",
			map[string]any{"keystorePath": "android/keystores/upload.p12", "keystorePassword": "nope-nope", "keyAlias": "release"},
			WrongStorePassword, []string{"android.keystore.keystorePassword does not open android/keystores/upload.p12"}},
		{"wrong JKS key password", jksRaw, "upload.jks",
			map[string]any{"keystorePath": "android/keystores/upload.jks", "keystorePassword": jks.storePw, "keyAlias": "upload", "keyPassword": "wrong-key"},
			WrongKeyPassword, []string{"android.keystore.keyPassword does not decrypt the key \"upload\" in android/keystores/upload.jks", "Cannot recover key"}},
		{"JKS key password omitted but different", jksRaw, "upload.jks",
			map[string]any{"keystorePath": "android/keystores/upload.jks", "keystorePassword": jks.storePw, "keyAlias": "upload"},
			WrongKeyPassword, []string{"android.keystore.keyPassword does not decrypt"}},
		{"wrong PKCS12 key password", p12Raw, "upload.p12",
			map[string]any{"keystorePath": "android/keystores/upload.p12", "keystorePassword": p12.storePw, "keyAlias": "release", "keyPassword": "other-pass"},
			WrongKeyPassword, []string{"android.keystore.keyPassword does not decrypt the key \"release\""}},
		{"missing JKS alias", jksRaw, "upload.jks",
			map[string]any{"keystorePath": "android/keystores/upload.jks", "keystorePassword": jks.storePw, "keyAlias": "my-key-alias", "keyPassword": "key-pass-22"},
			NoSuchAlias, []string{`android.keystore.keyAlias "my-key-alias" is not a key entry of android/keystores/upload.jks, which holds only "second", "upload"`}},
		{"missing PKCS12 alias", p12Raw, "upload.p12",
			map[string]any{"keystorePath": "android/keystores/upload.p12", "keystorePassword": p12.storePw, "keyAlias": "upload"},
			NoSuchAlias, []string{`which holds only "ec-key", "release"`}},
		{"truncated JKS", truncated, "upload.jks",
			map[string]any{"keystorePath": "android/keystores/upload.jks", "keystorePassword": jks.storePw, "keyAlias": "upload", "keyPassword": "key-pass-22"},
			Damaged, []string{"android/keystores/upload.jks is a JKS keystore that is truncated or damaged"}},
		{"truncated PKCS12", p12Raw[:len(p12Raw)-40], "upload.p12",
			map[string]any{"keystorePath": "android/keystores/upload.p12", "keystorePassword": p12.storePw, "keyAlias": "release"},
			Damaged, []string{"android/keystores/upload.p12 is a PKCS12 keystore that is truncated or damaged"}},
		{"not a keystore", []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"), "upload.jks",
			map[string]any{"keystorePath": "android/keystores/upload.jks", "keystorePassword": "x", "keyAlias": "upload"},
			NotAKeystore, []string{"android/keystores/upload.jks is not a keystore", "PEM"}},
		{"empty file", []byte{}, "upload.jks",
			map[string]any{"keystorePath": "android/keystores/upload.jks", "keystorePassword": "x", "keyAlias": "upload"},
			NotAKeystore, []string{"the file is empty"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeApp(t, tc.raw, tc.ksName, tc.block)
			f, err := Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			_, _, err = f.Android()
			if err == nil {
				t.Fatal("Android() succeeded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\n does not contain %q", err, w)
				}
			}
			// The same keystore through ValidateKeystore: the same verdict.
			kp, _ := tc.block["keyPassword"].(string)
			_, verr := ValidateKeystore(tc.raw, tc.block["keystorePassword"].(string), tc.block["keyAlias"].(string), kp)
			var ke *KeystoreError
			if !errors.As(verr, &ke) || ke.Problem != tc.problem {
				t.Errorf("ValidateKeystore: %v, want problem %d", verr, tc.problem)
			}
		})
	}

	t.Run("missing keystore file", func(t *testing.T) {
		dir := writeApp(t, nil, "", map[string]any{"keystorePath": "android/keystores/release.jks", "keystorePassword": "x", "keyAlias": "a"})
		f, err := Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = f.Android()
		if err == nil || !strings.Contains(err.Error(), "android.keystore.keystorePath names android/keystores/release.jks, which does not exist") {
			t.Fatalf("err = %v", err)
		}
	})
}

// A PKCS12 keystore that also trusts a certificate: go-pkcs12 cannot read
// it; the error says so and how to convert it, and the JKS it converts to
// (trusted entry included) opens.
func TestPKCS12WithTrustedCertificate(t *testing.T) {
	jks := fixtures(t)[0]
	dir := t.TempDir()
	cert, p12, converted := filepath.Join(dir, "c.der"), filepath.Join(dir, "t.p12"), filepath.Join(dir, "t.jks")
	keytool(t, "-genkeypair", "-keystore", p12, "-storetype", "PKCS12", "-storepass", "p12-pass", "-alias", "k", "-keyalg", "EC", "-dname", "CN=k")
	keytool(t, "-exportcert", "-keystore", jks.file, "-storepass", jks.storePw, "-alias", "second", "-file", cert)
	keytool(t, "-importcert", "-noprompt", "-keystore", p12, "-storepass", "p12-pass", "-alias", "ca", "-file", cert)
	raw, _ := os.ReadFile(p12)
	_, err := ValidateKeystore(raw, "p12-pass", "k", "")
	var ke *KeystoreError
	if !errors.As(err, &ke) || ke.Problem != Unsupported || !strings.Contains(err.Error(), "trusted-certificate entries") || !strings.Contains(err.Error(), "keytool -importkeystore") {
		t.Fatalf("err = %v", err)
	}
	keytool(t, "-importkeystore", "-srckeystore", p12, "-srcstorepass", "p12-pass", "-destkeystore", converted, "-deststoretype", "JKS", "-deststorepass", "p12-pass")
	raw, _ = os.ReadFile(converted)
	if _, err := ValidateKeystore(raw, "p12-pass", "k", ""); err != nil {
		t.Fatalf("the converted JKS: %v", err)
	}
	if _, err := ValidateKeystore(raw, "p12-pass", "ca", ""); err == nil || !strings.Contains(err.Error(), `which holds only "k"`) {
		t.Fatalf("a trusted certificate is not a key entry: %v", err)
	}
}

func TestLoad(t *testing.T) {
	write := func(t *testing.T, content string) string {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, FileName), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	t.Run("missing", func(t *testing.T) {
		_, err := Load(t.TempDir())
		if !errors.Is(err, ErrNoFile) {
			t.Fatalf("err = %v, want ErrNoFile", err)
		}
	})
	for _, tc := range []struct{ name, content, want string }{
		{"syntax error position", "{\n  \"android\": {\n    \"keystore\": {,\n", "credentials.json:3:18: invalid JSON"},
		{"truncated", "{\n  \"android\": {", "credentials.json:2:14: invalid JSON: unexpected end"},
		{"not an object", "[1]", "must be a JSON object"},
		{"unknown top key", `{"andriod": {}}`, "unknown key andriod (allowed here: android, ios)"},
		{"unknown keystore key", `{"android": {"keystore": {"keystorePath": "a", "keystorePassword": "b", "keyAlias": "c", "keyPasword": "d"}}}`, "unknown key android.keystore.keyPasword"},
		{"wrong type", `{"android": {"keystore": {"keystorePath": "a", "keystorePassword": 123456, "keyAlias": "c"}}}`, "android.keystore.keystorePassword must be a string, not a number"},
		{"null", `{"android": {"keystore": {"keystorePath": "a", "keystorePassword": null, "keyAlias": "c"}}}`, "android.keystore.keystorePassword must be a string, not null"},
		{"missing alias", `{"android": {"keystore": {"keystorePath": "a", "keystorePassword": "b"}}}`, "android.keystore.keyAlias is missing"},
		{"android not an object", `{"android": "keystore.jks"}`, "android must be an object, not a string"},
		{"missing keystore", `{"android": {}}`, "android.keystore is missing"},
		{"ios target wrong", `{"ios": {"provisioningProfilePath": "a.mobileprovision", "distributionCertificate": {"path": "d.p12", "password": 1}}}`, "ios.distributionCertificate.password must be a string"},
		{"ios map target missing cert", `{"ios": {"App": {"provisioningProfilePath": "a.mobileprovision"}}}`, "ios.App.distributionCertificate is missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(write(t, tc.content))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}

	t.Run("ios forms and paths", func(t *testing.T) {
		dir := write(t, `{
  "android": {"keystore": {"keystorePath": "/elsewhere/upload.jks", "keystorePassword": "", "keyAlias": "a"}},
  "ios": {
    "App": {"provisioningProfilePath": "ios/certs/app.mobileprovision", "distributionCertificate": {"path": "ios/certs/dist.p12", "password": ""}},
    "Widget": {"provisioningProfilePath": "ios/certs/widget.mobileprovision", "distributionCertificate": {"path": "ios/certs/dist.p12", "password": "pw"}}
  }
}`)
		f, err := Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		ios := f.IOS()
		if len(ios) != 2 || ios["Widget"].DistributionCertificate.Password != "pw" || ios["App"].ProvisioningProfilePath != "ios/certs/app.mobileprovision" {
			t.Errorf("IOS() = %+v", ios)
		}
		want := []string{"credentials.json", "ios/certs/app.mobileprovision", "ios/certs/dist.p12", "ios/certs/widget.mobileprovision"}
		if got := f.Paths(); !slices.Equal(got, want) {
			t.Errorf("Paths() = %q, want %q (the absolute keystore path is not listed)", got, want)
		}
		single, err := Load(write(t, `{"ios": {"provisioningProfilePath": "p.mobileprovision", "distributionCertificate": {"path": "../d.p12", "password": "x"}}}`))
		if err != nil {
			t.Fatal(err)
		}
		if t1, ok := single.IOS()[""]; !ok || t1.ProvisioningProfilePath != "p.mobileprovision" {
			t.Errorf("single-target IOS() = %+v", single.IOS())
		}
		if got := single.Paths(); !slices.Equal(got, []string{"../d.p12", "credentials.json", "p.mobileprovision"}) {
			t.Errorf("Paths() = %q", got)
		}
		if single.HasAndroid() {
			t.Error("HasAndroid() with no android section")
		}
	})
}
