package vmbootstrap

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/freeagent-build/freeagent/api"
)

// LogStreamConfig tunes a LogStream.
type LogStreamConfig struct {
	FlushInterval  time.Duration // send what is buffered at least this often
	FlushBytes     int           // … and as soon as this much is buffered
	MaxChunk       int           // bytes per request (the controller's LogChunk limit is 1 MiB)
	MaxBuffer      int           // bytes held while the controller is unreachable; more are dropped with a marker
	TailLines      int           // lines kept for error reports
	RequestTimeout time.Duration // one append request
	RetryMin       time.Duration // backoff between failed appends
	RetryMax       time.Duration
	// InitialOffset is where this stream starts in the build's log. A
	// negative value (the default) asks the controller for the log's
	// current length: the log is per build, so a later attempt appends
	// after the earlier attempts' output.
	InitialOffset int64
}

// DefaultLogStreamConfig returns the defaults of the contract.
func DefaultLogStreamConfig() LogStreamConfig {
	return LogStreamConfig{
		FlushInterval:  time.Second,
		FlushBytes:     64 << 10,
		MaxChunk:       1 << 20,
		MaxBuffer:      8 << 20,
		TailLines:      50,
		RequestTimeout: 30 * time.Second,
		RetryMin:       200 * time.Millisecond,
		RetryMax:       10 * time.Second,
		InitialOffset:  -1,
	}
}

// ErrAttemptEnded: the controller no longer accepts this VM's writes (the
// VM token was refused or the attempt's lease is gone). The host will stop
// the VM; the build should stop too.
var ErrAttemptEnded = errors.New("the controller ended this build attempt")

// LogStream sends a build log to the controller as offset-addressed chunks
// (POST /api/builds/:id/logs?offset=N). Writes never block on the network:
// bytes are buffered (up to MaxBuffer, beyond which they are dropped and a
// "[… N bytes dropped …]" marker takes their place) and a background sender
// flushes them every FlushInterval, or at FlushBytes, at most MaxChunk per
// request. A failed request is resent from the same offset with backoff;
// the controller accepts bytes it already holds unchanged, so a resend after
// a lost answer neither loses nor duplicates anything. A 416 answer (the
// offset is beyond the log's end) moves the stream to the length the
// controller reports. Known secrets are redacted before anything is kept.
type LogStream struct {
	client  *api.Client
	buildID string
	token   string
	cfg     LogStreamConfig
	log     logrus.FieldLogger

	mu      sync.Mutex
	red     redactor
	tail    *tail
	buf     []byte // redacted bytes not yet acknowledged; buf[0] is at offset base
	base    int64  // -1 until known
	dropped int64  // bytes dropped since the last marker
	closing bool
	stopped bool  // the controller refuses further bytes: discard
	err     error // why the stream stopped, if it did
	sent    int64 // bytes acknowledged by the controller
	resyncs int   // times the offset was corrected by the controller

	kick   chan struct{}
	done   chan struct{}
	ended  chan struct{} // closed on ErrAttemptEnded
	cancel context.CancelFunc
}

// NewLogStream starts a stream for one build attempt. The sender keeps
// running after ctx is cancelled (a cancelled build's last words must still
// be delivered) until Close; ctx only carries values.
func NewLogStream(ctx context.Context, client *api.Client, buildID, vmToken string, cfg LogStreamConfig, log logrus.FieldLogger) *LogStream {
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s := &LogStream{
		client: client, buildID: buildID, token: vmToken, cfg: cfg, log: log,
		tail: newTail(cfg.TailLines), base: cfg.InitialOffset,
		kick: make(chan struct{}, 1), done: make(chan struct{}), ended: make(chan struct{}), cancel: cancel,
	}
	s.red.add(vmToken)
	go s.run(runCtx)
	return s
}

// AddSecret makes the stream redact secret from now on.
func (s *LogStream) AddSecret(secret string) {
	s.mu.Lock()
	s.red.add(secret)
	s.mu.Unlock()
}

// Write queues p. It always reports success: a build step must never fail
// or stall because its log could not be delivered.
func (s *LogStream) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return len(p), nil
	}
	s.append(s.red.write(p))
	return len(p), nil
}

// Printf writes one line of the bootstrap's own into the log.
func (s *LogStream) Printf(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	if len(line) == 0 || line[len(line)-1] != '\n' {
		line += "\n"
	}
	s.Write([]byte(line)) //nolint:errcheck // never fails
}

// append adds redacted bytes. Called with mu held.
func (s *LogStream) append(p []byte) {
	if len(p) == 0 {
		return
	}
	s.tail.write(p)
	if s.stopped {
		return
	}
	if s.dropped > 0 {
		marker := dropMarker(s.dropped)
		if len(s.buf)+len(marker) > s.cfg.MaxBuffer {
			s.dropped += int64(len(p))
			return
		}
		s.buf = append(s.buf, marker...)
		s.dropped = 0
	}
	room := s.cfg.MaxBuffer - len(s.buf)
	if room < len(p) {
		s.dropped += int64(len(p) - max(room, 0))
		p = p[:max(room, 0)]
	}
	s.buf = append(s.buf, p...)
	if len(s.buf) >= s.cfg.FlushBytes {
		s.signal()
	}
}

func dropMarker(n int64) []byte {
	return fmt.Appendf(nil, "\n[… %d bytes dropped …]\n", n)
}

func (s *LogStream) signal() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// Tail returns the last lines written (redacted), for error reports.
func (s *LogStream) Tail() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tail.String()
}

// Ended is closed when the controller refuses this VM's writes because the
// attempt is over (ErrAttemptEnded).
func (s *LogStream) Ended() <-chan struct{} { return s.ended }

// Stats reports bytes acknowledged and offset corrections so far.
func (s *LogStream) Stats() (sent int64, resyncs int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sent, s.resyncs
}

// Close stops accepting bytes, delivers everything buffered (retrying until
// ctx ends) and stops the sender. It returns an error when bytes were left
// undelivered or the controller stopped accepting them.
func (s *LogStream) Close(ctx context.Context) error {
	s.mu.Lock()
	if !s.closing {
		s.append(s.red.flush())
		if s.dropped > 0 && !s.stopped {
			s.buf = append(s.buf, dropMarker(s.dropped)...)
			s.dropped = 0
		}
		s.closing = true
	}
	s.mu.Unlock()
	s.signal()
	select {
	case <-s.done:
	case <-ctx.Done():
		s.cancel()
		<-s.done
	}
	s.cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	if n := len(s.buf); n > 0 {
		return fmt.Errorf("deliver build log: %d bytes left undelivered: %w", n, context.Cause(ctx))
	}
	return nil
}

func (s *LogStream) run(ctx context.Context) {
	defer close(s.done)
	t := time.NewTicker(s.cfg.FlushInterval)
	defer t.Stop()
	for {
		if err := s.flush(ctx); err != nil {
			if ctx.Err() != nil {
				return // Close gave up: it reports what is left
			}
			s.mu.Lock()
			s.err, s.stopped, s.buf = err, true, nil
			s.mu.Unlock()
			if errors.Is(err, ErrAttemptEnded) {
				close(s.ended)
			}
			s.log.WithError(err).Warn("build log streaming stopped; further output is discarded")
			s.waitClose(ctx)
			return
		}
		s.mu.Lock()
		finished := s.closing && len(s.buf) == 0
		s.mu.Unlock()
		if finished {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-s.kick:
		case <-t.C:
		}
	}
}

// waitClose idles a stopped stream until Close.
func (s *LogStream) waitClose(ctx context.Context) {
	for {
		s.mu.Lock()
		closing := s.closing
		s.mu.Unlock()
		if closing {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-s.kick:
		}
	}
}

// flush sends everything buffered, retrying transient failures. It returns
// nil when the buffer is empty, or the error that stops the stream.
func (s *LogStream) flush(ctx context.Context) error {
	b := api.Backoff{Initial: s.cfg.RetryMin, Max: s.cfg.RetryMax, Jitter: 0.5}.Sequence()
	for {
		if s.base < 0 {
			n, err := s.post(ctx, 0, nil) // an empty append answers the log's length
			if err != nil {
				if cerr := s.classify(ctx, err); cerr != nil {
					return cerr
				}
				if err := api.Sleep(ctx, b.After(err)); err != nil {
					return err
				}
				continue
			}
			s.mu.Lock()
			s.base = n
			s.mu.Unlock()
			b.Reset()
		}
		s.mu.Lock()
		chunk := s.buf[:min(len(s.buf), s.cfg.MaxChunk)]
		base := s.base
		s.mu.Unlock()
		if len(chunk) == 0 {
			return nil
		}
		n, err := s.post(ctx, base, chunk)
		var apiErr *api.Error
		switch {
		case err == nil:
			s.mu.Lock()
			end := base + int64(len(chunk))
			switch {
			case n == end: // the usual case
				s.buf = s.buf[len(chunk):]
				s.sent += int64(len(chunk))
			case n > base && n < end: // impossible per the contract; keep what it took
				s.buf = s.buf[n-base:]
				s.sent += n - base
			default:
				// n > end: the log already held more than our offset
				// (InitialOffset was too low), so nothing of ours was
				// stored; n < base: it holds less. Resend at its end.
				s.log.WithFields(logrus.Fields{"offset": base, "length": n}).Warn("build log offset corrected by the controller")
				s.resyncs++
			}
			s.base = n
			s.mu.Unlock()
			b.Reset()
		case errors.As(err, &apiErr) && apiErr.Status == http.StatusRequestedRangeNotSatisfiable && apiErr.Length != nil:
			// Our offset is beyond the log's end: continue from there.
			s.mu.Lock()
			s.log.WithFields(logrus.Fields{"offset": base, "length": *apiErr.Length}).Warn("build log offset beyond the controller's log; resending from its end")
			s.base = *apiErr.Length
			s.resyncs++
			s.mu.Unlock()
			if s.resyncs%10 == 0 { // never spin against a confused server
				if err := api.Sleep(ctx, b.Next()); err != nil {
					return err
				}
			}
		default:
			if err := s.classify(ctx, err); err != nil {
				return err
			}
			d := b.After(err)
			s.log.WithError(err).WithField("retry_in", d.Round(time.Millisecond)).Debug("build log append failed; resending")
			if err := api.Sleep(ctx, d); err != nil {
				return err
			}
		}
	}
}

// classify returns nil for a failure worth retrying, else the error that
// stops the stream.
func (s *LogStream) classify(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	if transient(err) {
		return nil
	}
	switch api.StatusOf(err) {
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, http.StatusConflict:
		return fmt.Errorf("%w: append to the build log: %w", ErrAttemptEnded, err)
	case http.StatusRequestEntityTooLarge:
		return fmt.Errorf("the build log reached the controller's size limit: %w", err)
	}
	return fmt.Errorf("append to the build log: %w", err)
}

func (s *LogStream) post(ctx context.Context, offset int64, data []byte) (int64, error) {
	rctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	return s.client.AppendLog(rctx, s.buildID, s.token, offset, data)
}
