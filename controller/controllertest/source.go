package controllertest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/internal/cachekey"
	"github.com/freeagent-build/freeagent/internal/sourcefp"
)

// Project is a project archive (tar.gz) as a build's source: files maps a
// slash-separated name to its content. Entries come in name order, so the
// same files make the same archive; a name ending in .sh is executable
// (0755), the rest 0644.
func Project(t testing.TB, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		mode := int64(0o644)
		if strings.HasSuffix(path.Base(name), ".sh") {
			mode = 0o755
		}
		body := files[name]
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: mode, Size: int64(len(body))}); err != nil {
			t.Fatalf("controllertest: archive %s: %v", name, err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			t.Fatalf("controllertest: archive %s: %v", name, err)
		}
	}
	if err := errors.Join(tw.Close(), gz.Close()); err != nil {
		t.Fatalf("controllertest: close the archive: %v", err)
	}
	return buf.Bytes()
}

// SourceFingerprint is the source fingerprint of a tar.gz archive
// (sourcefp), what a spec declaring that archive's tree carries.
func SourceFingerprint(t testing.TB, archive []byte) string {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(archive))
	if err != nil {
		t.Fatalf("controllertest: fingerprint: %v", err)
	}
	tr := tar.NewReader(gz)
	fp := sourcefp.New()
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return fp.Sum()
		}
		if err != nil {
			t.Fatalf("controllertest: fingerprint: %v", err)
		}
		fp.Header(h)
		if _, err := io.Copy(fp, tr); err != nil {
			t.Fatalf("controllertest: fingerprint: %v", err)
		}
	}
}

// CacheEntries are the dependency caches the controller gives spec's
// build from the tar.gz archive (cachekey over the archive's files),
// whatever caches the spec declares.
func CacheEntries(t testing.TB, spec api.BuildSpec, archive []byte) []api.CacheEntry {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(archive))
	if err != nil {
		t.Fatalf("controllertest: cache keys: %v", err)
	}
	tr := tar.NewReader(gz)
	idx := cachekey.NewIndex()
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("controllertest: cache keys: %v", err)
		}
		if w := idx.Header(h); w != nil {
			if _, err := io.Copy(w, tr); err != nil {
				t.Fatalf("controllertest: cache keys: %v", err)
			}
		}
	}
	entries, err := cachekey.Entries(spec, idx)
	if err != nil {
		t.Fatalf("controllertest: cache keys: %v", err)
	}
	return entries
}
