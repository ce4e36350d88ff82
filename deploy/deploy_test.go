// Package deploy holds no code: its tests check the files operators run
// (the image, the systemd unit, the compose and Kubernetes examples, the
// alert rules and the Grafana dashboard) with the tools that read them.
package deploy

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/freeagent-build/freeagent/controller/pgtest"
	"github.com/freeagent-build/freeagent/internal/testsupport/testtool"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func run(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	return string(out)
}

// The unit passes `systemd-analyze verify` without a single complaint (it
// exits 0 on unknown keys and bad values, so any output fails), and its
// offline security exposure stays low.
func TestSystemdUnit(t *testing.T) {
	sa := testtool.Path(t, "systemd-analyze")
	unit, err := os.ReadFile("systemd/freeagent-controller.service")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"DynamicUser=yes", "ProtectSystem=strict", "NoNewPrivileges=yes", "StateDirectory=freeagent-controller",
		"ConfigurationDirectory=freeagent-controller", "EnvironmentFile=/etc/freeagent-controller/controller.env", "ExecStart=/usr/local/bin/freeagent-controller serve",
		"Environment=FREEAGENT_LISTEN=127.0.0.1:8080", "Environment=FREEAGENT_TRUSTED_PROXIES=127.0.0.1,::1"} {
		if !strings.Contains(string(unit), "\n"+want+"\n") {
			t.Errorf("the unit lacks %s", want)
		}
	}
	// verify checks that ExecStart exists: point it at a real executable.
	dir := t.TempDir()
	exe := filepath.Join(dir, "freeagent-controller")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "freeagent-controller.service")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(string(unit), "/usr/local/bin/freeagent-controller", exe)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := run(t, dir, sa, "verify", path); strings.TrimSpace(out) != "" {
		t.Fatalf("systemd-analyze verify complains:\n%s", out)
	}
	// The check itself catches a bad value (it would otherwise pass anything).
	bad := filepath.Join(dir, "bad.service")
	if err := os.WriteFile(bad, []byte(strings.Replace(string(unit), "ProtectSystem=strict", "ProtectSystem=sometimes", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, _ := exec.Command(sa, "verify", bad).CombinedOutput(); !strings.Contains(string(out), "sometimes") {
		t.Fatalf("verify did not flag a bad value: %s", out)
	}
	out := run(t, dir, sa, "security", "--offline=true", "--threshold=25", path)
	if m := regexp.MustCompile(`exposure level for \S+: ([0-9.]+)`).FindStringSubmatch(out); m == nil {
		t.Fatalf("systemd-analyze security:\n%s", out)
	} else {
		t.Logf("systemd-analyze security: exposure %s", m[1])
	}
}

// The alert rules load in Prometheus and fire (and stay quiet) as their
// unit tests in alerts_test.yml say.
func TestAlertRules(t *testing.T) {
	promtool := testtool.Path(t, "promtool")
	run(t, "prometheus", promtool, "check", "rules", "alerts.yml")
	run(t, "prometheus", promtool, "test", "rules", "alerts_test.yml")
	var rules struct {
		Groups []struct {
			Rules []struct{ Alert string }
		}
	}
	readYAML(t, "prometheus/alerts.yml", &rules)
	var names []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			names = append(names, r.Alert)
		}
	}
	for _, want := range []string{"FreeAgentQueueStuck", "FreeAgentNoWorkers", "FreeAgentDeadLettersRising", "FreeAgentEventChainInvalid", "FreeAgentWebhookEndpointDead"} {
		if !slices.Contains(names, want) {
			t.Errorf("no alert %s in %v", want, names)
		}
	}
}

// dashboard is the part of the Grafana JSON the tests read.
type dashboard struct {
	Panels []struct {
		Title   string
		Type    string
		Targets []struct{ Expr string }
	}
}

func readDashboard(t *testing.T) dashboard {
	t.Helper()
	b, err := os.ReadFile("grafana/freeagent.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("grafana/freeagent.json: %v", err)
	}
	return d
}

// grafanaVars are the dashboard's Grafana variables with a value that
// makes its queries plain PromQL.
var grafanaVars = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h")

// Every dashboard query is valid PromQL: promtool parses them as the
// expressions of recording rules. And the panels the issue asks for are there.
func TestDashboardQueriesParse(t *testing.T) {
	promtool := testtool.Path(t, "promtool")
	d := readDashboard(t)
	type rule struct {
		Record string `yaml:"record"`
		Expr   string `yaml:"expr"`
	}
	var rules []rule
	var titles []string
	for _, p := range d.Panels {
		titles = append(titles, p.Title)
		for _, tg := range p.Targets {
			rules = append(rules, rule{Record: "dashboard:query", Expr: grafanaVars.Replace(tg.Expr)})
		}
	}
	if len(rules) < 10 {
		t.Fatalf("only %d queries in the dashboard", len(rules))
	}
	b, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "dashboard-rules.yml")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, ".", promtool, "check", "rules", path)
	for _, want := range []string{"Queue depth", "Oldest pending build", "Pickup latency", "Build outcomes", "Workers online and slots",
		"Worker utilisation", "Webhook deliveries", "HTTP latency p95 by route", "Audit chain"} {
		if !slices.Contains(titles, want) {
			t.Errorf("the dashboard has no panel %q", want)
		}
	}
}

// queriedSeries is every series name the alert rules and the dashboard use.
func queriedSeries(t *testing.T) map[string][]string {
	t.Helper()
	used := map[string][]string{} // name → where
	var rules struct {
		Groups []struct {
			Rules []struct{ Alert, Expr string }
		}
	}
	readYAML(t, "prometheus/alerts.yml", &rules)
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			for _, n := range metricNames(r.Expr) {
				used[n] = append(used[n], "alert "+r.Alert)
			}
		}
	}
	for _, p := range readDashboard(t).Panels {
		for _, tg := range p.Targets {
			for _, n := range metricNames(grafanaVars.Replace(tg.Expr)) {
				used[n] = append(used[n], "panel "+p.Title)
			}
		}
	}
	return used
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
