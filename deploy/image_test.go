package deploy

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/controllertest"
	"github.com/freeagent-build/freeagent/controller/pgtest"
	"github.com/freeagent-build/freeagent/internal/testsupport/syncbuf"
)

var (
	imageOnce sync.Once
	imageTars [2]string
	imageErr  error
)

// buildImages runs the image builder (its own module, deploy/image) twice,
// as `make image` does, into two files.
func buildImages(t *testing.T) [2]string {
	t.Helper()
	imageOnce.Do(func() {
		dir, err := os.MkdirTemp("", "fa-image-")
		if err != nil {
			imageErr = err
			return
		}
		for i := range imageTars {
			imageTars[i] = filepath.Join(dir, fmt.Sprintf("image-%d.tar", i))
			cmd := exec.Command("go", "-C", "image", "run", ".", "-C", "../..", "-o", imageTars[i], "-version", "v0.0.0-test")
			if out, err := cmd.CombinedOutput(); err != nil {
				imageErr = fmt.Errorf("go -C deploy/image run .: %v\n%s", err, out)
				return
			}
		}
	})
	if imageErr != nil {
		t.Fatal(imageErr)
	}
	t.Cleanup(func() {}) // the files live until the test binary ends
	return imageTars
}

// ociImage is an OCI image layout read back from its tar, every blob
// checked against its digest.
type ociImage struct {
	blobs    map[string][]byte // "sha256:<hex>" → content
	index    struct{ Manifests []descriptor }
	manifest struct {
		MediaType string
		Config    descriptor
		Layers    []descriptor
	}
	config struct {
		Architecture, OS string
		Config           struct {
			User, WorkingDir string
			Entrypoint, Cmd  []string
			Env              []string
			ExposedPorts     map[string]struct{}
			Labels           map[string]string
			Healthcheck      struct{ Test []string }
		}
	}
}

type descriptor struct {
	MediaType   string
	Digest      string
	Size        int64
	Annotations map[string]string
}

func readOCI(t *testing.T, path string) *ociImage {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img := &ociImage{blobs: map[string][]byte{}}
	files := map[string][]byte{}
	eachTarEntry(t, f, func(h *tar.Header, b []byte) {
		files[h.Name] = b
		if rest, ok := strings.CutPrefix(h.Name, "blobs/sha256/"); ok && h.Typeflag == tar.TypeReg {
			sum := sha256.Sum256(b)
			if hex.EncodeToString(sum[:]) != rest {
				t.Fatalf("blob %s has digest %x", h.Name, sum)
			}
			img.blobs["sha256:"+rest] = b
		}
	})
	if string(files["oci-layout"]) != `{"imageLayoutVersion":"1.0.0"}` {
		t.Fatalf("oci-layout: %q", files["oci-layout"])
	}
	blob := func(d descriptor, v any) {
		b, ok := img.blobs[d.Digest]
		if !ok || int64(len(b)) != d.Size {
			t.Fatalf("blob %s (%d bytes) missing or of another size", d.Digest, d.Size)
		}
		if v != nil {
			if err := json.Unmarshal(b, v); err != nil {
				t.Fatalf("blob %s: %v", d.Digest, err)
			}
		}
	}
	if err := json.Unmarshal(files["index.json"], &img.index); err != nil || len(img.index.Manifests) != 1 {
		t.Fatalf("index.json: %s %v", files["index.json"], err)
	}
	blob(img.index.Manifests[0], &img.manifest)
	blob(img.manifest.Config, &img.config)
	for _, l := range img.manifest.Layers {
		blob(l, nil)
	}
	return img
}

// eachTarEntry calls fn with each entry of the tar stream r and its content.
func eachTarEntry(t *testing.T, r io.Reader, fn func(*tar.Header, []byte)) {
	t.Helper()
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		fn(h, b)
	}
}

// extract unpacks the image's layers into dir as a container runtime
// would, keeping modes and noting each entry's owner.
func (img *ociImage) extract(t *testing.T, dir string) map[string]int {
	t.Helper()
	owners := map[string]int{}
	for _, l := range img.manifest.Layers {
		if l.MediaType != "application/vnd.oci.image.layer.v1.tar+gzip" {
			t.Fatalf("layer media type %s", l.MediaType)
		}
		zr, err := gzip.NewReader(bytes.NewReader(img.blobs[l.Digest]))
		if err != nil {
			t.Fatal(err)
		}
		eachTarEntry(t, zr, func(h *tar.Header, b []byte) {
			name := filepath.Clean(h.Name)
			if !filepath.IsLocal(name) {
				t.Fatalf("layer entry %q leaves the root", h.Name)
			}
			owners["/"+name] = h.Uid
			p := filepath.Join(dir, name)
			switch h.Typeflag {
			case tar.TypeDir:
				if err := os.MkdirAll(p, 0o755); err != nil {
					t.Fatal(err)
				}
			case tar.TypeReg:
				if err := os.WriteFile(p, b, 0o600); err != nil {
					t.Fatal(err)
				}
			default:
				t.Fatalf("layer entry %q of type %c", h.Name, h.Typeflag)
			}
			if err := os.Chmod(p, os.FileMode(h.Mode).Perm()); err != nil {
				t.Fatal(err)
			}
		})
	}
	// The test runs as whoever it is: make the 0700 directories usable.
	if err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			err = os.Chmod(p, 0o755)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return owners
}

// The image builds twice to the same bytes; its config runs a non-root
// user with a healthcheck; its layer holds a static controller, a CA
// bundle and a data directory the user owns; and the controller, run from
// the extracted files against a real PostgreSQL, becomes ready and serves
// every series the dashboard and the alerts use.
func TestImageRunsFromItsOwnFilesystem(t *testing.T) {
	tars := buildImages(t)
	a, err := os.ReadFile(tars[0])
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(tars[1])
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatal("two builds of one commit differ: the image is not reproducible")
	}
	img := readOCI(t, tars[0])
	m := img.index.Manifests[0]
	t.Logf("image %s, %d bytes of layers", m.Digest, img.manifest.Layers[0].Size)
	if m.Annotations["org.opencontainers.image.ref.name"] != "freeagent-controller:latest" || img.manifest.MediaType != "application/vnd.oci.image.manifest.v1+json" {
		t.Fatalf("index %+v, manifest media type %s", m, img.manifest.MediaType)
	}
	cfg := img.config.Config
	if img.config.OS != "linux" || cfg.User != "65532:65532" || !slices.Equal(cfg.Entrypoint, []string{"/usr/local/bin/freeagent-controller"}) ||
		!slices.Equal(cfg.Cmd, []string{"serve"}) || !slices.Equal(cfg.Healthcheck.Test, []string{"CMD", "/usr/local/bin/freeagent-controller", "health"}) {
		t.Fatalf("config: %+v", img.config)
	}
	for _, l := range []string{"org.opencontainers.image.source", "org.opencontainers.image.version", "org.opencontainers.image.revision", "org.opencontainers.image.created"} {
		if cfg.Labels[l] == "" {
			t.Errorf("label %s is empty", l)
		}
	}

	root := t.TempDir()
	owners := img.extract(t, root)
	if owners["/var/lib/freeagent-controller"] != 65532 || owners["/usr/local/bin/freeagent-controller"] != 0 {
		t.Fatalf("owners: %v", owners)
	}
	ca, err := os.ReadFile(filepath.Join(root, "etc/ssl/certs/ca-certificates.crt"))
	if err != nil {
		t.Fatal(err)
	}
	roots := 0
	for block, rest := pem.Decode(ca); block != nil; block, rest = pem.Decode(rest) {
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			t.Fatalf("CA bundle: %v", err)
		}
		roots++
	}
	if roots < 100 {
		t.Fatalf("the CA bundle holds %d roots", roots)
	}
	passwd, err := os.ReadFile(filepath.Join(root, "etc/passwd"))
	if err != nil || !strings.Contains(string(passwd), ":65532:65532:") {
		t.Fatalf("/etc/passwd: %q %v", passwd, err)
	}

	bin := filepath.Join(root, "usr/local/bin/freeagent-controller")
	env := append(os.Environ(), "DATABASE_URL="+pgtest.NewDatabase(t), "SSL_CERT_FILE="+filepath.Join(root, "etc/ssl/certs/ca-certificates.crt"))
	url, stop := startController(t, bin, env, "serve", "--listen", "127.0.0.1:0", "--data-dir", t.TempDir(), "--metrics-public")
	defer stop()
	resp, err := http.Get(url + "/health/ready")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/health/ready: %v %v", resp, err)
	}
	resp.Body.Close()
	health := exec.Command(bin, "health", "--url", url+"/health/ready")
	if out, err := health.CombinedOutput(); err != nil {
		t.Fatalf("the image's healthcheck command: %v %s", err, out)
	}
	if out, err := exec.Command(bin, "health", "--url", url+"/nothing-here").CombinedOutput(); err == nil {
		t.Fatalf("the healthcheck passed on a 404: %s", out)
	}

	// A worker with two slots; a build through it.
	keyOut, err := runWith(env, bin, "keys", "create", "--name", "ops", "--role", "admin")
	if err != nil {
		t.Fatalf("keys create: %v %s", err, keyOut)
	}
	c := &api.Client{BaseURL: url, APIKey: strings.TrimSpace(keyOut)}
	ctx := context.Background()
	reg, err := c.Register(ctx, api.RegisterRequest{Name: "mac", Capabilities: api.Capabilities{Platforms: []string{"android"}, MaxConcurrentBuilds: 2}})
	if err != nil {
		t.Fatal(err)
	}
	sub, err := c.Submit(ctx, api.SubmitRequest{Platform: "android", Source: bytes.NewReader(emptyTarGz)})
	if err != nil {
		t.Fatal(err)
	}
	poll, err := c.Poll(ctx, reg.AccessToken, 5*time.Second)
	if err != nil || poll.Job == nil || poll.Job.ID != sub.ID {
		t.Fatalf("poll: %+v %v", poll, err)
	}

	// Every series the dashboard and alerts query is served (the chain's
	// validity once its first background check ended).
	used := queriedSeries(t)
	var served map[string]string
	deadline := time.Now().Add(60 * time.Second)
	for {
		served = scrapeSeries(t, url)
		if served["freeagent_events_chain_valid"] != "" || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if len(used) < 10 {
		t.Fatalf("only %d series found in the queries: %v", len(used), used)
	}
	for name, where := range used {
		if _, ok := served[name]; !ok {
			t.Errorf("%s (used by %s) is not exported by the controller", name, strings.Join(where, ", "))
		}
	}
	for name, want := range map[string]string{"freeagent_workers_online": "1", "freeagent_worker_slots": "2", `freeagent_builds{status="assigned"}`: "1",
		"freeagent_events_chain_valid": "1", "freeagent_claims_total": "1"} {
		if got := served[name]; got != want {
			t.Errorf("%s = %q, want %s", name, got, want)
		}
	}
}

// emptyTarGz is a valid, empty source archive.
var emptyTarGz = []byte("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03\x03\x00\x00\x00\x00\x00\x00\x00\x00\x00")

// scrapeSeries reads /metrics: each sample's name, and each sample (name
// with its labels as printed) with its value.
func scrapeSeries(t *testing.T, url string) map[string]string {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		sample, value, ok := strings.Cut(line, " ")
		if !ok {
			t.Fatalf("metrics line %q", line)
		}
		name, _, _ := strings.Cut(sample, "{")
		if _, seen := out[name]; !seen {
			out[name] = value
		}
		out[sample] = value
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func runWith(env []string, bin string, args ...string) (string, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return stderr.String(), err
	}
	return string(out), nil
}

// startController runs bin with args and env until it logs its URL.
func startController(t *testing.T, bin string, env []string, args ...string) (url string, stop func()) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cmd.Process.Signal(os.Interrupt) //nolint:errcheck
			done := make(chan struct{})
			go func() { cmd.Wait(); close(done) }() //nolint:errcheck
			select {
			case <-done:
			case <-time.After(40 * time.Second):
				cmd.Process.Kill() //nolint:errcheck
				<-done
			}
		})
	}
	t.Cleanup(stop)
	var logs syncbuf.Buffer
	u, err := controllertest.Listening(stderr, &logs, 90*time.Second)
	if err != nil {
		stop()
		t.Fatalf("%s did not start: %v\n%s", bin, err, logs.String())
	}
	return u, stop
}

// deploy/Dockerfile builds the image the Go builder makes: scratch, the
// same user, entrypoint, command, environment, port, working directory and
// healthcheck.
func TestDockerfileAgreesWithImage(t *testing.T) {
	b, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	// The final stage: from its FROM on, continuation lines joined.
	text := strings.ReplaceAll(string(b), "\\\n", " ")
	stages := regexp.MustCompile(`(?m)^FROM `).Split(text, -1)
	final := strings.Fields(strings.SplitN(stages[len(stages)-1], "\n", 2)[0])
	if len(final) != 1 || final[0] != "scratch" {
		t.Fatalf("the final stage is FROM %v, the image's base is empty (scratch)", final)
	}
	inst := map[string]string{}
	for _, line := range strings.Split(stages[len(stages)-1], "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), " "); ok && k == strings.ToUpper(k) {
			inst[k] = strings.Join(strings.Fields(v), " ")
		}
	}
	img := readOCI(t, buildImages(t)[0])
	cfg := img.config.Config
	jsonList := func(v []string) string { b, _ := json.Marshal(v); return strings.ReplaceAll(string(b), ",", ", ") }
	if inst["USER"] != cfg.User || inst["WORKDIR"] != cfg.WorkingDir || inst["ENTRYPOINT"] != jsonList(cfg.Entrypoint) || inst["CMD"] != jsonList(cfg.Cmd) {
		t.Errorf("Dockerfile %v\nimage %+v", inst, cfg)
	}
	for port := range cfg.ExposedPorts {
		if inst["EXPOSE"] != port {
			t.Errorf("EXPOSE %s, image %s", inst["EXPOSE"], port)
		}
	}
	if hc := inst["HEALTHCHECK"]; !strings.HasSuffix(hc, "CMD "+jsonList(cfg.Healthcheck.Test[1:])) {
		t.Errorf("HEALTHCHECK %s, image %v", hc, cfg.Healthcheck.Test)
	}
	if env := strings.Fields(inst["ENV"]); !slices.Equal(env, cfg.Env) {
		t.Errorf("ENV %v, image %v", env, cfg.Env)
	}
}
