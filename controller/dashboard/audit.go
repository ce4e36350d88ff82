package dashboard

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/store"
)

// eventsPageSize is the number of audit events a page shows.
const eventsPageSize = 100

// verifyEvery bounds how often a replica re-walks the whole hash chain for
// the events page; verifyTimeout how long a page waits for it.
const (
	verifyEvery   = 10 * time.Second
	verifyTimeout = 5 * time.Second
)

// verification caches the last check of the audit log's hash chain.
type verification struct {
	mu  sync.Mutex
	at  time.Time
	v   api.EventVerification
	err error
}

func (c *verification) get(ctx context.Context, st *store.Store) (api.EventVerification, time.Time, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.at.IsZero() || time.Since(c.at) > verifyEvery {
		ctx, cancel := context.WithTimeout(ctx, verifyTimeout)
		defer cancel()
		c.v, c.err = st.VerifyEvents(ctx)
		c.at = time.Now()
		if c.err != nil {
			c.at = time.Time{} // try again on the next view
		}
	}
	return c.v, c.at, c.err
}

type eventsView struct {
	Events      []eventRow
	Verified    api.EventVerification
	VerifiedAt  time.Time
	VerifyError string
	NextPage    string
	FirstPage   string
}

func (d *Dashboard) events(w http.ResponseWriter, r *http.Request, s *session) {
	var before int64
	if v := r.URL.Query().Get("before"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			d.renderError(w, r, s, http.StatusUnprocessableEntity, "Parameter \"before\" must be an event sequence number; use the page links.")
			return
		}
		before = n
	}
	evs, err := d.Store.EventsBefore(r.Context(), before, eventsPageSize)
	if err != nil {
		d.fail(w, r, s, err)
		return
	}
	v := eventsView{Events: make([]eventRow, len(evs))}
	now := time.Now()
	for i, e := range evs {
		v.Events[i] = newEventRow(e, now)
	}
	v.Verified, v.VerifiedAt, err = d.verified.get(r.Context(), d.Store)
	if err != nil {
		v.VerifyError = "The chain could not be checked just now (" + err.Error() + "); run `freeagent-controller events verify`."
	}
	if n := len(evs); n == eventsPageSize && evs[n-1].Sequence > 1 {
		v.NextPage = "/events?before=" + strconv.FormatInt(evs[n-1].Sequence, 10)
	}
	if before > 0 {
		v.FirstPage = "/events"
	}
	d.render(w, r, "events", http.StatusOK, view{Title: "Events", Nav: "events", Session: s, Stream: "/ui/stream", Data: v})
}

type controllerRow struct {
	api.Controller
	Live bool // its registration has not expired
}

func (d *Dashboard) controllers(w http.ResponseWriter, r *http.Request, s *session) {
	cs, err := d.Store.Controllers(r.Context())
	if err != nil {
		d.fail(w, r, s, err)
		return
	}
	now := time.Now()
	rows := make([]controllerRow, len(cs))
	for i, c := range cs {
		rows[i] = controllerRow{Controller: c, Live: c.ExpiresAt.After(now)}
	}
	d.render(w, r, "controllers", http.StatusOK, view{Title: "Controllers", Nav: "controllers", Session: s, Data: rows})
}
