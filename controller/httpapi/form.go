package httpapi

import (
	"bytes"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strings"
)

// form reads a streamed multipart body and tells a complete form from a
// truncated one: mime/multipart answers io.EOF both after the closing
// boundary and when the body ends inside a part's headers, so on io.EOF we
// check that the body itself ended cleanly with the closing delimiter.
type form struct {
	mr       *multipart.Reader
	body     *tailReader
	boundary string
}

// newForm limits the body to limit bytes and starts reading it as multipart.
func newForm(w http.ResponseWriter, r *http.Request, limit int64, what string) (*form, error) {
	mediaType, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || !strings.HasPrefix(mediaType, "multipart/") || params["boundary"] == "" {
		return nil, badRequest("expected a multipart/form-data body with %s (Content-Type %q)", what, r.Header.Get("Content-Type"))
	}
	body := &tailReader{r: http.MaxBytesReader(w, r.Body, limit)}
	return &form{mr: multipart.NewReader(body, params["boundary"]), body: body, boundary: params["boundary"]}, nil
}

// next returns the next part; io.EOF only after a complete form.
func (f *form) next() (*multipart.Part, error) {
	p, err := f.mr.NextPart()
	if errors.Is(err, io.EOF) {
		if f.body.err != nil {
			return nil, multipartErr(f.body.err)
		}
		if !bytes.Contains(f.body.tail, []byte("--"+f.boundary+"--")) {
			return nil, badRequest("the multipart body ended before its closing boundary (a truncated upload?)")
		}
		return nil, io.EOF
	}
	if err != nil {
		if f.body.err != nil { // the body's own failure (a size limit, a slow client) says more
			err = f.body.err
		}
		return nil, multipartErr(err)
	}
	return p, nil
}

// tailReader remembers the last bytes read and the first read error other
// than io.EOF (a client that went away, a size limit).
type tailReader struct {
	r    io.Reader
	tail []byte
	err  error
}

const tailSize = 512

func (t *tailReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if n > 0 {
		if n >= tailSize {
			t.tail = append(t.tail[:0], p[n-tailSize:n]...)
		} else {
			t.tail = append(t.tail, p[:n]...)
			if len(t.tail) > tailSize {
				t.tail = append(t.tail[:0], t.tail[len(t.tail)-tailSize:]...)
			}
		}
	}
	if err != nil && !errors.Is(err, io.EOF) && t.err == nil {
		t.err = err
	}
	return n, err
}

// isFile reports whether a part carries a filename parameter, even an empty
// one (Part.FileName cannot tell an empty name from none).
func isFile(p *multipart.Part) bool {
	_, params, err := mime.ParseMediaType(p.Header.Get("Content-Disposition"))
	_, ok := params["filename"]
	return err == nil && ok
}
