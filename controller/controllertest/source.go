package controllertest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"path"
	"slices"
	"strings"
	"testing"
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
