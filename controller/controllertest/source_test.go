package controllertest_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/controller/controllertest"
	"github.com/freeagent-build/freeagent/internal/testsupport/syncbuf"
)

// Project's archive reads back with its files in name order, scripts
// executable, and is the same bytes for the same files.
func TestProject(t *testing.T) {
	files := map[string]string{"package.json": `{"name":"app"}`, "scripts/build.sh": "echo hi\n", "app.json": `{"expo":{}}`}
	archive := controllertest.Project(t, files)
	gz, err := gzip.NewReader(bytes.NewReader(archive))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	var got []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%s %o %s", h.Name, h.Mode, body))
	}
	want := []string{`app.json 644 {"expo":{}}`, `package.json 644 {"name":"app"}`, "scripts/build.sh 755 echo hi\n"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("archive holds %q, want %q", got, want)
	}
	if !bytes.Equal(controllertest.Project(t, files), archive) {
		t.Fatal("the same files made another archive")
	}
}

// Listening finds the URL the controller announces, and keeps the whole
// log, what follows included; a log that ends first is an error.
func TestListening(t *testing.T) {
	pr, pw := io.Pipe()
	var log syncbuf.Buffer
	go func() {
		io.WriteString(pw, "starting\nlevel=info msg=\"listening on https://127.0.0.1:4321\"\nlater\n")
		pw.Close()
	}()
	u, err := controllertest.Listening(pr, &log, time.Minute)
	if err != nil || u != "https://127.0.0.1:4321" {
		t.Fatalf("Listening = %q, %v", u, err)
	}
	for !strings.Contains(log.String(), "later\n") { // the copying goes on; the test's deadline bounds this
		time.Sleep(time.Millisecond)
	}
	if !strings.HasPrefix(log.String(), "starting\n") {
		t.Fatalf("log %q", log.String())
	}
	if u, err := controllertest.Listening(strings.NewReader("panic: no database\n"), io.Discard, time.Minute); err == nil {
		t.Fatalf("a log that ends without listening gave %q", u)
	}
}
