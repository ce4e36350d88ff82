package cli

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/freeagent-build/freeagent/controller/controllertest"
	"github.com/freeagent-build/freeagent/controller/serve"
)

// testPKI writes a private CA and a server certificate it signed for
// 127.0.0.1 and localhost; it returns the paths of the CA, the
// certificate and its key (PEM).
func testPKI(t *testing.T) (caFile, certFile, keyFile string) {
	t.Helper()
	dir := t.TempDir()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "Free Agent test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leafTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "controller"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), DNSNames: []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return write("ca.pem", "CERTIFICATE", caDER), write("cert.pem", "CERTIFICATE", leafDER), write("key.pem", "PRIVATE KEY", keyDER)
}

// TestTLSController: a controller serving HTTPS (--tls-cert/--tls-key)
// is used by the real expo-build binary trusting its CA through
// SSL_CERT_FILE; without that CA the certificate is refused; plain http to
// it gets no API answer.
func TestTLSController(t *testing.T) {
	t.Parallel()
	caFile, certFile, keyFile := testPKI(t)
	log := logrus.New()
	log.SetOutput(io.Discard)
	ctrl := controllertest.Start(t, controllertest.Logger(log), controllertest.Configure(func(c *serve.Config) {
		c.DataDir, c.TLSCert, c.TLSKey = filepath.Join(t.TempDir(), "data"), certFile, keyFile
	}))
	if !strings.HasPrefix(ctrl.URL, "https://127.0.0.1:") {
		t.Fatalf("controller URL %s, want https://", ctrl.URL)
	}
	devKey := ctrl.DeveloperKey

	bin := filepath.Join(t.TempDir(), "expo-build")
	if out, err := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", bin, "./cmd/expo-build").CombinedOutput(); err != nil {
		t.Fatalf("build expo-build: %v\n%s", err, out)
	}
	run := func(url string, extraEnv ...string) (int, string, string) {
		cmd := exec.Command(bin, "list", "--json")
		cmd.Env = append(os.Environ(), "EXPO_BUILD_CONFIG="+filepath.Join(t.TempDir(), "config.json"),
			"EXPO_CONTROLLER_URL="+url, "EXPO_CONTROLLER_API_KEY="+devKey)
		cmd.Env = append(cmd.Env, extraEnv...)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return code, stdout.String(), stderr.String()
	}

	code, stdout, stderr := run(ctrl.URL, "SSL_CERT_FILE="+caFile)
	var list map[string]any
	if code != 0 || json.Unmarshal([]byte(stdout), &list) != nil {
		t.Fatalf("expo-build list over TLS, trusting the CA: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if strings.Contains(stderr, "INSECURE") {
		t.Errorf("a warning about https: %s", stderr)
	}
	// Not trusting the CA: the certificate is refused (and never ignored).
	empty := filepath.Join(t.TempDir(), "none.pem")
	os.WriteFile(empty, nil, 0o600)
	if code, _, stderr := run(ctrl.URL, "SSL_CERT_FILE="+empty, "SSL_CERT_DIR="+t.TempDir()); code != ExitUnreachable ||
		!strings.Contains(stderr, "TLS certificate is not trusted") || !strings.Contains(stderr, "SSL_CERT_FILE") {
		t.Errorf("untrusted certificate: exit %d\n%s", code, stderr)
	}
	// Plain http to the TLS port is not served.
	if code, _, stderr := run(strings.Replace(ctrl.URL, "https://", "http://", 1), "SSL_CERT_FILE="+caFile); code == 0 {
		t.Errorf("plain http to the TLS controller answered: %s", stderr)
	}
}

// TestPlainHTTPRefused: http:// to another machine is refused, naming
// --insecure, from the flag, the environment and the config file; with
// --insecure (or EXPO_BUILD_INSECURE=1) it goes on with a loud warning;
// loopback http needs nothing.
func TestPlainHTTPRefused(t *testing.T) {
	t.Parallel()
	e := &env{t: t, cfgPath: filepath.Join(t.TempDir(), "config.json"), URL: "http://127.0.0.1:9"}
	remote := "http://192.0.2.10:8080"
	for _, tc := range []struct {
		name string
		vars map[string]string
		args []string
	}{
		{"flag", nil, []string{"list", "--controller-url", remote}},
		{"environment", map[string]string{"EXPO_CONTROLLER_URL": remote}, []string{"status", "b1"}},
		{"name", map[string]string{"EXPO_CONTROLLER_URL": "http://builds.example.com"}, []string{"logs", "b1"}},
		{"config", nil, []string{"config", "--controller-url", remote}},
	} {
		r := e.run(tc.vars, tc.args...)
		if r.code != ExitUsage || !strings.Contains(r.stderr, "--insecure") || !strings.Contains(r.stderr, "plain http") {
			t.Errorf("%s: want exit %d naming --insecure\n%s", tc.name, ExitUsage, r)
		}
	}
	if cfg, err := loadConfig(e.cfgPath); err == nil && cfg.ControllerURL != "" {
		t.Fatalf("the refused URL was stored: %s", cfg.ControllerURL)
	}
	for _, tc := range []struct {
		vars    map[string]string
		args    []string
		setting string
	}{
		{nil, []string{"config", "--controller-url", remote, "--insecure"}, "--insecure"},
		{map[string]string{"EXPO_BUILD_INSECURE": "1"}, []string{"config", "--controller-url", remote}, "EXPO_BUILD_INSECURE=1"},
	} {
		r := e.run(tc.vars, tc.args...)
		if r.code != 0 || strings.Count(r.stderr, "INSECURE: talking to "+remote+" over plain HTTP ("+tc.setting+")") != 1 {
			t.Errorf("%v: want exit 0 and one warning naming %s\n%s", tc.args, tc.setting, r)
		}
	}
	for _, u := range []string{"http://127.0.0.1:9", "http://localhost:9", "http://[::1]:9", "https://192.0.2.10"} {
		r := e.run(map[string]string{"EXPO_CONTROLLER_URL": u}, "config")
		if r.code != 0 || strings.Contains(r.stderr, "INSECURE") {
			t.Errorf("%s needs no --insecure:\n%s", u, r)
		}
	}
}
