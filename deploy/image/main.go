// Command image builds the controller's container image without a Docker
// engine: a static freeagent-controller (CGO_ENABLED=0) and a CA bundle in
// one layer on an empty base, run as uid 65532, written as an OCI image
// layout in a tar file (`make image` → bin/freeagent-controller-image.tar).
//
// The image is reproducible: file times, the layer's compression and the
// config's dates come from SOURCE_DATE_EPOCH (else the commit's time the Go
// toolchain stamps into the binary, else 0), so building one commit twice
// gives one digest. deploy/Dockerfile builds the same image with Docker; its
// base, user, entrypoint and healthcheck are checked against this config.
//
// It is a module of its own, so its dependencies (go-containerregistry, the
// CA bundle) stay out of the controller's go.mod:
//
//	go -C deploy/image run . -C ../.. [-o FILE] [-arch amd64|arm64] [-tag NAME:TAG] [-version V]
package main

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/buildinfo"
	"debug/elf"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// The image's fixed facts, which deploy/Dockerfile repeats.
const (
	Entrypoint = "/usr/local/bin/freeagent-controller"
	DataDir    = "/var/lib/freeagent-controller"
	CABundle   = "/etc/ssl/certs/ca-certificates.crt"
	UID        = 65532
	Port       = "8080/tcp"
)

// Options say what to build.
type Options struct {
	Out     string // the OCI layout tar to write
	Arch    string // GOARCH of the image
	Tag     string // the reference name recorded in index.json
	Version string // org.opencontainers.image.version
	Module  string // the repository root to build from
}

func main() {
	var o Options
	flag.StringVar(&o.Out, "o", "bin/freeagent-controller-image.tar", "the OCI image layout tar file to write")
	flag.StringVar(&o.Arch, "arch", runtime.GOARCH, "the image's CPU architecture (amd64, arm64)")
	flag.StringVar(&o.Tag, "tag", "freeagent-controller:latest", "the image's name:tag (docker load names the image so)")
	flag.StringVar(&o.Version, "version", "dev", "the release this image is (org.opencontainers.image.version)")
	flag.StringVar(&o.Module, "C", ".", "the repository root")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	digest, err := Build(ctx, o)
	if err != nil {
		fmt.Fprintf(os.Stderr, "image: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("%s %s\n", o.Out, digest)
}

// Build compiles the controller and writes its image to o.Out; it returns
// the manifest's digest.
func Build(ctx context.Context, o Options) (v1.Hash, error) {
	work, err := os.MkdirTemp("", "freeagent-image-")
	if err != nil {
		return v1.Hash{}, fmt.Errorf("make a build directory: %w", err)
	}
	defer os.RemoveAll(work)
	bin := filepath.Join(work, "freeagent-controller")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=auto", "-ldflags=-s -w -buildid=", "-o", bin, "./controller/cmd/freeagent-controller")
	cmd.Dir = o.Module
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+o.Arch, "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		return v1.Hash{}, fmt.Errorf("go build the controller: %w\n%s", err, out)
	}
	if err := checkStatic(bin); err != nil {
		return v1.Hash{}, err
	}
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("read the controller's build info: %w", err)
	}
	epoch, revision, err := sourceDate(ctx, info, o.Module)
	if err != nil {
		return v1.Hash{}, err
	}
	exe, err := os.ReadFile(bin)
	if err != nil {
		return v1.Hash{}, err
	}
	img, err := Image(exe, o, epoch, revision)
	if err != nil {
		return v1.Hash{}, err
	}
	return WriteLayout(img, o.Tag, o.Out)
}

// checkStatic refuses a binary that needs a dynamic loader: the image has none.
func checkStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("read the controller binary: %w", err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			return errors.New("the controller binary is dynamically linked; build it with CGO_ENABLED=0")
		}
	}
	return nil
}

// sourceDate is SOURCE_DATE_EPOCH, else the commit's time, else the Unix
// epoch; revision is the commit. Both come from the binary's VCS stamp, or
// from git where Go does not stamp (a git worktree).
func sourceDate(ctx context.Context, info *buildinfo.BuildInfo, dir string) (time.Time, string, error) {
	var vcsTime, revision string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.time":
			vcsTime = s.Value
		case "vcs.revision":
			revision = s.Value
		}
	}
	if revision == "" {
		cmd := exec.CommandContext(ctx, "git", "log", "-1", "--format=%H %cI")
		cmd.Dir = dir
		if out, err := cmd.Output(); err == nil {
			if f := strings.Fields(string(out)); len(f) == 2 {
				revision, vcsTime = f[0], f[1]
			}
		}
	}
	if v := os.Getenv("SOURCE_DATE_EPOCH"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return time.Time{}, "", fmt.Errorf("SOURCE_DATE_EPOCH=%q: want seconds since 1970", v)
		}
		return time.Unix(n, 0).UTC(), revision, nil
	}
	if t, err := time.Parse(time.RFC3339, vcsTime); err == nil {
		return t.UTC(), revision, nil
	}
	return time.Unix(0, 0).UTC(), revision, nil
}

// Image is the controller's image: one layer holding exe, the CA bundle,
// the user database and the writable directories, and its config.
func Image(exe []byte, o Options, epoch time.Time, revision string) (v1.Image, error) {
	layerTar, err := rootFS(exe, epoch)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressionLevel(9))
	if err != nil {
		return nil, fmt.Errorf("make the image layer: %w", err)
	}
	img, err := mutate.AppendLayers(mutate.MediaType(mutate.ConfigMediaType(empty.Image, types.OCIConfigJSON), types.OCIManifestSchema1), layer)
	if err != nil {
		return nil, fmt.Errorf("add the image layer: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = o.Arch, "linux"
	cf.Author = "Free Agent"
	cf.Config = Config(o.Version, revision, epoch)
	cf.History = []v1.History{{Created: v1.Time{Time: epoch}, CreatedBy: "go run ./deploy/image", Comment: "freeagent-controller, CA bundle, nonroot user"}}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("set the image config: %w", err)
	}
	img, err = mutate.CreatedAt(img, v1.Time{Time: epoch})
	if err != nil {
		return nil, fmt.Errorf("date the image: %w", err)
	}
	return img, nil
}

// Config is the image's run configuration.
func Config(version, revision string, epoch time.Time) v1.Config {
	return v1.Config{
		User:         strconv.Itoa(UID) + ":" + strconv.Itoa(UID),
		Entrypoint:   []string{Entrypoint},
		Cmd:          []string{"serve"},
		WorkingDir:   DataDir,
		ExposedPorts: map[string]struct{}{Port: {}},
		Env: []string{
			"PATH=/usr/local/bin",
			"SSL_CERT_FILE=" + CABundle,
			"FREEAGENT_LISTEN=0.0.0.0:8080",
			"FREEAGENT_DATA_DIR=" + DataDir,
		},
		// Docker reads this; Kubernetes uses its own probes (deploy/k8s).
		Healthcheck: &v1.HealthConfig{
			Test:        []string{"CMD", Entrypoint, "health"},
			Interval:    30 * time.Second,
			Timeout:     5 * time.Second,
			StartPeriod: 30 * time.Second,
			Retries:     3,
		},
		Labels: map[string]string{
			"org.opencontainers.image.title":         "freeagent-controller",
			"org.opencontainers.image.description":   "Free Agent build controller: queue, worker protocol, developers' API and dashboard",
			"org.opencontainers.image.source":        "https://github.com/freeagent-build/freeagent",
			"org.opencontainers.image.documentation": "https://github.com/freeagent-build/freeagent/blob/main/docs/operations.md",
			"org.opencontainers.image.version":       version,
			"org.opencontainers.image.revision":      revision,
			"org.opencontainers.image.created":       epoch.Format(time.RFC3339),
		},
	}
}

// rootFS is the layer's tar: every entry dated epoch, owned by root unless
// it is the non-root user's, in a fixed order.
func rootFS(exe []byte, epoch time.Time) ([]byte, error) {
	ca, err := caBundle()
	if err != nil {
		return nil, err
	}
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", UID, UID)
	group := fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", UID)
	type entry struct {
		name string
		mode int64
		uid  int
		data []byte // nil for a directory
	}
	entries := []entry{
		{"etc/", 0o755, 0, nil},
		{"etc/group", 0o644, 0, []byte(group)},
		{"etc/passwd", 0o644, 0, []byte(passwd)},
		{"etc/ssl/", 0o755, 0, nil},
		{"etc/ssl/certs/", 0o755, 0, nil},
		{"etc/ssl/certs/ca-certificates.crt", 0o644, 0, ca},
		{"home/", 0o755, 0, nil},
		{"home/nonroot/", 0o700, UID, nil},
		{"tmp/", 0o1777, 0, nil},
		{"usr/", 0o755, 0, nil},
		{"usr/local/", 0o755, 0, nil},
		{"usr/local/bin/", 0o755, 0, nil},
		{"usr/local/bin/freeagent-controller", 0o755, 0, exe},
		{"var/", 0o755, 0, nil},
		{"var/lib/", 0o755, 0, nil},
		{"var/lib/freeagent-controller/", 0o700, UID, nil},
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.uid, ModTime: epoch, Format: tar.FormatPAX}
		if e.data == nil {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("write the layer: %w", err)
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, fmt.Errorf("write the layer: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("write the layer: %w", err)
	}
	return buf.Bytes(), nil
}

// caBundle is the Mozilla (NSS) roots golang.org/x/crypto/x509roots/fallback
// pins, as PEM: the module version fixes the bundle, so every machine builds
// the same image. A root with a distrust-after constraint is left out, as a
// PEM bundle cannot carry the constraint.
func caBundle() ([]byte, error) {
	var buf bytes.Buffer
	for r := range bundle.Roots() {
		if r.Constraint != nil {
			continue
		}
		if err := pem.Encode(&buf, &pem.Block{Type: "CERTIFICATE", Bytes: r.Certificate}); err != nil {
			return nil, err
		}
	}
	if buf.Len() == 0 {
		return nil, errors.New("the CA bundle is empty")
	}
	return buf.Bytes(), nil
}

// WriteLayout writes img as an OCI image layout (oci-layout, index.json,
// blobs/sha256/…) in a tar file at path, atomically, and returns the
// manifest's digest. docker load, podman load, skopeo and crane read it.
func WriteLayout(img v1.Image, tag, path string) (v1.Hash, error) {
	manifest, err := img.RawManifest()
	if err != nil {
		return v1.Hash{}, err
	}
	digest, err := img.Digest()
	if err != nil {
		return v1.Hash{}, err
	}
	config, err := img.RawConfigFile()
	if err != nil {
		return v1.Hash{}, err
	}
	cfgName, err := img.ConfigName()
	if err != nil {
		return v1.Hash{}, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return v1.Hash{}, err
	}
	index, err := json.Marshal(v1.IndexManifest{
		SchemaVersion: 2,
		MediaType:     types.OCIImageIndex,
		Manifests: []v1.Descriptor{{
			MediaType: types.OCIManifestSchema1,
			Size:      int64(len(manifest)),
			Digest:    digest,
			Platform:  &v1.Platform{OS: cf.OS, Architecture: cf.Architecture},
			Annotations: map[string]string{
				"org.opencontainers.image.ref.name": tag,
				"io.containerd.image.name":          tag,
			},
		}},
	})
	if err != nil {
		return v1.Hash{}, err
	}
	layers, err := img.Layers()
	if err != nil {
		return v1.Hash{}, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return v1.Hash{}, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".image-*.tar")
	if err != nil {
		return v1.Hash{}, fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	tw := tar.NewWriter(tmp)
	epoch := cf.Created.Time
	file := func(name string, data []byte) error {
		h := &tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), ModTime: epoch, Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	dir := func(name string) error {
		return tw.WriteHeader(&tar.Header{Name: name, Mode: 0o755, ModTime: epoch, Typeflag: tar.TypeDir, Format: tar.FormatPAX})
	}
	blob := func(h v1.Hash) string { return "blobs/" + h.Algorithm + "/" + h.Hex }
	steps := []func() error{
		func() error { return file("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)) },
		func() error { return file("index.json", index) },
		func() error { return dir("blobs/") },
		func() error { return dir("blobs/sha256/") },
		func() error { return file(blob(digest), manifest) },
		func() error { return file(blob(cfgName), config) },
	}
	for _, l := range layers {
		steps = append(steps, func() error {
			d, err := l.Digest()
			if err != nil {
				return err
			}
			rc, err := l.Compressed()
			if err != nil {
				return err
			}
			defer rc.Close()
			data, err := io.ReadAll(rc)
			if err != nil {
				return err
			}
			return file(blob(d), data)
		})
	}
	for _, step := range steps {
		if err := step(); err != nil {
			tmp.Close()
			return v1.Hash{}, fmt.Errorf("write %s: %w", path, err)
		}
	}
	if err := tw.Close(); err != nil {
		tmp.Close()
		return v1.Hash{}, fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return v1.Hash{}, fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return v1.Hash{}, err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return v1.Hash{}, fmt.Errorf("write %s: %w", path, err)
	}
	return digest, nil
}
