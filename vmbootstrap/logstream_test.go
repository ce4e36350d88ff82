package vmbootstrap

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/freeagent-build/freeagent/api"
)

func quietLog() logrus.FieldLogger {
	l := logrus.New()
	l.SetOutput(io.Discard)
	return l
}

func fastStreamConfig() LogStreamConfig {
	c := DefaultLogStreamConfig()
	c.FlushInterval = 50 * time.Millisecond
	c.RetryMin = 20 * time.Millisecond
	c.RetryMax = 200 * time.Millisecond
	c.RequestTimeout = 5 * time.Second
	return c
}

// streamEnv is a running attempt on a real controller with its VM token.
type streamEnv struct {
	c     *testController
	id    string
	token string
}

func newStreamEnv(t *testing.T) streamEnv {
	c := startController(t)
	j := c.startJob(api.PlatformAndroid, project(t, map[string]string{"package.json": "{}"}), nil)
	return streamEnv{c: c, id: j.sub.ID, token: c.vmToken(j.job)}
}

func (e streamEnv) stream(t *testing.T, baseURL string, cfg LogStreamConfig) *LogStream {
	s := NewLogStream(context.Background(), &api.Client{BaseURL: baseURL, HTTP: newHTTPClient()}, e.id, e.token, cfg, quietLog())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		s.Close(ctx)
	})
	return s
}

func closeStream(t *testing.T, s *LogStream) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := s.Close(ctx); err != nil {
		t.Fatalf("close: %v", err)
	}
}

// TestLogStreamResyncsOn416: a stream started beyond the log's end is
// answered 416 with the length, and continues from there: nothing lost,
// nothing duplicated.
func TestLogStreamResyncsOn416(t *testing.T) {
	t.Parallel()
	e := newStreamEnv(t)
	cfg := fastStreamConfig()
	cfg.InitialOffset = 5000
	s := e.stream(t, e.c.URL, cfg)
	var want bytes.Buffer
	for i := range 20 {
		line := fmt.Sprintf("line %02d\n", i)
		want.WriteString(line)
		s.Write([]byte(line))
		if i%5 == 0 {
			time.Sleep(60 * time.Millisecond) // several requests
		}
	}
	closeStream(t, s)
	if got := e.c.log(e.id); !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("log:\n%q\nwant:\n%q", got, want.Bytes())
	}
	if _, resyncs := s.Stats(); resyncs < 1 {
		t.Fatal("the 416 was not seen")
	}
}

// TestLogStreamInitialOffsetTooLow: a stream that believes the log is
// shorter than it is (an earlier attempt wrote to it) would have its bytes
// taken for a resend and silently dropped; the stream notices the length
// beyond its chunk and appends after it. The default (probe the length)
// needs no correction at all.
func TestLogStreamInitialOffsetTooLow(t *testing.T) {
	t.Parallel()
	e := newStreamEnv(t)
	ctx := context.Background()
	vm := &api.Client{BaseURL: e.c.URL}
	earlier := "attempt 1: a long line that makes the log longer than our first chunk\n"
	if _, err := vm.AppendLog(ctx, e.id, e.token, 0, []byte(earlier)); err != nil {
		t.Fatal(err)
	}
	cfg := fastStreamConfig()
	cfg.InitialOffset = 0
	s := e.stream(t, e.c.URL, cfg)
	s.Write([]byte("attempt 2 starts\n"))
	closeStream(t, s)
	s2 := e.stream(t, e.c.URL, fastStreamConfig()) // probes the length
	s2.Write([]byte("attempt 3 starts\n"))
	closeStream(t, s2)
	want := earlier + "attempt 2 starts\nattempt 3 starts\n"
	if got := string(e.c.log(e.id)); got != want {
		t.Fatalf("log %q, want %q", got, want)
	}
	if _, resyncs := s2.Stats(); resyncs != 0 {
		t.Fatalf("the probing stream needed %d corrections", resyncs)
	}
}

// TestLogStreamSurvivesOutage: the controller is unreachable for a while,
// then requests reach it but the answers are lost, then all is well again:
// every byte arrives exactly once, in order.
func TestLogStreamSurvivesOutage(t *testing.T) {
	t.Parallel()
	e := newStreamEnv(t)
	p := newProxy(t, e.c.URL)
	s := e.stream(t, p.URL(), fastStreamConfig())
	var want bytes.Buffer
	write := func(from, to int) {
		for i := from; i < to; i++ {
			line := fmt.Sprintf("output line %03d %s\n", i, strings.Repeat("x", i%17))
			want.WriteString(line)
			s.Write([]byte(line))
			if i%10 == 0 {
				time.Sleep(15 * time.Millisecond)
			}
		}
	}
	write(0, 50)
	waitFor(t, 5*time.Second, "the first lines", func() bool { return len(e.c.log(e.id)) > 0 })

	p.setMode(proxyRefuse)
	write(50, 120)
	time.Sleep(300 * time.Millisecond) // several failed attempts
	if got := len(e.c.log(e.id)); got >= want.Len() {
		t.Fatalf("bytes arrived through a refusing proxy (%d)", got)
	}

	p.setMode(proxyDropAnswers)
	write(120, 200)
	waitFor(t, 5*time.Second, "requests delivered without answers", func() bool { return p.dropped.Load() >= 2 })

	p.setMode(proxyPass)
	write(200, 260)
	closeStream(t, s)
	got := e.c.log(e.id)
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("log differs: got %d bytes, want %d\n got: %q\nwant: %q", len(got), want.Len(), got, want.Bytes())
	}
	if sent, _ := s.Stats(); sent != int64(want.Len()) {
		t.Fatalf("acknowledged %d bytes, want %d", sent, want.Len())
	}
}

// TestLogStreamBoundedBuffer: while the controller is unreachable, bytes
// beyond MaxBuffer are dropped and replaced by a marker counting them.
func TestLogStreamBoundedBuffer(t *testing.T) {
	t.Parallel()
	e := newStreamEnv(t)
	p := newProxy(t, e.c.URL)
	p.setMode(proxyRefuse)
	cfg := fastStreamConfig()
	cfg.MaxBuffer = 4096
	s := e.stream(t, p.URL(), cfg)
	line := strings.Repeat("y", 99) + "\n"
	for range 100 { // 10 000 bytes: 4096 kept, the rest dropped
		s.Write([]byte(line))
	}
	time.Sleep(100 * time.Millisecond)
	p.setMode(proxyPass)
	waitFor(t, 5*time.Second, "the buffer to drain", func() bool { return len(e.c.log(e.id)) == 4096 })
	s.Write([]byte("after the outage\n"))
	closeStream(t, s)
	got := string(e.c.log(e.id))
	want := strings.Repeat(line, 40) + strings.Repeat("y", 96) + "\n[… 5904 bytes dropped …]\nafter the outage\n"
	if got != want {
		t.Fatalf("log:\n%q\nwant:\n%q", got, want)
	}
	if !strings.Contains(s.Tail(), "after the outage") || strings.Count(s.Tail(), "\n") < 40 {
		t.Fatalf("the tail keeps every line, dropped or not: %q", s.Tail())
	}
}

// TestLogStreamChunksAndFlushThreshold: 64 KiB buffered are sent without
// waiting for the flush interval, and no request exceeds MaxChunk (the
// controller refuses appends over 1 MiB).
func TestLogStreamChunksAndFlushThreshold(t *testing.T) {
	t.Parallel()
	e := newStreamEnv(t)
	cfg := DefaultLogStreamConfig()
	cfg.FlushInterval = time.Hour
	s := e.stream(t, e.c.URL, cfg)
	big := bytes.Repeat([]byte("0123456789abcdef\n"), 70<<10/17)
	s.Write(big)
	waitFor(t, 5*time.Second, "a flush at 64 KiB", func() bool { return len(e.c.log(e.id)) == len(big) })
	huge := bytes.Repeat([]byte("z"), 3<<20+123)
	s.Write(huge)
	closeStream(t, s)
	if got := e.c.log(e.id); !bytes.Equal(got, append(big, huge...)) {
		t.Fatalf("log of %d bytes, want %d", len(got), len(big)+len(huge))
	}
}

// TestLogStreamRedactsSplitSecrets: a secret written in pieces is still
// redacted.
func TestLogStreamRedactsSplitSecrets(t *testing.T) {
	t.Parallel()
	e := newStreamEnv(t)
	s := e.stream(t, e.c.URL, fastStreamConfig())
	s.AddSecret("hunter2-p12-password")
	for _, piece := range []string{"password is hun", "ter2-p12-pass", "word; token ", e.token[:5], e.token[5:], "\n", "ends with hunt"} {
		s.Write([]byte(piece))
		time.Sleep(60 * time.Millisecond) // let partial lines be flushed
	}
	closeStream(t, s)
	got := string(e.c.log(e.id))
	want := "password is [REDACTED]; token [REDACTED]\nends with hunt"
	if got != want {
		t.Fatalf("log %q, want %q", got, want)
	}
}

// TestLogStreamAttemptEnded: once the attempt is over the controller
// refuses the VM token; the stream reports it through Ended.
func TestLogStreamAttemptEnded(t *testing.T) {
	t.Parallel()
	c := startController(t)
	j := c.startJob(api.PlatformAndroid, project(t, map[string]string{"package.json": "{}"}), nil)
	s := NewLogStream(context.Background(), &api.Client{BaseURL: c.URL}, j.sub.ID, c.vmToken(j.job), fastStreamConfig(), quietLog())
	s.Write([]byte("before\n"))
	waitFor(t, 5*time.Second, "the first bytes", func() bool { return len(c.log(j.sub.ID)) > 0 })
	if _, err := c.report(j, api.Result{Success: false, ErrorMessage: "stopped by the host", ErrorCode: api.CodeCancelled}); err != nil {
		t.Fatal(err)
	}
	s.Write([]byte("after\n"))
	select {
	case <-s.Ended():
	case <-time.After(5 * time.Second):
		t.Fatal("Ended not closed after the attempt ended")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := s.Close(ctx); err == nil || !strings.Contains(err.Error(), "ended this build attempt") {
		t.Fatalf("close: %v", err)
	}
	if got := string(c.log(j.sub.ID)); got != "before\n" {
		t.Fatalf("log %q", got)
	}
}
