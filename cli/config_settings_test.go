package cli

import (
	"flag"
	"slices"
	"testing"

	"github.com/freeagent-build/freeagent/internal/config/configtest"
)

// build's --build-timeout reads the syntax every Free Agent binary reads
// (7200 and 2h alike); the range check (1m to 24h) comes after.
func TestSubmitDurationFlagsReadTheSharedSyntax(t *testing.T) {
	t.Parallel()
	var names []string
	for _, st := range configtest.Check(t, func(args []string, _ map[string]string) (*flag.FlagSet, error) {
		inv := &invocation{cmd: &command{name: "build"}, aliases: map[string]string{}}
		fs := (&submitOpts{}).flags(inv)
		return fs, fs.Parse(args)
	}) {
		names = append(names, st.Flag)
	}
	if want := []string{"build-timeout"}; !slices.Equal(names, want) {
		t.Errorf("checked %v, want %v", names, want)
	}
}
