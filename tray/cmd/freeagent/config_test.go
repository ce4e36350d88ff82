package main

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"

	"github.com/freeagent-build/freeagent/agent"
	"github.com/freeagent-build/freeagent/agent/hostcheck"
	"github.com/freeagent-build/freeagent/agent/local"
	"github.com/freeagent-build/freeagent/agent/tart"
	"github.com/freeagent-build/freeagent/internal/config/configtest"
)

// Every duration setting of `freeagent run` reads the shared syntax, from
// its flag and its FREEAGENT_* variable; agent.conf lines too.
func TestEveryDurationSettingReadsTheSharedSyntax(t *testing.T) {
	dir := t.TempDir()
	parse := func(args []string, env map[string]string) (*flag.FlagSet, error) {
		args = append([]string{"--data-dir", dir, "--controller-url", "https://builds.example.com"}, args...)
		_, fs, err := loadConfigEnv("run", args, func(k string) (string, bool) { v, ok := env[k]; return v, ok }, io.Discard)
		return fs, err
	}
	var names []string
	for _, st := range configtest.Check(t, parse) {
		names = append(names, st.Flag)
	}
	want := []string{"backoff-min", "boot-timeout", "build-timeout", "host-check-interval", "poll-wait", "spare-answer-timeout"}
	if !slices.Equal(names, want) {
		t.Errorf("checked %v, want %v", names, want)
	}

	// The same spellings in agent.conf; a bad one is named by file and line.
	for _, c := range configtest.Durations {
		os.WriteFile(filepath.Join(dir, confName), []byte("# settings\nbuild-timeout = "+c.In+"\n"), 0o600)
		cfg, _, err := loadConfigEnv("run", []string{"--data-dir", dir, "--controller-url", "https://x"}, noEnv, io.Discard)
		if err != nil || cfg.BuildTimeout != c.Want {
			t.Errorf("agent.conf build-timeout = %q: %v", c.In, err)
		}
	}
	for _, in := range configtest.BadDurations {
		os.WriteFile(filepath.Join(dir, confName), []byte("# settings\nbuild-timeout = "+in+"\n"), 0o600)
		_, _, err := loadConfigEnv("run", []string{"--data-dir", dir, "--controller-url", "https://x"}, noEnv, io.Discard)
		if err == nil || !strings.Contains(err.Error(), confName+":2: build-timeout") {
			t.Errorf("agent.conf build-timeout = %q: %v", in, err)
		}
	}
}

func noEnv(string) (string, bool) { return "", false }

// Tart's automatic pruning is the owner's choice, off unless asked for, from
// the flag, its variable or agent.conf, and reaches the Tart driver.
func TestTartAutoPruneIsOffUnlessAsked(t *testing.T) {
	dir := t.TempDir()
	base := []string{"--data-dir", dir, "--controller-url", "https://x"}
	for _, c := range []struct {
		args []string
		env  map[string]string
		conf string
		want bool
	}{
		{want: false},
		{args: []string{"--tart-auto-prune"}, want: true},
		{env: map[string]string{"FREEAGENT_TART_AUTO_PRUNE": "1"}, want: true},
		{conf: "tart-auto-prune = true\n", want: true},
	} {
		os.WriteFile(filepath.Join(dir, confName), []byte(c.conf), 0o600)
		cfg, _, err := loadConfigEnv("run", append(base, c.args...), func(k string) (string, bool) { v, ok := c.env[k]; return v, ok }, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if got := cfg.tartDriver(logrus.New()).AutoPrune; got != c.want {
			t.Errorf("args %v env %v conf %q: AutoPrune %v, want %v", c.args, c.env, c.conf, got, c.want)
		}
	}
}

// A worker whose VMs run on Softnet is held back by softnet's root check as
// well as by the owner's rules; on the shared network and with the local
// driver only by the rules.
func TestWorkerGateChecksSoftnet(t *testing.T) {
	cfg := &Config{DataDir: t.TempDir(), VMDriver: "tart", VMNetwork: tart.NetworkSoftnet, Softnet: "softnet"}
	softnetGated := func(d agent.Driver) bool {
		for _, g := range workerGate(cfg, d, logrus.New()).(agent.Gates) {
			if _, ok := g.(*hostcheck.SoftnetGate); ok {
				return true
			}
		}
		return false
	}
	if !softnetGated(cfg.tartDriver(logrus.New())) {
		t.Error("a softnet worker takes builds whatever softnet's root")
	}
	cfg.VMNetwork = tart.NetworkShared
	if softnetGated(cfg.tartDriver(logrus.New())) {
		t.Error("a shared-network worker is held back by softnet")
	}
	if softnetGated(&local.Driver{Root: t.TempDir()}) {
		t.Error("a local worker is held back by softnet")
	}
}
