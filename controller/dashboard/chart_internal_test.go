package dashboard

import (
	"encoding/xml"
	"io"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// svgDoc parses a chart as XML (it must be well-formed) and returns its
// points' data-y values by series name and every text's content.
func svgDoc(t *testing.T, svg string) (points map[string][]float64, texts []string) {
	t.Helper()
	points = map[string][]float64{}
	d := xml.NewDecoder(strings.NewReader(svg))
	var name string
	inText := false
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return points, texts
		}
		if err != nil {
			t.Fatalf("the chart is not well-formed SVG: %v\n%s", err, svg)
		}
		switch e := tok.(type) {
		case xml.StartElement:
			attr := map[string]string{}
			for _, a := range e.Attr {
				attr[a.Name.Local] = a.Value
			}
			switch {
			case e.Name.Local == "g" && attr["class"] == "series":
				name = attr["data-name"]
			case e.Name.Local == "circle":
				v, err := strconv.ParseFloat(attr["data-y"], 64)
				if err != nil {
					t.Fatalf("point without a numeric data-y: %v", attr)
				}
				for _, c := range []string{"cx", "cy"} {
					f, err := strconv.ParseFloat(attr[c], 64)
					if err != nil || f < 0 || f > chartW || (c == "cy" && f > chartH) {
						t.Errorf("point %s=%q is outside the drawing", c, attr[c])
					}
				}
				points[name] = append(points[name], v)
			case e.Name.Local == "text":
				inText = true
			}
		case xml.CharData:
			if inText {
				texts = append(texts, string(e))
			}
		case xml.EndElement:
			if e.Name.Local == "text" {
				inText = false
			}
		}
	}
}

var day0 = time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)

func TestChartEmpty(t *testing.T) {
	c := lineChart{ID: "c", Title: "Build duration", From: day0, To: day0.AddDate(0, 0, 30)}
	points, texts := svgDoc(t, string(c.SVG()))
	if len(points) != 0 || len(texts) != 1 || texts[0] != "No data in this period" {
		t.Errorf("an empty chart: points %v, texts %q", points, texts)
	}
	c.Series = []series{{Name: "ios p50"}} // a series without points is empty too
	if _, texts := svgDoc(t, string(c.SVG())); len(texts) != 1 {
		t.Errorf("a chart of an empty series: texts %q", texts)
	}
}

func TestChartOnePoint(t *testing.T) {
	c := lineChart{ID: "c", Title: "t", Unit: unitSeconds, From: day0, To: day0.AddDate(0, 0, 30),
		Series: []series{{Name: "android p50", Points: []point{{X: day0.AddDate(0, 0, 3), Y: 250, N: 2}}}}}
	svg := string(c.SVG())
	points, texts := svgDoc(t, svg)
	if got := points["android p50"]; len(got) != 1 || got[0] != 250 {
		t.Errorf("points %v", points)
	}
	if strings.Contains(svg, "<polyline") {
		t.Error("one point drew a line")
	}
	// 250 s tops the axis at 10 minutes, in four steps.
	if !contains(texts, "10m 00s") || !contains(texts, "2m 30s") || !contains(texts, "0s") || !contains(texts, "Mar 1") || !contains(texts, "Mar 31") {
		t.Errorf("axis labels %q", texts)
	}
}

func TestChartManyPoints(t *testing.T) {
	var p50, p90 []point
	for i := range 30 {
		p50 = append(p50, point{X: day0.AddDate(0, 0, i), Y: float64(60 + i)})
		p90 = append(p90, point{X: day0.AddDate(0, 0, i), Y: float64(600 + 10*i)})
	}
	c := lineChart{ID: "c", Title: "t", From: day0, To: day0.AddDate(0, 0, 30),
		Series: []series{{Name: "ios p50", Points: p50}, {Name: "ios p90", Points: p90, Dashed: true}}}
	svg := string(c.SVG())
	points, texts := svgDoc(t, svg)
	if len(points["ios p50"]) != 30 || len(points["ios p90"]) != 30 || points["ios p90"][29] != 890 {
		t.Errorf("points %v", points)
	}
	if strings.Count(svg, "<polyline") != 2 || strings.Count(svg, `stroke-dasharray`) != 2 { // the p90 line and its legend
		t.Errorf("want two lines, the p90 dashed:\n%s", svg)
	}
	if !contains(texts, "20m 00s") { // 890 s rounds up to 20 minutes
		t.Errorf("axis labels %q", texts)
	}
	// A value higher than its neighbour is drawn higher (smaller y).
	ys := regexpFloats(svg, `cy="([0-9.]+)"`)
	if len(ys) != 60 || ys[0] <= ys[29] || ys[30] <= ys[59] {
		t.Errorf("rising values must rise on the page: %v", ys)
	}
}

func TestChartRatioAndEscaping(t *testing.T) {
	c := lineChart{ID: `x"><script>`, Title: `Shop & <Co>`, Unit: unitRatio, From: day0, To: day0.AddDate(0, 0, 2),
		Series: []series{{Name: `<b>"Shop" & Co</b> p50`, Points: []point{{X: day0, Y: 0.5}, {X: day0.AddDate(0, 0, 1), Y: 1}}}}}
	svg := string(c.SVG())
	if strings.Contains(svg, "<script>") || strings.Contains(svg, "<b>") {
		t.Fatalf("names are not escaped:\n%s", svg)
	}
	points, texts := svgDoc(t, svg)
	if got := points[`<b>"Shop" & Co</b> p50`]; len(got) != 2 || got[0] != 0.5 {
		t.Errorf("points %v", points)
	}
	if !contains(texts, "100%") || !contains(texts, "50%") || !contains(texts, `<b>"Shop" & Co</b> p50`) {
		t.Errorf("texts %q", texts)
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func regexpFloats(s, pattern string) []float64 {
	var out []float64
	for _, m := range regexp.MustCompile(pattern).FindAllStringSubmatch(s, -1) {
		f, _ := strconv.ParseFloat(m[1], 64)
		out = append(out, f)
	}
	return out
}
