package webhooks

import (
	"testing"
	"time"
)

func TestEventFilters(t *testing.T) {
	for _, c := range []struct {
		patterns []string
		event    string
		want     bool
	}{
		{[]string{"*"}, "worker.registered", true},
		{[]string{"build.*"}, "build.completed", true},
		{[]string{"build.*"}, "builder.x", false},
		{[]string{"build.*"}, "worker.registered", false},
		{[]string{"build.completed"}, "build.completed", true},
		{[]string{"build.completed"}, "build.completed_late", false},
		{[]string{"worker.*", "build.failed"}, "build.failed", true},
	} {
		if got := matches(c.patterns, c.event); got != c.want {
			t.Errorf("matches(%v, %q) = %v", c.patterns, c.event, got)
		}
	}
}

func TestURLRule(t *testing.T) {
	for raw, ok := range map[string]bool{
		"https://hooks.example.com/x": true,
		"http://127.0.0.1:9000/x":     true,
		"http://[::1]:9000/x":         true,
		"http://localhost/x":          true,
		"http://hooks.example.com/x":  false,
		"http://10.0.0.1/x":           false,
		"ftp://hooks.example.com/x":   false,
		"/relative":                   false,
		"https:opaque":                false,
	} {
		if err := validateURL(raw); (err == nil) != ok {
			t.Errorf("validateURL(%q) = %v, want allowed=%v", raw, err, ok)
		}
	}
}

func TestBackoffDoublesAndCaps(t *testing.T) {
	base := 2 * time.Second
	for n, want := range map[int]time.Duration{1: 2 * time.Second, 2: 4 * time.Second, 4: 16 * time.Second, 30: 1024 * time.Second} {
		if got := backoff(base, n); got != want {
			t.Errorf("backoff after %d failures = %v, want %v", n, got, want)
		}
	}
}
