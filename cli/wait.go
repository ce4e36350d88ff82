package cli

import (
	"context"
	"time"

	"github.com/freeagent-build/freeagent/api"
)

// waitAndDownload follows a submitted build (status changes, or the log
// with --logs) and downloads the artifacts once it completed. It returns
// the build as it ended (as far as it was followed).
func (a *App) waitAndDownload(ctx context.Context, inv *invocation, s *session, id string, o submitOpts) (api.Build, error) {
	u := inv.ui
	if !inv.json {
		u.printf("%s Build %s queued; waiting for it (Ctrl-C stops waiting, not the build)\n", u.o(cGreen, "✔"), u.o(cBold, id))
	}
	var final api.Build
	if o.logs {
		status, err := a.followLogs(ctx, s, id, &logSink{u: u})
		if err != nil {
			return final, err
		}
		if final, err = s.getBuild(ctx, id); err != nil {
			return final, err
		}
		final.Status = status
	} else {
		b, err := s.getBuild(ctx, id)
		if err != nil {
			return b, err
		}
		last := ""
		show := func(b api.Build) {
			if k := watchKey(b); k != last && !inv.json {
				last = k
				u.printf("%s  %s\n", u.o(cDim, time.Now().Format("15:04:05")), statusLine(u, b))
			}
		}
		show(b)
		if final, err = a.watchBuild(ctx, s, id, b, show); err != nil {
			return final, err
		}
	}
	if final.Status != api.StatusCompleted {
		return final, endResult(final)
	}
	_, err := a.download(ctx, inv, s, final, o.output, o.force, "")
	return final, err
}

// downloadReused downloads the artifacts of the build submit --reuse
// returned: it has completed, there is nothing to wait for.
func (a *App) downloadReused(ctx context.Context, inv *invocation, s *session, b api.Build, o submitOpts) error {
	u := inv.ui
	if !inv.json {
		u.printf("%s Build %s reused (same source, profile, platform, credentials and variables); downloading its artifacts\n", u.o(cGreen, "✔"), u.o(cBold, b.ID))
	}
	_, err := a.download(ctx, inv, s, b, o.output, o.force, "")
	return err
}
