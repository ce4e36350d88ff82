package main

import (
	"flag"
	"io"
	"slices"
	"testing"

	"github.com/freeagent-build/freeagent/internal/config/configtest"
)

// Every duration and size flag of the benchmark reads the syntax the
// binaries share.
func TestEveryDurationAndSizeFlagReadsTheSharedSyntax(t *testing.T) {
	var names []string
	for _, st := range configtest.Check(t, func(args []string, _ map[string]string) (*flag.FlagSet, error) {
		_, _, fs, err := parseFlags(args, io.Discard)
		return fs, err
	}) {
		names = append(names, st.Flag)
	}
	want := []string{"artifact-size", "duration", "empty-duration", "fleet-artifact-size", "fleet-build-time", "fleet-warmup", "fleet-window", "pgbench-duration", "pickup-spacing", "poll-wait", "sweep-duration", "transfer-size", "warmup"}
	if !slices.Equal(names, want) {
		t.Errorf("checked %v, want %v", names, want)
	}
}
