package dashboard

import (
	"net/http"
	"net/url"

	"github.com/freeagent-build/freeagent/controller/queue"
	"github.com/freeagent-build/freeagent/controller/store"
)

type queueRow struct {
	store.QueueEntry
	Reason string
}

type queueView struct {
	Rows                   []queueRow
	Pending                int
	Online, Paused, Active int // workers
	NextPage, FirstPage    string
	Error                  string
}

func (d *Dashboard) queue(w http.ResponseWriter, r *http.Request, s *session) {
	cursor := r.URL.Query().Get("cursor")
	q, err := queue.Load(r.Context(), d.Store, cursor, 100, s.Scope)
	if isInvalid(err) {
		d.render(w, r, "queue", http.StatusUnprocessableEntity, view{Title: "Queue", Nav: "queue", Session: s,
			Data: queueView{Error: trimSentinel(err, store.ErrInvalid), FirstPage: "/queue"}})
		return
	}
	if err != nil {
		d.fail(w, r, s, err)
		return
	}
	v := queueView{Pending: q.Page.Pending, Online: q.Online, Paused: q.Paused, Active: q.Online - q.Paused}
	for i, e := range q.Page.Entries {
		v.Rows = append(v.Rows, queueRow{QueueEntry: e, Reason: q.Reasons[i]})
	}
	if q.Page.NextCursor != "" {
		v.NextPage = "/queue?cursor=" + url.QueryEscape(q.Page.NextCursor)
	}
	if cursor != "" {
		v.FirstPage = "/queue"
	}
	d.render(w, r, "queue", http.StatusOK, view{Title: "Queue", Nav: "queue", Session: s, Stream: "/ui/stream", Data: v})
}
