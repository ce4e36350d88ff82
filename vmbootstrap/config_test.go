package vmbootstrap

import (
	"flag"
	"io"
	"slices"
	"testing"

	"github.com/freeagent-build/freeagent/internal/config/configtest"
)

// Every duration and size setting of freeagent-vm reads the syntax the
// controller and the worker read, from its flag and its FREEAGENT_* variable.
func TestEveryDurationAndSizeSettingReadsTheSharedSyntax(t *testing.T) {
	t.Parallel()
	var names []string
	for _, st := range configtest.Check(t, func(args []string, env map[string]string) (*flag.FlagSet, error) {
		_, fs, err := parseConfig(args, func(k string) string { return env[k] }, io.Discard)
		return fs, err
	}) {
		names = append(names, st.Flag)
	}
	want := []string{"build-timeout", "kill-grace", "max-file-bytes", "max-source-bytes", "wait-timeout"}
	if !slices.Equal(names, want) {
		t.Errorf("checked %v, want %v", names, want)
	}
}
