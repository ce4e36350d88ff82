package dashboard

import (
	"net/http"
	"strconv"
	"time"

	"github.com/freeagent-build/freeagent/controller/store"
)

// recentBuilds is how many of an app's latest builds its page lists.
const recentBuilds = 10

type overviewView struct {
	// App is the app of an app's page; nil on the home page.
	App    *store.AppName
	Apps   []store.AppName
	Charts []lineChart
	Recent buildRows
	Window int // days
}

// overview is the home page: the farm's charts and its apps.
func (d *Dashboard) overview(w http.ResponseWriter, r *http.Request, s *session) {
	d.renderOverview(w, r, s, "")
}

// app is one app's page: its charts and latest builds.
func (d *Dashboard) app(w http.ResponseWriter, r *http.Request, s *session) {
	slug := r.PathValue("slug")
	if store.ValidateProject("app", slug) != nil || !s.Scope.Allows(slug) {
		d.renderError(w, r, s, http.StatusNotFound, "There is no app with the slug "+strconv.Quote(slug)+".")
		return
	}
	d.renderOverview(w, r, s, slug)
}

func (d *Dashboard) renderOverview(w http.ResponseWriter, r *http.Request, s *session, slug string) {
	ctx := r.Context()
	now := time.Now().UTC()
	since := now.Truncate(24 * time.Hour).Add(-store.ChartWindow + 24*time.Hour)
	c, err := d.Store.Charts(ctx, store.ChartFilter{Project: slug, Scope: s.Scope, Since: since})
	if err != nil {
		d.fail(w, r, s, err)
		return
	}
	v := overviewView{Charts: farmCharts(c, since, now), Window: int(store.ChartWindow / (24 * time.Hour))}
	if v.Apps, err = d.Store.Apps(ctx, s.Scope); err != nil {
		d.fail(w, r, s, err)
		return
	}
	title := "Overview"
	if slug != "" {
		v.App = &store.AppName{Slug: slug}
		for _, a := range v.Apps {
			if a.Slug == slug {
				v.App.Name = a.Name
			}
		}
		if v.Recent.Rows, _, err = d.Store.ListBuildRows(ctx, store.ListFilter{Project: slug, Scope: s.Scope, Limit: recentBuilds}); err != nil {
			d.fail(w, r, s, err)
			return
		}
		v.Recent.Empty = "No builds of this app yet."
		title = "App " + slug
	}
	d.render(w, r, "overview", http.StatusOK, view{Title: title, Nav: "overview", Session: s, Data: v})
}

// farmCharts turns the store's day figures into the page's charts.
func farmCharts(c store.Charts, from, to time.Time) []lineChart {
	charts := []lineChart{
		{ID: "chart-duration", Title: "Build duration (p50, p90 dashed)", Unit: unitSeconds, Series: percentiles(c.Duration)},
		{ID: "chart-queue", Title: "Queue wait (p50, p90 dashed)", Unit: unitSeconds, Series: percentiles(c.QueueWait)},
		{ID: "chart-success", Title: "Success rate (completed of completed and failed)", Unit: unitRatio, Series: rates("success rate", c.Success)},
	}
	if c.Utilisation != nil {
		charts = append(charts, lineChart{ID: "chart-utilisation", Title: "Worker utilisation", Unit: unitRatio,
			Series: rates("busy share of the workers' slots", c.Utilisation)})
	}
	for i := range charts {
		charts[i].From, charts[i].To = from, to
	}
	return charts
}

// percentiles makes a p50 and a p90 series of each platform.
func percentiles(days []store.DayFigure) []series {
	var out []series
	index := map[string]int{}
	for _, d := range days {
		i, ok := index[d.Platform]
		if !ok {
			i = len(out)
			index[d.Platform] = i
			out = append(out, series{Name: d.Platform + " p50", Colour: i / 2}, series{Name: d.Platform + " p90", Dashed: true, Colour: i / 2})
		}
		out[i].Points = append(out[i].Points, point{X: d.Day, Y: d.P50, N: d.Count})
		out[i+1].Points = append(out[i+1].Points, point{X: d.Day, Y: d.P90, N: d.Count})
	}
	return out
}

func rates(name string, days []store.DayFigure) []series {
	s := series{Name: name}
	for _, d := range days {
		s.Points = append(s.Points, point{X: d.Day, Y: d.Rate, N: d.Count})
	}
	if s.Points == nil {
		return nil
	}
	return []series{s}
}
