package cli

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/freeagent-build/freeagent/api"
)

const logsHelp = `Prints a build's log so far. With -f it follows the log live until the build ends and
exits 0 when the build completed, 1 when it failed or was cancelled. The follow uses the
controller's server-sent events; a dropped connection is resumed from the last line
received (Last-Event-ID), and a proxy that does not pass event streams is handled by
polling. With --json: one object per line, {"offset": N, "line": "..."}, then
{"event": "end", "status": "..."}.`

func (a *App) cmdLogs(ctx context.Context, inv *invocation, args []string) error {
	fs := inv.flags()
	follow := fs.Bool("follow", false, "follow the log until the build ends")
	inv.alias(fs, "f", "follow")
	s, id, err := inv.buildArg(fs, args)
	if err != nil {
		return err
	}
	sink := &logSink{u: inv.ui}
	if !*follow {
		status, err := a.readLogs(ctx, s, id, 0, sink, false)
		if err != nil {
			return err
		}
		sink.flush()
		if inv.json {
			return inv.ui.emit(map[string]any{"event": "status", "status": status, "length": sink.offset})
		}
		if !status.Terminal() {
			inv.ui.info("%s build %s is %s; follow the log with: expo-build logs %s -f", inv.ui.e(cDim, "—"), id, status, id)
		}
		return nil
	}
	status, err := a.followLogs(ctx, s, id, sink)
	if err != nil {
		return err
	}
	return a.reportEnd(ctx, inv, s, id, status)
}

// reportEnd prints how a followed build ended and returns the exit error.
func (a *App) reportEnd(ctx context.Context, inv *invocation, s *session, id string, status api.BuildStatus) error {
	if inv.json {
		inv.ui.emit(map[string]any{"event": "end", "status": status}) //nolint:errcheck
	}
	if status == api.StatusCompleted {
		inv.ui.info("%s build %s completed; fetch it with: expo-build build:download %s", inv.ui.e(cGreen, "✔"), id, id)
		return nil
	}
	b, err := s.getBuild(ctx, id)
	if err != nil {
		return &buildEnded{id: id, status: status}
	}
	return endResult(b)
}

// logSink prints log lines: raw text, or JSON objects with their offsets.
type logSink struct {
	u       *ui
	partial []byte // polling: bytes of a line not yet ended
	offset  int64  // bytes consumed
}

func (k *logSink) line(text string, end int64) {
	k.offset = end
	if k.u.json {
		k.u.emit(map[string]any{"offset": end, "line": text}) //nolint:errcheck
		return
	}
	if h, ok := phaseHeading(k.u, text); ok {
		k.u.printf("\n%s\n", h)
		return
	}
	k.u.printf("%s\n", plainText(text))
}

// bytes takes raw log bytes ending at offset end (polling).
func (k *logSink) bytes(data []byte, end int64) {
	start := end - int64(len(data)) - int64(len(k.partial))
	data = append(k.partial, data...)
	k.partial = nil
	for {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break
		}
		start += int64(i + 1)
		k.line(strings.TrimRight(string(data[:i]), "\r"), start)
		data = data[i+1:]
	}
	if len(data) > 0 {
		k.partial = append([]byte(nil), data...)
	}
	k.offset = end
}

func (k *logSink) flush() {
	if len(k.partial) > 0 {
		p := k.partial
		k.partial = nil
		k.line(string(p), k.offset)
	}
}

// readLogs reads the log from offset after with plain GETs: up to its
// current length, or (until) until the build has ended.
func (a *App) readLogs(ctx context.Context, s *session, id string, after int64, sink *logSink, until bool) (api.BuildStatus, error) {
	var status api.BuildStatus
	err := s.withBuild(ctx, id, "read the log of build "+id, true, func(ctx context.Context, c *api.Client) error {
		for {
			rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			chunk, err := c.ReadLogs(rctx, id, after)
			cancel()
			if err != nil {
				return err
			}
			after += int64(len(chunk.Data))
			sink.bytes(chunk.Data, after)
			status = chunk.Status
			if after >= chunk.Length && (!until || chunk.Status.Terminal()) {
				return nil
			}
			if len(chunk.Data) == 0 {
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(a.pollInterval()):
				}
			}
		}
	})
	return status, err
}

func (a *App) pollInterval() time.Duration {
	if a.PollInterval > 0 {
		return a.PollInterval
	}
	return 2 * time.Second
}

func (a *App) stallTimeout() time.Duration {
	if a.StallTimeout > 0 {
		return a.StallTimeout
	}
	return 60 * time.Second
}

var (
	errNotSSE      = errors.New("the answer is not an event stream")
	errStreamEnded = errors.New("the controller closed the log stream before the build ended")
)

// followLogs follows the log over server-sent events until the build ends
// and returns its final status. A dropped stream is resumed from the last
// event's id; consecutive failures without a line received are bounded by
// the retry policy.
func (a *App) followLogs(ctx context.Context, s *session, id string, sink *logSink) (api.BuildStatus, error) {
	clients, err := s.buildClients(id)
	if err != nil {
		return "", err
	}
	var after int64
	var status api.BuildStatus
	ci := 0
	err = a.resume(ctx, &after, func(err error) bool { return retryable(err) || errors.Is(err, errStreamEnded) }, func(ctx context.Context) error {
		for {
			st, err := a.followOnce(ctx, clients[ci], id, &after, sink)
			// Credentials the controller refuses: try the next ones at once.
			if code := api.StatusOf(err); (code == http.StatusUnauthorized || code == http.StatusForbidden) && ci < len(clients)-1 {
				ci++
				continue
			}
			status = st
			return err
		}
	}, func(err error, wait time.Duration) {
		if !errors.Is(err, errStreamEnded) {
			s.ui.warn("log stream interrupted (%s); resuming from byte %d in %s", shortNetErr(err), after, wait.Round(100*time.Millisecond))
		}
	})
	switch {
	case err == nil:
		sink.flush()
		return status, nil
	case ctx.Err() != nil:
		return "", ctx.Err()
	case errors.Is(err, errNotSSE):
		s.ui.info("the controller's answer is not an event stream (a proxy?); polling the log instead")
		status, err := a.readLogs(ctx, s, id, after, sink, true)
		sink.flush()
		return status, err
	}
	return "", wrapOp("follow the log of build "+id, err)
}

// followOnce reads one event stream. It returns the build's final status on
// the "end" event, or the error that broke the stream.
func (a *App) followOnce(ctx context.Context, c *api.Client, id string, after *int64, sink *logSink) (api.BuildStatus, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	h := map[string]string{"Accept": "text/event-stream", "Cache-Control": "no-cache"}
	if *after > 0 {
		h["Last-Event-ID"] = strconv.FormatInt(*after, 10)
	}
	resp, err := rawRequest(ctx, c, http.MethodGet, "/api/builds/"+url.PathEscape(id)+"/logs?after="+strconv.FormatInt(*after, 10), nil, h)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		return "", errNotSSE
	}
	body := newStallReader(resp.Body, a.stallTimeout(), cancel)
	defer body.stop()
	br := bufio.NewReaderSize(body, 64<<10)
	var evID, evName string
	var data []string
	for {
		line, err := readLine(br, 4<<20)
		if err != nil {
			if body.stalled() {
				return "", errStalled
			}
			if errors.Is(err, io.EOF) {
				return "", errStreamEnded
			}
			return "", err
		}
		if line == "" { // dispatch
			if evName == "end" {
				return api.BuildStatus(strings.TrimSpace(strings.Join(data, "\n"))), nil
			}
			if len(data) > 0 && (evName == "" || evName == "message") {
				end := *after
				if n, err := strconv.ParseInt(evID, 10, 64); err == nil {
					end = n
				}
				for _, d := range data {
					sink.line(d, end)
				}
				*after = end
			}
			evID, evName, data = "", "", nil
			continue
		}
		if line[0] == ':' {
			continue // comment: keep-alive
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "id":
			evID = value
		case "event":
			evName = value
		case "data":
			data = append(data, value)
		}
	}
}

// readLine reads a line without its end; a longer line is cut at limit.
func readLine(br *bufio.Reader, limit int) (string, error) {
	var buf []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(buf)+len(chunk) <= limit {
			buf = append(buf, chunk...)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			return "", err
		}
		return strings.TrimRight(string(buf), "\r\n"), nil
	}
}

// stallReader cancels a stream that delivers nothing for too long.
type stallReader struct {
	r       io.Reader
	timeout time.Duration
	timer   *time.Timer
	mu      sync.Mutex
	fired   bool
}

func newStallReader(r io.Reader, timeout time.Duration, cancel func()) *stallReader {
	s := &stallReader{r: r, timeout: timeout}
	s.timer = time.AfterFunc(timeout, func() {
		s.mu.Lock()
		s.fired = true
		s.mu.Unlock()
		cancel()
	})
	return s
}

func (s *stallReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if n > 0 {
		s.timer.Reset(s.timeout)
	}
	if err != nil && s.stalled() {
		return n, fmt.Errorf("%w (%s)", errStalled, s.timeout)
	}
	return n, err
}

func (s *stallReader) stalled() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fired
}

func (s *stallReader) stop() { s.timer.Stop() }
