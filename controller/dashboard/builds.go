package dashboard

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/store"
	"github.com/freeagent-build/freeagent/internal/buildphase"
)

// pageSize is the number of builds a list page shows.
const pageSize = 50

// logChunk is how much of a log the build page reads at a time.
const logChunk = 1 << 20

// phaseLines is how many of each phase's last lines the build page shows.
const phaseLines = 500

type buildsView struct {
	Filter    store.ListFilter
	Statuses  []api.BuildStatus
	Table     buildRows
	Apps      []store.AppName
	NextPage  string // URL of the next page; "" on the last
	FirstPage string // URL of the first page when not on it
	Filtered  bool
	Error     string
	Workers   workerNames
}

// buildRows is a table of builds (the buildrows template).
type buildRows struct {
	Caption string
	Rows    []store.BuildRow
	Empty   string // the text of an empty table
}

// workerNames shows workers by name; an unregistered one by its id.
type workerNames map[string]string

// Name takes a worker id (string or *string).
func (n workerNames) Name(id any) string {
	var s string
	switch v := id.(type) {
	case string:
		s = v
	case *string:
		s = orEmpty(v)
	}
	if name, ok := n[s]; ok {
		return name
	}
	return s
}

func (d *Dashboard) workerNames(ctx context.Context) (workerNames, error) {
	ws, err := d.Store.ListWorkers(ctx)
	names := workerNames{}
	for _, w := range ws {
		names[w.ID] = w.Name
	}
	return names, err
}

func (d *Dashboard) builds(w http.ResponseWriter, r *http.Request, s *session) {
	q := r.URL.Query()
	f := store.ListFilter{Status: q.Get("status"), Platform: q.Get("platform"), WorkerID: q.Get("worker_id"),
		Project: q.Get("project"), Scope: s.Scope, Cursor: q.Get("cursor"), Limit: pageSize}
	v := buildsView{Filter: f, Filtered: f.Status != "" || f.Platform != "" || f.WorkerID != "" || f.Project != "",
		Statuses: []api.BuildStatus{api.StatusPending, api.StatusAssigned, api.StatusBuilding, api.StatusCompleted, api.StatusFailed, api.StatusCancelled}}
	status := http.StatusOK
	var err error
	if v.Workers, err = d.workerNames(r.Context()); err != nil {
		d.fail(w, r, s, err)
		return
	}
	if v.Apps, err = d.Store.Apps(r.Context(), s.Scope); err != nil {
		d.fail(w, r, s, err)
		return
	}
	v.Table.Caption, v.Table.Empty = "Builds, newest first", "No builds."
	if v.Filtered {
		v.Table.Caption, v.Table.Empty = "Builds, newest first (filtered)", "No builds match these filters."
	}
	rows, next, err := d.Store.ListBuildRows(r.Context(), f)
	switch {
	case err == nil:
		v.Table.Rows = rows
		if next != "" {
			v.NextPage = buildsURL(f, next)
		}
		if f.Cursor != "" {
			v.FirstPage = buildsURL(f, "")
		}
	case isInvalid(err):
		status, v.Error = http.StatusUnprocessableEntity, trimSentinel(err, store.ErrInvalid)
	default:
		d.fail(w, r, s, err)
		return
	}
	d.render(w, r, "builds", status, view{Title: "Builds", Nav: "builds", Session: s, Stream: "/ui/stream", Data: v})
}

func buildsURL(f store.ListFilter, cursor string) string {
	q := url.Values{}
	for k, v := range map[string]string{"status": f.Status, "platform": f.Platform, "worker_id": f.WorkerID, "project": f.Project, "cursor": cursor} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if len(q) == 0 {
		return "/builds"
	}
	return "/builds?" + q.Encode()
}

type buildView struct {
	Build    api.Build
	LogAfter int64 // where a live follow continues
	Follow   bool
	// Phases split the log (buildphase); the failing or running one is open.
	Phases []phaseView
	// ErrorHeadline is the error message without the log lines the worker
	// appends; ErrorLines are the failing phase's last lines, shown once.
	ErrorHeadline string
	ErrorLines    string
	// QR is shown for a completed build with artifacts.
	QR      bool
	Workers workerNames
	// Spec is shown when the build has one: its profile's env in key
	// order and the whole resolved profile as indented JSON.
	Spec *specView
	// Submissions are the build's submissions to its store, newest first.
	Submissions []api.Submission
}

type phaseView struct {
	buildphase.Phase
	Took string
	Text string
	Open bool
	Last bool
}

type specView struct {
	api.BuildSpec
	Env     [][2]string
	Profile string
}

// newSpecView prepares a build's spec for the page; eas.json's env is not
// secret (it is committed with the project), so its values are shown.
func newSpecView(spec *api.BuildSpec) *specView {
	if spec == nil {
		return nil
	}
	v := &specView{BuildSpec: *spec}
	for _, k := range slices.Sorted(maps.Keys(spec.Profile.Env)) {
		v.Env = append(v.Env, [2]string{k, spec.Profile.Env[k]})
	}
	if b, err := json.MarshalIndent(spec.Profile, "", "  "); err == nil {
		v.Profile = string(b)
	}
	return v
}

func (d *Dashboard) build(w http.ResponseWriter, r *http.Request, s *session) {
	id, ok := d.buildID(w, r, s)
	if !ok {
		return
	}
	b, err := d.Store.GetBuild(r.Context(), id)
	if err != nil {
		d.fail(w, r, s, err)
		return
	}
	v := buildView{Build: b, Spec: newSpecView(b.Spec), Follow: !b.Status.Terminal()}
	if v.Workers, err = d.workerNames(r.Context()); err != nil {
		d.fail(w, r, s, err)
		return
	}
	if err := d.readPhases(r.Context(), &v); err != nil {
		d.fail(w, r, s, err)
		return
	}
	if v.Submissions, err = d.Store.BuildSubmissions(r.Context(), id); err != nil {
		d.fail(w, r, s, err)
		return
	}
	v.QR = d.ServeQR != nil && b.Status == api.StatusCompleted && len(b.Artifacts) > 0 && !b.ArtifactsExpired
	d.render(w, r, "build", http.StatusOK, view{Title: "Build " + id, Nav: "builds", Session: s,
		Stream: "/ui/stream?build=" + id, Data: v})
}

// errorSummaryLines is how many of the failing phase's last lines the
// error summary shows.
const errorSummaryLines = 30

// readPhases reads the build's log through the phase parser, a chunk at a
// time, and prepares the phases and the error summary. A running build's
// log is read up to its last whole line, where the live follow continues.
func (d *Dashboard) readPhases(ctx context.Context, v *buildView) error {
	b := v.Build
	start := b.SubmittedAt
	if b.StartedAt != nil {
		start = *b.StartedAt
	}
	p := buildphase.NewParser(start)
	p.KeepLines = phaseLines
	var after int64
	for {
		chunk, err := d.Store.ReadLog(ctx, b.ID, after, logChunk)
		if errors.Is(err, store.ErrGone) {
			break // the log expired; the page says there is none
		}
		if err != nil {
			return err
		}
		data := chunk.Data
		if v.Follow && after+int64(len(data)) >= chunk.Length {
			// The live follow sends whole lines: stop at a line end so it
			// does not split a line in two.
			data = data[:bytes.LastIndexByte(data, '\n')+1]
		}
		p.Write(data)
		after += int64(len(data))
		if len(data) == 0 || after >= chunk.Length {
			break
		}
	}
	v.LogAfter = after
	var ended time.Time
	if b.CompletedAt != nil && b.Status.Terminal() {
		ended = *b.CompletedAt
	}
	status := map[api.BuildStatus]buildphase.Status{api.StatusCompleted: buildphase.Succeeded,
		api.StatusFailed: buildphase.Failed, api.StatusCancelled: buildphase.Cancelled}[b.Status]
	phases := p.Phases(ended, status)
	now := time.Now()
	for i, ph := range phases {
		last := i == len(phases)-1
		v.Phases = append(v.Phases, phaseView{Phase: ph, Took: fmtDuration(ph.Duration(now)), Last: last,
			Text: strings.Join(ph.Lines, "\n"), Open: last && ph.Status != buildphase.Succeeded})
	}
	if b.Status == api.StatusCompleted || b.ErrorMessage == nil {
		return nil
	}
	headline, tail, _ := strings.Cut(*b.ErrorMessage, buildphase.TailSeparator)
	v.ErrorHeadline, v.ErrorLines = headline, tail
	if n := len(phases); n > 0 && len(phases[n-1].Lines) > 0 {
		lines := phases[n-1].Lines
		v.ErrorLines = strings.Join(lines[max(0, len(lines)-errorSummaryLines):], "\n")
	}
	return nil
}

func (d *Dashboard) cancel(w http.ResponseWriter, r *http.Request, s *session) {
	id, ok := d.buildID(w, r, s)
	if !ok {
		return
	}
	resp, err := d.Store.Cancel(r.Context(), id)
	if err != nil {
		d.fail(w, r, s, err)
		return
	}
	if resp.Status.Terminal() {
		d.BuildEnded()
	}
	http.Redirect(w, r, "/builds/"+id, http.StatusSeeOther)
}

func (d *Dashboard) retry(w http.ResponseWriter, r *http.Request, s *session) {
	id, ok := d.buildID(w, r, s)
	if !ok {
		return
	}
	sub, err := d.Retry(w, r, id, s.Key.ID)
	if err != nil {
		d.fail(w, r, s, err)
		return
	}
	http.Redirect(w, r, "/builds/"+sub.Build.ID, http.StatusSeeOther)
}

func (d *Dashboard) followLogs(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.PathValue("id")
	if !store.ValidID(id) || !d.visible(r, s, id) {
		http.Error(w, "no such build", http.StatusNotFound)
		return
	}
	after, err := strconv.ParseInt(r.URL.Query().Get("after"), 10, 64)
	if err != nil || after < 0 {
		after = 0
	}
	// A reconnecting EventSource says where it got to.
	if n, err := strconv.ParseInt(r.Header.Get("Last-Event-ID"), 10, 64); err == nil && n >= 0 {
		after = n
	}
	d.FollowLogs(w, r, id, after)
}

func (d *Dashboard) artifact(w http.ResponseWriter, r *http.Request, s *session) {
	id, ok := d.buildID(w, r, s)
	if !ok {
		return
	}
	d.ServeArtifact(w, r, id, r.PathValue("name"))
}

// buildID is the build id in the path; a malformed one is answered with a
// page saying there is no such build.
func (d *Dashboard) buildID(w http.ResponseWriter, r *http.Request, s *session) (string, bool) {
	id := r.PathValue("id")
	if !store.ValidID(id) || !d.visible(r, s, id) {
		d.renderError(w, r, s, http.StatusNotFound, "There is no build "+strconv.Quote(id)+".")
		return "", false
	}
	return id, true
}

// visible reports whether the session's key may see build id: another
// project's build is answered as if it did not exist.
func (d *Dashboard) visible(r *http.Request, s *session, id string) bool {
	if s.Scope.All {
		return true
	}
	p, err := d.Store.BuildProject(r.Context(), id)
	return err == nil && s.Scope.Allows(p)
}

func (d *Dashboard) qrCode(w http.ResponseWriter, r *http.Request, s *session) {
	id, ok := d.buildID(w, r, s)
	if !ok {
		return
	}
	if d.ServeQR == nil {
		d.renderError(w, r, s, http.StatusNotFound, "This controller signs no install links, so it has no QR codes.")
		return
	}
	d.ServeQR(w, r, id)
}
