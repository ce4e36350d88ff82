package httpapi

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// readFromWriter is a ResponseWriter whose connection can take a body by
// ReadFrom, as net/http's does (sendfile for an *os.File).
type readFromWriter struct {
	*httptest.ResponseRecorder
	src io.Reader
}

func (w *readFromWriter) ReadFrom(src io.Reader) (int64, error) {
	w.src = src
	return io.Copy(w.ResponseRecorder, src)
}

// The request logger's wrapper must not hide the connection's ReadFrom:
// without it, http.ServeContent copies a stored file through user space
// instead of by sendfile, and downloads through the controller lose a
// third of their speed.
func TestStatusRecorderKeepsReadFrom(t *testing.T) {
	p := filepath.Join(t.TempDir(), "artifact")
	if err := os.WriteFile(p, []byte("0123456789"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	under := &readFromWriter{ResponseRecorder: httptest.NewRecorder()}
	rec := &statusRecorder{ResponseWriter: under, status: http.StatusOK}
	http.ServeContent(rec, httptest.NewRequest(http.MethodGet, "/a", nil), "", fileTime(t, f), f)
	lr, ok := under.src.(*io.LimitedReader)
	if !ok || lr.R != io.Reader(f) {
		t.Fatalf("the connection's ReadFrom got %T, want the stored *os.File (within io.CopyN's LimitedReader)", under.src)
	}
	if got := under.Body.String(); got != "0123456789" || !rec.wrote {
		t.Fatalf("body %q, wrote %v", got, rec.wrote)
	}
}

func fileTime(t *testing.T, f *os.File) time.Time {
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	return st.ModTime()
}
