package httpapi

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// guardBody bounds how slowly a request body may arrive, so a client that
// trickles a body (or never sends it) cannot hold a connection and a
// handler open: the body must arrive within BodyGrace plus one second per
// BodyMinRate bytes read so far. Requests without a body get no deadline:
// net/http watches their connection from the start, and a read deadline
// would cancel a long poll.
func (s *Server) guardBody(w http.ResponseWriter, r *http.Request) {
	if r.Body == nil || r.Body == http.NoBody || s.limits.BodyGrace <= 0 {
		return
	}
	g := &throughputBody{ReadCloser: r.Body, rc: http.NewResponseController(w), start: time.Now(),
		grace: s.limits.BodyGrace, rate: s.limits.BodyMinRate}
	if g.rc.SetReadDeadline(g.deadline()) != nil {
		return // not a network connection (an in-process test writer)
	}
	r.Body = g
}

// errSlowBody is a body read that ran past its deadline.
var errSlowBody = errors.New("the request body arrived too slowly")

// throughputBody moves the connection's read deadline on as bytes arrive
// and lifts it once the body has been read to its end: net/http then
// watches the idle connection, and a deadline left behind would cancel the
// request.
type throughputBody struct {
	io.ReadCloser
	rc    *http.ResponseController
	start time.Time
	grace time.Duration
	rate  int64 // bytes per second; 0: the grace alone
	n     int64
	ended bool
}

func (b *throughputBody) deadline() time.Time {
	d := b.start.Add(b.grace)
	if b.rate > 0 {
		d = d.Add(time.Duration(float64(b.n) / float64(b.rate) * float64(time.Second)))
	}
	return d
}

func (b *throughputBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n += int64(n)
	switch {
	case err == io.EOF && !b.ended:
		b.ended = true
		b.rc.SetReadDeadline(time.Time{}) //nolint:errcheck // set once already: the connection supports it
	case err != nil:
		// A deadline that passed stays: net/http would otherwise wait on
		// the rest of a trickled body to discard it.
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			err = fmt.Errorf("%w: %w", errSlowBody, err)
		}
	case b.rate > 0:
		b.rc.SetReadDeadline(b.deadline()) //nolint:errcheck
	}
	return n, err
}

// closeAfter makes the answer the connection's last and stops reading what
// is left of the body at once: an unauthenticated or refused client gets
// its answer without the server draining whatever it keeps sending.
func closeAfter(w http.ResponseWriter) {
	w.Header().Set("Connection", "close")
	http.NewResponseController(w).SetReadDeadline(time.Now()) //nolint:errcheck // best effort: the answer goes out either way
}
