//go:build darwin

package launchd

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"
)

// RunOnce loads job into this user's GUI domain (gui/UID), where the login
// item runs, waits until it has run and exited, unloads it and returns its
// exit status. The job's plist is written into dir.
func RunOnce(ctx context.Context, job Job, dir string) (int, error) {
	text, err := job.Render()
	if err != nil {
		return 0, err
	}
	path := filepath.Join(dir, job.Label+".plist")
	if err := os.WriteFile(path, text, 0o644); err != nil {
		return 0, fmt.Errorf("write the %s plist: %w", job.Label, err)
	}
	domain := "gui/" + strconv.Itoa(os.Getuid())
	target := domain + "/" + job.Label
	if out, err := exec.CommandContext(ctx, "/bin/launchctl", "bootstrap", domain, path).CombinedOutput(); err != nil {
		return 0, fmt.Errorf("launchctl bootstrap %s %s: %w: %s", domain, path, err, bytes.TrimSpace(out))
	}
	defer exec.Command("/bin/launchctl", "bootout", target).Run() //nolint:errcheck // it may have gone already
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		out, err := exec.CommandContext(ctx, "/bin/launchctl", "print", target).CombinedOutput()
		if err != nil {
			return 0, fmt.Errorf("launchctl print %s: %w: %s", target, err, bytes.TrimSpace(out))
		}
		if s := parseServiceState(out); s.exited && !s.running {
			return s.lastExit, nil
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("wait for %s to finish: %w", target, ctx.Err())
		case <-tick.C:
		}
	}
}
