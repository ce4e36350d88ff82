package deploy

import (
	"slices"
	"strings"
	"testing"
)

// promqlWords are PromQL's keywords: identifiers that never name a series.
var promqlWords = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true,
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
	"inf": true, "nan": true, "atan2": true}

// labelListAfter are the keywords followed by a parenthesised list of label
// names, which are not series.
var labelListAfter = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true}

// metricNames lists the series names a PromQL expression selects: the
// identifiers that are not functions or aggregations (followed by "("),
// keywords, label names (in {…} or after by/without/on/ignoring/group_*),
// strings, numbers or durations. The expression is known to parse
// (promtool checks it), so the tokenizer need not diagnose errors.
func metricNames(expr string) []string {
	var names []string
	isStart := func(c byte) bool { return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
	isPart := func(c byte) bool { return isStart(c) || c >= '0' && c <= '9' }
	skipQuoted := func(i int) int { // i at the opening quote; returns the index after the closing one
		q := expr[i]
		for i++; i < len(expr) && expr[i] != q; i++ {
			if expr[i] == '\\' && q != '`' {
				i++
			}
		}
		return i + 1
	}
	skipUntil := func(i int, closing byte) int { // past the matching closing byte, skipping strings
		for i++; i < len(expr) && expr[i] != closing; {
			if c := expr[i]; c == '"' || c == '\'' || c == '`' {
				i = skipQuoted(i)
			} else {
				i++
			}
		}
		return i + 1
	}
	afterLabelKeyword := false
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			i = skipQuoted(i)
		case c == '{':
			i = skipUntil(i, '}')
		case c == '[':
			i = skipUntil(i, ']')
		case c == '(' && afterLabelKeyword:
			i = skipUntil(i, ')')
			afterLabelKeyword = false
		case c >= '0' && c <= '9' || c == '.':
			for i < len(expr) && (isPart(expr[i]) || expr[i] == '.') { // 0.95, 5m, 1e3
				i++
			}
		case isStart(c):
			j := i
			for j < len(expr) && isPart(expr[j]) {
				j++
			}
			word := expr[i:j]
			k := j
			for k < len(expr) && (expr[k] == ' ' || expr[k] == '\t' || expr[k] == '\n') {
				k++
			}
			switch {
			case labelListAfter[strings.ToLower(word)]:
				afterLabelKeyword = true
			case promqlWords[strings.ToLower(word)]:
			case k < len(expr) && expr[k] == '(':
				// a function or an aggregation
			case nextWord(expr[k:]) == "by" || nextWord(expr[k:]) == "without":
				// an aggregation with its grouping first: sum by (le) (…)
			default:
				if !slices.Contains(names, word) {
					names = append(names, word)
				}
			}
			i = j
		default:
			if c != ' ' && c != '\t' && c != '\n' {
				afterLabelKeyword = afterLabelKeyword && c == ')'
			}
			i++
		}
	}
	return names
}

// nextWord is the identifier s starts with, lower-cased.
func nextWord(s string) string {
	end := strings.IndexFunc(s, func(r rune) bool { return !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') })
	if end < 0 {
		end = len(s)
	}
	return strings.ToLower(s[:end])
}

func TestMetricNames(t *testing.T) {
	cases := []struct {
		expr string
		want []string
	}{
		{`max(freeagent_queue_depth) > 0`, []string{"freeagent_queue_depth"}},
		{`histogram_quantile(0.95, sum by (le, route) (rate(http_seconds_bucket{code=~"5..", route="/a{b}"}[5m])))`, []string{"http_seconds_bucket"}},
		{`sum without (instance) (a_total offset 5m) / on (job) group_left (team) b:ratio`, []string{"a_total", "b:ratio"}},
		{`sum(increase(x_total[1h])) > 0 and sum(rate(y_total[30m] @ 100)) == bool 0`, []string{"x_total", "y_total"}},
		{"clamp_min(max(slots), 1) unless absent(z)\n", []string{"slots", "z"}},
		{`count_values("le", 'q\'s')`, nil},
	}
	for _, c := range cases {
		if got := metricNames(c.expr); !slices.Equal(got, c.want) {
			t.Errorf("metricNames(%q) = %q, want %q", c.expr, got, c.want)
		}
	}
}
