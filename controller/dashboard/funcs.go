package dashboard

import (
	"fmt"
	"html/template"
	"net/url"
	"strings"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/internal/buildphase"
	"github.com/freeagent-build/freeagent/internal/bytesize"
)

var funcs = template.FuncMap{
	"when":     when,
	"took":     took,
	"bytes":    bytesize.IEC,
	"short":    short,
	"short7":   func(commit string) string { return commit[:min(len(commit), 7)] },
	"deref":    func(s *string) string { return orEmpty(s) },
	"terminal": func(s api.BuildStatus) bool { return s.Terminal() },
	"join":     strings.Join,
	"since":    func(t time.Time) string { return fmtDuration(time.Since(t)) + " ago" },
	"pathesc":  url.PathEscape,
	"percent":  func(f float64) string { return fmt.Sprintf("%.0f%%", 100*f) },
	"add":      func(a, b int64) int64 { return a + b },
	// hookActions is what the "hookactions" buttons need: the endpoint and the form token.
	"hookActions": func(h api.Webhook, csrf string) hookActions { return hookActions{Hook: h, CSRF: csrf} },
	// headline is an error message without the log lines a worker appends
	// (the build page shows those from the log, once).
	"headline": func(msg string) string { h, _, _ := strings.Cut(msg, buildphase.TailSeparator); return h },
}

type hookActions struct {
	Hook api.Webhook
	CSRF string
}

func orEmpty(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// when formats a time for people, in UTC like the API.
func when(t any) string {
	switch v := t.(type) {
	case time.Time:
		return v.UTC().Format("2006-01-02 15:04:05 UTC")
	case *time.Time:
		if v == nil {
			return ""
		}
		return v.UTC().Format("2006-01-02 15:04:05 UTC")
	}
	return ""
}

func fmtDuration(d time.Duration) string {
	d = d.Round(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm %02ds", int(d.Minutes()), int(d.Seconds())%60)
	default:
		return fmt.Sprintf("%dh %02dm", int(d.Hours()), int(d.Minutes())%60)
	}
}

// took is how long a build or attempt ran (started: time.Time or
// *time.Time): to its end, or until now while it runs.
func took(started any, ended *time.Time) string {
	var from time.Time
	switch v := started.(type) {
	case time.Time:
		from = v
	case *time.Time:
		if v == nil {
			return ""
		}
		from = *v
	default:
		return ""
	}
	end := time.Now()
	if ended != nil {
		end = *ended
	}
	return fmtDuration(end.Sub(from))
}
