package webhooks

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/freeagent-build/freeagent/controller/store"
	"github.com/freeagent-build/freeagent/internal/config"
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

func TestPublicOnlyAndAllow(t *testing.T) {
	allow, err := config.ParsePrefixes(" 10.1.2.0/24, 127.0.0.1 ,fd00::/8")
	if err != nil {
		t.Fatal(err)
	}
	check := publicOnly(allow)
	for addr, ok := range map[string]bool{
		"93.184.216.34:443":           true,  // public
		"[2606:4700::1]:443":          true,  // public v6
		"10.1.2.3:80":                 true,  // allowed prefix
		"127.0.0.1:8080":              true,  // allowed address
		"127.0.0.2:8080":              false, // loopback, not the allowed one
		"10.9.0.1:80":                 false, // private
		"172.16.0.1:80":               false,
		"192.168.64.1:80":             false,
		"169.254.169.254:80":          false, // link-local: cloud metadata
		"100.64.0.1:80":               false, // shared address space
		"0.0.0.0:80":                  false,
		"[::1]:80":                    false,
		"[::ffff:169.254.169.254]:80": false, // mapped
		"[fe80::1]:80":                false,
		"[fd00::5]:80":                true, // allowed prefix
		"[fc00::5]:80":                false,
		"224.0.0.1:80":                false,
	} {
		if err := check("tcp", addr, nil); (err == nil) != ok {
			t.Errorf("%s: err %v, want allowed=%v", addr, err, ok)
		}
	}
	if _, err := config.ParsePrefixes("10.0.0.0/33"); err == nil {
		t.Error("a bad prefix parsed")
	}
	if _, err := config.ParsePrefixes("example.com"); err == nil || !strings.Contains(err.Error(), "neither an address nor a CIDR prefix") {
		t.Errorf("a host name: %v", err)
	}
}

// New fills zero (and negative) settings from DefaultConfig and keeps the
// lease longer than an attempt.
func TestNewFillsDefaults(t *testing.T) {
	key := make([]byte, 32)
	for _, c := range []struct {
		name string
		cfg  Config
		want Config
	}{
		{"zero", Config{}, DefaultConfig()},
		{"negative", Config{Interval: -1, Timeout: -1, MaxAttempts: -1, BackoffBase: -1, Concurrency: -1, Lease: -1, Retention: -1}, DefaultConfig()},
		{"set", Config{Interval: time.Minute, Timeout: time.Second, MaxAttempts: 2, BackoffBase: time.Second, Concurrency: 1, Lease: time.Hour, Retention: time.Hour},
			Config{Interval: time.Minute, Timeout: time.Second, MaxAttempts: 2, BackoffBase: time.Second, Concurrency: 1, Lease: time.Hour, Retention: time.Hour}},
		{"lease within the timeout", Config{Timeout: 5 * time.Minute}, func() Config {
			c := DefaultConfig()
			c.Timeout, c.Lease = 5*time.Minute, 6*time.Minute
			return c
		}()},
	} {
		d, err := New(&store.Store{}, key, c.cfg, nil, logrus.New())
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if fmt.Sprint(d.cfg) != fmt.Sprint(c.want) {
			t.Errorf("%s: config %+v, want %+v", c.name, d.cfg, c.want)
		}
	}
}
