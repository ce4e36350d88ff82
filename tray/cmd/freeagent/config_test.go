package main

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

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
	want := []string{"backoff-min", "boot-timeout", "build-timeout", "host-check-interval", "poll-wait"}
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
