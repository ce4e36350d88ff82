package hostsignals

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"time"
)

// System reads the signals from the host itself (see the platform files).
// Each reading that fails stays unknown; Read returns what it could read
// and the failures joined.
type System struct {
	DataDir string // free disk is measured on its file system
	// PowerSupplies is Linux's power-supply class (/sys/class/power_supply
	// when empty); unused on macOS.
	PowerSupplies string
}

// freeDisk fills s.FreeDiskBytes.
func (sys System) freeDisk(s *Signals) error {
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
