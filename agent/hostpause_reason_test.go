package agent

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/freeagent-build/freeagent/api"
)

// A pause reason longer than the controller stores is cut to fit, on a
// character boundary, instead of being refused at every report.
func TestReportedReasonFitsTheController(t *testing.T) {
	long := strings.Repeat("é", api.MaxHostPauseReason)
	got := cutReason(long, api.MaxHostPauseReason)
	if len(got) > api.MaxHostPauseReason || !utf8.ValidString(got) || !strings.HasSuffix(got, "…") {
		t.Fatalf("reported %d bytes %q; want at most %d valid bytes ending in …", len(got), got, api.MaxHostPauseReason)
	}
	if short := "on battery"; cutReason(short, api.MaxHostPauseReason) != short {
		t.Fatalf("a short reason changed: %q", cutReason(short, api.MaxHostPauseReason))
	}
}
