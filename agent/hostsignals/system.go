package hostsignals

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"sync"
	"time"
)

// System reads the signals from the host itself (see the platform files).
// Each reading that fails stays unknown; Read returns what it could read
// and the failures joined. Use it by pointer: it remembers the thermal
// state between reads.
type System struct {
	DataDir string // free disk is measured on its file system
	// PowerSupplies is Linux's power-supply class (/sys/class/power_supply
	// when empty); unused on macOS.
	PowerSupplies string

	thermal slowReading[Thermal]
}

// thermalEvery is how long a nominal thermal state is trusted before it
// is read again. A Mac heats up over minutes, so a nominal reading can
// wait; any other is read at every check, so that a pause for heat ends
// as promptly as the others.
const thermalEvery = 30 * time.Second

// slowReading keeps the last reading of a signal that is slow to change
// and costly to read (a process on macOS), so a check every few seconds
// does not start that process every time.
type slowReading[T comparable] struct {
	mu  sync.Mutex
	v   T
	at  time.Time // of the last successful reading; zero: none
	now func() time.Time
}

// get returns the kept reading while it is settled and younger than
// every, else reads afresh with read. A failed read is not kept: the next
// get reads again.
func (r *slowReading[T]) get(every time.Duration, settled T, read func() (T, error)) (T, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now
	if r.now != nil {
		now = r.now
	}
	t := now()
	if !r.at.IsZero() && r.v == settled && t.Sub(r.at) < every {
		return r.v, nil
	}
	v, err := read()
	if err == nil {
		r.v, r.at = v, t
	}
	return v, err
}

// freeDisk fills s.FreeDiskBytes.
func (sys *System) freeDisk(s *Signals) error {
	if sys.DataDir == "" {
		return nil
	}
	n, err := FreeBytes(sys.DataDir)
	if err != nil {
		return fmt.Errorf("free disk: %w", err)
	}
	s.FreeDiskBytes = &n
	return nil
}

// maxOutput bounds what a system command may print: `ioreg -c IOHIDSystem`
// is the longest, at a few tens of KiB.
const maxOutput = 4 << 20

// output runs a system command with a deadline and bounded output.
func output(ctx context.Context, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	var out limited
	out.max = maxOutput
	cmd.Stdout = &out
	var stderr bytes.Buffer
	cmd.Stderr = &limited{Buffer: &stderr, max: 4 << 10}
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s %v: %w: %s", name, args, err, bytes.TrimSpace(stderr.Bytes()))
	}
	if out.over {
		return "", fmt.Errorf("%s %v printed more than %d MiB", name, args, maxOutput>>20)
	}
	return out.String(), nil
}

// limited keeps the first max bytes written and drops the rest.
type limited struct {
	*bytes.Buffer
	max  int
	over bool
}

func (l *limited) Write(p []byte) (int, error) {
	if l.Buffer == nil {
		l.Buffer = &bytes.Buffer{}
	}
	if room := l.max - l.Len(); len(p) > room {
		l.over = true
		if room > 0 {
			l.Buffer.Write(p[:room])
		}
		return len(p), nil
	}
	return l.Buffer.Write(p)
}

var _ io.Writer = (*limited)(nil)
