package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/freeagent-build/freeagent/internal/bytesize"
)

// ui writes a command's output: results on standard output (JSON with
// --json), messages, warnings and progress on standard error. Colour and
// progress bars only on a terminal.
type ui struct {
	out, err io.Writer
	json     bool
	color    bool // stdout
	errColor bool // stderr
	errTTY   bool
	quiet    bool     // no informational messages (JSON mode)
	secrets  []string // never printed
	session  *session // the command\'s, once opened (for messages)
	// insecureWarned: the plain-HTTP warning was printed (once a run).
	insecureWarned bool
	mu             sync.Mutex
}

const (
	cReset  = "\033[0m"
	cBold   = "\033[1m"
	cDim    = "\033[2m"
	cRed    = "\033[31m"
	cGreen  = "\033[32m"
	cYellow = "\033[33m"
	cCyan   = "\033[36m"
)

func paint(on bool, code, s string) string {
	if !on || s == "" || code == "" {
		return s
	}
	return code + s + cReset
}

// o paints for standard output.
func (u *ui) o(code, s string) string { return paint(u.color, code, s) }

// e paints for standard error.
func (u *ui) e(code, s string) string { return paint(u.errColor, code, s) }

func (u *ui) printf(format string, args ...any) {
	u.mu.Lock()
	defer u.mu.Unlock()
	fmt.Fprint(u.out, redact(fmt.Sprintf(format, args...), u.secrets...))
}

// info is a message for people (suppressed with --json).
func (u *ui) info(format string, args ...any) {
	if u.quiet {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	fmt.Fprintln(u.err, redact(fmt.Sprintf(format, args...), u.secrets...))
}

func (u *ui) warn(format string, args ...any) {
	u.mu.Lock()
	defer u.mu.Unlock()
	fmt.Fprintln(u.err, u.e(cYellow, "warning: ")+redact(fmt.Sprintf(format, args...), u.secrets...))
}

// emit writes one JSON document (a line) to standard output.
func (u *ui) emit(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	_, err = fmt.Fprintln(u.out, redact(string(b), u.secrets...))
	return err
}

func (u *ui) fail(code int, msg, hint string) {
	msg, hint = redact(msg, u.secrets...), redact(hint, u.secrets...)
	if u.json {
		b, _ := json.Marshal(map[string]any{"error": msg, "hint": hint, "exit_code": code})
		fmt.Fprintln(u.err, string(b))
		return
	}
	fmt.Fprintln(u.err, u.e(cRed+cBold, "error: ")+msg)
	if hint != "" {
		fmt.Fprintln(u.err, u.e(cDim, "  → ")+hint)
	}
}

func humanDuration(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	default:
		return d.Round(time.Second).String()
	}
}

func ago(t time.Time, now time.Time) string {
	d := now.Sub(t)
	switch {
	case d < 0:
		return "just now"
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	default:
		return fmt.Sprintf("%dd ago", int(d.Hours()/24))
	}
}

// progress draws a one-line progress bar on a terminal (nothing elsewhere).
// Writers add to done (work completed, out of total) and moved (bytes over
// the network, for the rate).
type progress struct {
	u      *ui
	label  string
	total  int64 // 0: unknown
	done   atomic.Int64
	moved  atomic.Int64
	start  time.Time
	stop   chan struct{}
	wg     sync.WaitGroup
	detail func() string // extra text, e.g. "sent 4.1 MB"

	samples []sample // for the rate: the last few seconds
}

type sample struct {
	t time.Time
	n int64
}

func (u *ui) newProgress(label string, total int64) *progress {
	p := &progress{u: u, label: label, total: total, start: time.Now(), stop: make(chan struct{})}
	if u.errTTY {
		p.wg.Add(1)
		go p.loop()
	}
	return p
}

func (p *progress) loop() {
	defer p.wg.Done()
	t := time.NewTicker(150 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			p.draw()
		}
	}
}

// rate is bytes/s over the last 3 s.
func (p *progress) rate() float64 {
	now, n := time.Now(), p.moved.Load()
	p.samples = append(p.samples, sample{now, n})
	for len(p.samples) > 1 && now.Sub(p.samples[0].t) > 3*time.Second {
		p.samples = p.samples[1:]
	}
	first := p.samples[0]
	if dt := now.Sub(first.t).Seconds(); dt > 0.2 {
		return float64(n-first.n) / dt
	}
	if dt := now.Sub(p.start).Seconds(); dt > 0 {
		return float64(n) / dt
	}
	return 0
}

func (p *progress) draw() {
	done, rate := p.done.Load(), p.rate()
	var b strings.Builder
	b.WriteString(p.label)
	if p.total > 0 {
		frac := min(float64(done)/float64(p.total), 1)
		const width = 24
		fill := int(frac * width)
		b.WriteString(" [" + p.u.e(cCyan, strings.Repeat("█", fill)) + strings.Repeat("░", width-fill) + "]")
		fmt.Fprintf(&b, " %3.0f%% %s/%s", frac*100, bytesize.SI(done), bytesize.SI(p.total))
	} else {
		fmt.Fprintf(&b, " %s", bytesize.SI(done))
	}
	if p.detail != nil {
		b.WriteString(" · " + p.detail())
	}
	fmt.Fprintf(&b, " · %s/s", bytesize.SI(int64(rate)))
	if el := time.Since(p.start); p.total > 0 && done > 0 && done < p.total && el > time.Second {
		fmt.Fprintf(&b, " · ETA %s", (time.Duration(float64(el) * float64(p.total-done) / float64(done))).Round(time.Second))
	}
	p.u.mu.Lock()
	fmt.Fprint(p.u.err, "\r\033[K"+b.String())
	p.u.mu.Unlock()
}

// finish removes the bar and returns the elapsed time.
func (p *progress) finish() time.Duration {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	p.wg.Wait()
	if p.u.errTTY {
		p.u.mu.Lock()
		fmt.Fprint(p.u.err, "\r\033[K")
		p.u.mu.Unlock()
	}
	return time.Since(p.start)
}
