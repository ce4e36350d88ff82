package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/internal/buildphase"
)

// buildPhases reads a build's whole log through the phase parser (the
// dashboard's, so both tell the same phases and durations).
func (a *App) buildPhases(ctx context.Context, s *session, b api.Build) ([]buildphase.Phase, error) {
	start := b.SubmittedAt
	if b.StartedAt != nil {
		start = *b.StartedAt
	}
	p := buildphase.NewParser(start)
	p.KeepLines = 1 // status shows the phases, not their lines
	var after int64
	err := s.withBuild(ctx, b.ID, "read the log of build "+b.ID, true, func(ctx context.Context, c *api.Client) error {
		for {
			chunk, err := c.ReadLogs(ctx, b.ID, after)
			if err != nil {
				return err
			}
			p.Write(chunk.Data)
			after += int64(len(chunk.Data))
			if len(chunk.Data) == 0 || after >= chunk.Length {
				return nil
			}
		}
	})
	if err != nil {
		return nil, err
	}
	var ended time.Time
	if b.CompletedAt != nil && b.Status.Terminal() {
		ended = *b.CompletedAt
	}
	return p.Phases(ended, phaseStatus(b.Status)), nil
}

// phaseStatus is how a build's last phase ended.
func phaseStatus(s api.BuildStatus) buildphase.Status {
	switch s {
	case api.StatusCompleted:
		return buildphase.Succeeded
	case api.StatusFailed:
		return buildphase.Failed
	case api.StatusCancelled:
		return buildphase.Cancelled
	}
	return buildphase.Running
}

// printPhases lists the phases with their status and duration.
func printPhases(u *ui, phases []buildphase.Phase, now time.Time) {
	if len(phases) == 0 {
		return
	}
	u.printf("  Phases\n")
	for _, ph := range phases {
		mark := map[buildphase.Status]string{buildphase.Succeeded: u.o(cGreen, "✔"), buildphase.Failed: u.o(cRed, "✖"),
			buildphase.Cancelled: u.o(cRed, "✖"), buildphase.Running: u.o(cDim, "…")}[ph.Status]
		u.printf("    %s %-32s %8s  %s\n", mark, ph.Title, humanDuration(ph.Duration(now)), ph.Status)
	}
}

// phaseHeading is how `logs` prints a phase marker line: a heading.
func phaseHeading(u *ui, line string) (string, bool) {
	id, _, ok := buildphase.ParseMarker(line)
	if !ok {
		return "", false
	}
	return u.o(cBold, fmt.Sprintf("── %s ──", id.Title())), true
}
