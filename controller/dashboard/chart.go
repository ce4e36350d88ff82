package dashboard

import (
	"fmt"
	"html/template"
	"math"
	"strconv"
	"strings"
	"time"
)

// The charts are SVG written on the server: they need no script, print and
// scale with the page, and a test can read every value off the elements
// (each point carries data-x and data-y).

// point is one value of a series on one day.
type point struct {
	X time.Time
	Y float64
	// N is the number of builds behind the value, shown on hover.
	N int
}

// series is one line of a chart.
type series struct {
	Name   string
	Points []point // in time order
	Dashed bool    // a p90 beside its p50
	// Colour is the series' index in the palette: a p50 and its p90
	// share one.
	Colour int
}

// yUnit says how a chart's values read.
type yUnit int

const (
	unitSeconds yUnit = iota // a duration in seconds
	unitRatio                // 0–1, shown as a percentage
)

func (u yUnit) format(v float64) string {
	if u == unitRatio {
		return strconv.FormatFloat(v*100, 'f', 0, 64) + "%"
	}
	return fmtDuration(time.Duration(v * float64(time.Second)))
}

// lineChart is a chart of values per day over [From, To].
type lineChart struct {
	ID       string // the element id
	Title    string
	Unit     yUnit
	From, To time.Time
	Series   []series
}

// The drawing's geometry, in SVG user units.
const (
	chartW, chartH                       = 560, 220
	padLeft, padRight, padTop, padBottom = 58, 12, 12, 56
)

// Colours that meet WCAG AA contrast on white, one per series in turn.
var palette = []string{"#0550ae", "#a40e26", "#116329", "#7d4e00", "#6639ba", "#1b1f24"}

// SVG draws the chart. Text from the data (series names, which carry app
// names) is escaped.
func (c lineChart) SVG() template.HTML {
	var b strings.Builder
	esc := template.HTMLEscapeString
	fmt.Fprintf(&b, `<svg class="chart" id="%s" viewBox="0 0 %d %d" role="img" aria-label="%s" xmlns="http://www.w3.org/2000/svg">`,
		esc(c.ID), chartW, chartH, esc(c.Title))
	fmt.Fprintf(&b, `<title>%s</title>`, esc(c.Title))
	n := 0
	for _, s := range c.Series {
		n += len(s.Points)
	}
	if n == 0 || !c.To.After(c.From) {
		fmt.Fprintf(&b, `<text class="empty" x="%d" y="%d" text-anchor="middle">No data in this period</text></svg>`, chartW/2, chartH/2)
		return template.HTML(b.String())
	}
	top := c.yMax()
	plotW, plotH := float64(chartW-padLeft-padRight), float64(chartH-padTop-padBottom)
	x := func(t time.Time) float64 {
		f := float64(t.Sub(c.From)) / float64(c.To.Sub(c.From))
		return float64(padLeft) + math.Max(0, math.Min(1, f))*plotW
	}
	y := func(v float64) float64 { return float64(padTop) + plotH - math.Max(0, math.Min(1, v/top))*plotH }
	// Grid and axis labels: four steps of the y range; first, middle and
	// last day on the x axis.
	for i := 0; i <= 4; i++ {
		v := top * float64(i) / 4
		fmt.Fprintf(&b, `<line class="grid" x1="%d" x2="%d" y1="%.1f" y2="%.1f"/>`, padLeft, chartW-padRight, y(v), y(v))
		fmt.Fprintf(&b, `<text class="tick" x="%d" y="%.1f" text-anchor="end">%s</text>`, padLeft-6, y(v)+4, esc(c.Unit.format(v)))
	}
	for i, t := range []time.Time{c.From, c.From.Add(c.To.Sub(c.From) / 2), c.To} {
		fmt.Fprintf(&b, `<text class="tick" x="%.1f" y="%d" text-anchor="%s">%s</text>`, x(t), chartH-padBottom+16,
			[]string{"start", "middle", "end"}[i], t.UTC().Format("Jan 2"))
	}
	for i, s := range c.Series {
		colour := palette[s.Colour%len(palette)]
		fmt.Fprintf(&b, `<g class="series" data-name="%s" stroke="%s" fill="%s">`, esc(s.Name), colour, colour)
		if len(s.Points) > 1 {
			b.WriteString(`<polyline fill="none" stroke-width="2"`)
			if s.Dashed {
				b.WriteString(` stroke-dasharray="5 4"`)
			}
			b.WriteString(` points="`)
			for j, p := range s.Points {
				if j > 0 {
					b.WriteByte(' ')
				}
				fmt.Fprintf(&b, "%.1f,%.1f", x(p.X), y(p.Y))
			}
			b.WriteString(`"/>`)
		}
		for _, p := range s.Points {
			fmt.Fprintf(&b, `<circle class="pt" r="3" cx="%.1f" cy="%.1f" data-x="%s" data-y="%s"><title>%s %s: %s (%d)</title></circle>`,
				x(p.X), y(p.Y), p.X.UTC().Format("2006-01-02"), strconv.FormatFloat(p.Y, 'f', -1, 64),
				esc(s.Name), p.X.UTC().Format("Jan 2"), esc(c.Unit.format(p.Y)), p.N)
		}
		b.WriteString(`</g>`)
		// The legend, in rows of three under the axis.
		lx, ly := padLeft+(i%3)*170, chartH-padBottom+30+(i/3)*14
		fmt.Fprintf(&b, `<g class="legend"><line x1="%d" x2="%d" y1="%d" y2="%d" stroke="%s" stroke-width="2"%s/><text x="%d" y="%d">%s</text></g>`,
			lx, lx+16, ly-4, ly-4, colour, map[bool]string{true: ` stroke-dasharray="5 4"`}[s.Dashed], lx+20, ly, esc(s.Name))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// yMax is the top of the y axis: the largest value rounded up to a step
// whose quarters read well (a ratio always tops at 100%).
func (c lineChart) yMax() float64 {
	if c.Unit == unitRatio {
		return 1
	}
	m := 0.0
	for _, s := range c.Series {
		for _, p := range s.Points {
			m = math.Max(m, p.Y)
		}
	}
	for _, step := range []float64{20, 40, 60, 120, 240, 600, 1200, 2400, 3600, 7200, 14400, 28800, 86400} {
		if m <= step {
			return step
		}
	}
	return math.Ceil(m/86400) * 86400
}
