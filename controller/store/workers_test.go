package store_test

import (
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/store"
)

// A worker whose answers carrying a new token are lost one after another
// (a result's answer and a cache report's carry none; a long poll's
// arrives after the heartbeats renewed the old token to the same expiry)
// keeps working with the token it holds: each replacement issued for a
// lost token gives the token presented a full lifetime again. Before, it
// kept the lifetime of the first rotation, so the second loss locked the
// worker out: every heartbeat 401 until its builds' leases expired.
func TestWorkerTokenSurvivesLostAnswers(t *testing.T) {
	t.Parallel()
	// Production's timings: a new token's answer is taken as lost after
	// half the token's lifetime.
	const rotateAfter, ttl, lostAfter = 30 * time.Second, 90 * time.Second, 45 * time.Second
	f := newStore(t, func(c *store.Config) {
		c.TokenRotateAfter, c.TokenTTL, c.TokenDeliveryGrace = rotateAfter, ttl, lostAfter
	})
	w := f.register("", android(""))
	// pass moves the worker's token clock d on.
	pass := func(d time.Duration) {
		f.exec(`UPDATE workers SET token_issued_at = token_issued_at - $2::interval,
			token_expires_at = token_expires_at - $2::interval, prev_token_expires_at = prev_token_expires_at - $2::interval
			WHERE id = $1`, w.WorkerID, d)
	}
	held := f.tokens[w.WorkerID]
	pass(rotateAfter + time.Second)
	rotated, err := f.s.AuthenticateWorker(f.ctx, held, f.key)
	if err != nil || rotated.Grant.AccessToken == held {
		t.Fatalf("the rotation: %+v, %v", rotated.Grant, err)
	}
	// Its answer is lost, and so is every replacement's.
	var replaced api.TokenGrant
	for i := range 4 {
		pass(lostAfter + time.Second)
		got, err := f.s.AuthenticateWorker(f.ctx, held, f.key)
		if err != nil {
			t.Fatalf("after %d lost answers, the token the worker holds: %v", i+1, err)
		}
		if replaced = got.Grant; replaced.AccessToken == held || replaced.AccessToken == rotated.Grant.AccessToken {
			t.Fatalf("after %d lost answers: no replacement, %+v", i+1, replaced)
		}
	}
	// The last replacement arrives: it works and retires the old token.
	if _, err := f.s.AuthenticateWorker(f.ctx, replaced.AccessToken, f.key); err != nil {
		t.Fatalf("the replacement: %v", err)
	}
	_, err = f.s.AuthenticateWorker(f.ctx, held, f.key)
	wantErr(t, "the old token once its replacement was used", err, store.ErrUnauthorized)
}
