package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/freeagent-build/freeagent/api"
)

// ReportPause records a worker's own pauses: its owner's and its host's
// (api.WorkerPauseReport). The admin's pause is not touched: each of the
// three is set and cleared only by who set it. A change is an audit event
// (worker.owner_paused, worker.host_paused, … _resumed). The report's warm
// spare replaces the last one (none: the worker keeps no spare); its
// changes are not audited, as they come with every build.
func (s *Store) ReportPause(ctx context.Context, w WorkerAuth, r api.WorkerPauseReport) (api.Worker, error) {
	if err := checkText("host_reason", r.HostReason); err != nil {
		return api.Worker{}, err
	}
	if len(r.HostReason) > api.MaxHostPauseReason {
		return api.Worker{}, fmt.Errorf("%w: field \"host_reason\" is longer than %d bytes", ErrInvalid, api.MaxHostPauseReason)
	}
	var spare api.WorkerSpare
	if r.Spare != nil {
		spare = *r.Spare
		if err := checkSpare(spare); err != nil {
			return api.Worker{}, err
		}
		// The reason is the agent's free text (an error from Tart): kept, cut to size.
		spare.Reason = sanitizeText(spare.Reason, api.MaxSpareReason)
	}
	var since *time.Time
	if !spare.Since.IsZero() {
		since = &spare.Since
	}
	err := s.withTx(ctx, func(t *txn) error {
		var wasOwner bool
		var wasHost, status string
		err := t.QueryRow(ctx, `UPDATE workers w SET owner_paused = $3, host_pause_reason = NULLIF($4, ''),
				spare_state = NULLIF($5, ''), spare_reason = $6, spare_since = $7, spare_hits = $8, spare_misses = $9
			FROM workers old WHERE w.id = $1 AND old.id = w.id AND w.instance_id = $2
			RETURNING old.owner_paused, COALESCE(old.host_pause_reason, ''), w.status`,
			w.WorkerID, w.InstanceID, r.OwnerPaused, r.HostReason, spare.State, spare.Reason, since, spare.Hits, spare.Misses,
		).Scan(&wasOwner, &wasHost, &status)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%w: worker %s was re-registered by another instance", ErrConflict, w.WorkerID)
		}
		if err != nil {
			return fmt.Errorf("record the worker's pause: %w", err)
		}
		if wasOwner != r.OwnerPaused {
			t.emit(Change{Kind: "worker", ID: w.WorkerID, Status: status, Event: pauseEvent("owner", r.OwnerPaused)})
		}
		if wasHost != r.HostReason {
			t.emit(Change{Kind: "worker", ID: w.WorkerID, Status: status, Event: pauseEvent("host", r.HostReason != ""),
				Detail: map[string]any{"reason": r.HostReason}})
		}
		return nil
	})
	if err != nil {
		return api.Worker{}, err
	}
	return s.GetWorker(ctx, w.WorkerID)
}

// checkSpare refuses a warm spare report no agent sends.
func checkSpare(sp api.WorkerSpare) error {
	switch sp.State {
	case api.SpareNone, api.SpareBooting, api.SpareReady, api.SpareSuspended, api.SpareFailed:
	default:
		return fmt.Errorf("%w: field \"spare.state\" is %q; it must be one of none, booting, ready, suspended, failed", ErrInvalid, sp.State)
	}
	if sp.Hits < 0 || sp.Misses < 0 {
		return fmt.Errorf("%w: fields \"spare.hits\" and \"spare.misses\" must not be negative", ErrInvalid)
	}
	return nil
}

func pauseEvent(who string, paused bool) string {
	if paused {
		return "worker." + who + "_paused"
	}
	return "worker." + who + "_resumed"
}
