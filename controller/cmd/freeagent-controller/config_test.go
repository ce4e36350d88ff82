package main

import (
	"flag"
	"io"
	"slices"
	"testing"

	"github.com/freeagent-build/freeagent/internal/config/configtest"
)

// Every duration and size setting of `serve` reads the shared syntax, from
// its flag and from its FREEAGENT_* variable.
func TestEveryDurationAndSizeSettingReadsTheSharedSyntax(t *testing.T) {
	checked := configtest.Check(t, func(args []string, env map[string]string) (*flag.FlagSet, error) {
		// Flags after the command's first argument too (parseInterspersed).
		args = append([]string{"arg"}, args...)
		env = mapsWith(env, "FREEAGENT_DATA_DIR", "/d")
		_, fs, err := parseConfigEnv("serve", args, lookupIn(env), io.Discard, true, nil)
		return fs, err
	})
	var names []string
	for _, st := range checked {
		names = append(names, st.Flag)
	}
	want := []string{"build-timeout", "build-token-ttl", "controller-ttl", "gc-interval", "lease-ttl", "link-ttl", "max-artifact-bytes",
		"max-log-bytes", "max-source-bytes", "poll-max-wait", "reaper-interval", "retain-artifacts", "retain-logs", "retain-sources",
		"token-rotate-after", "token-ttl", "warm-placement-wait", "worker-offline-after"}
	if !slices.Equal(names, want) {
		t.Errorf("checked %v, want %v", names, want)
	}
}

// --min-free-disk is a size or a share of the disk.
func TestMinFreeDiskReadsTheSharedSizeSyntax(t *testing.T) {
	for _, c := range configtest.Sizes {
		cfg, _, err := parseConfigEnv("serve", []string{"--min-free-disk", c.In}, lookupIn(map[string]string{"FREEAGENT_DATA_DIR": "/d"}), io.Discard, true, nil)
		if err != nil || cfg.Serve.MinFreeDisk.Bytes != uint64(c.Want) {
			t.Errorf("--min-free-disk %q: %v", c.In, err)
		}
	}
	for _, in := range configtest.BadSizes {
		if _, _, err := parseConfigEnv("serve", nil, lookupIn(map[string]string{"FREEAGENT_DATA_DIR": "/d", "FREEAGENT_MIN_FREE_DISK": in}), io.Discard, true, nil); err == nil {
			t.Errorf("FREEAGENT_MIN_FREE_DISK=%q accepted", in)
		}
	}
}

func lookupIn(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := env[k]; return v, ok }
}

func mapsWith(m map[string]string, k, v string) map[string]string {
	out := map[string]string{k: v}
	for k, v := range m {
		out[k] = v
	}
	return out
}
