package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/freeagent-build/freeagent/api"
)

// PickupResult is how fast a build reaches one of several idle workers
// parked in long polls.
type PickupResult struct {
	Workers   int     `json:"workers"`
	SpacingMS float64 `json:"spacing_ms"`
	// FromSubmit runs from just before Submit is called to the moment the
	// worker's Poll returns the job: the latency a developer's build sees.
	FromSubmit Dist `json:"from_submit"`
	// AfterAnswer runs from the submit answer arriving to Poll returning
	// the job; negative when the job reached the worker first.
	AfterAnswer Dist `json:"after_answer"`
	Submit      Dist `json:"submit"` // the submit call alone
}

type pickupEvent struct {
	id string
	at time.Time
}

const pickupWarmup = 3 // samples discarded at the start

func runPickup(ctx context.Context, e *env) (*PickupResult, error) {
	cfg := e.cfg
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	fe := &firstError{cancel: cancel}
	c := e.client()
	ws, err := registerWorkers(ctx, c, "pickup", cfg.PickupWorkers)
	if err != nil {
		return nil, err
	}
	if err := e.holdColdCaches(ctx, ws...); err != nil {
		return nil, err
	}
	got := make(chan pickupEvent, len(ws))
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				job, err := w.poll(ctx, 30*time.Second)
				if err == nil && job != nil {
					select {
					case got <- pickupEvent{id: job.ID, at: time.Now()}:
					case <-ctx.Done():
						return
					}
					if err = w.heartbeat(ctx, job); err == nil {
						err = w.complete(ctx, job)
					}
				}
				if err != nil {
					if ctx.Err() == nil {
						fe.set(fmt.Errorf("worker %s: %w", w.id, err))
					}
					return
				}
			}
		}()
	}
	var fromSubmit, afterAnswer, submit []time.Duration
	measureErr := func() error {
		if err := api.Sleep(ctx, 300*time.Millisecond); err != nil { // let every worker park
			return err
		}
		for i := range cfg.PickupSamples + pickupWarmup {
			if err := api.Sleep(ctx, cfg.PickupSpacing); err != nil {
				return err
			}
			t0 := time.Now()
			resp, err := e.submit(ctx, c)
			if err != nil {
				return err
			}
			t1 := time.Now()
			timeout := time.NewTimer(10 * time.Second)
			var ev pickupEvent
			select {
			case ev = <-got:
			case <-timeout.C:
				return fmt.Errorf("no worker received build %s within 10 s", resp.ID)
			case <-ctx.Done():
				timeout.Stop()
				return ctx.Err()
			}
			timeout.Stop()
			if ev.id != resp.ID {
				return fmt.Errorf("a worker received build %s while build %s was the only one queued", ev.id, resp.ID)
			}
			if i >= pickupWarmup {
				fromSubmit = append(fromSubmit, ev.at.Sub(t0))
				afterAnswer = append(afterAnswer, ev.at.Sub(t1))
				submit = append(submit, t1.Sub(t0))
			}
		}
		return nil
	}()
	if err := e.settle(parent, cancel, &wg, fe, measureErr); err != nil {
		return nil, err
	}
	r := &PickupResult{Workers: len(ws), SpacingMS: toMS(cfg.PickupSpacing),
		FromSubmit: distOf(fromSubmit), AfterAnswer: distOf(afterAnswer), Submit: distOf(submit)}
	e.logf("   submit → job in a worker's hands: %v", r.FromSubmit)
	return r, nil
}
