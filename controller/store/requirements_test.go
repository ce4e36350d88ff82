package store

import (
	"errors"
	"strings"
	"testing"

	"github.com/freeagent-build/freeagent/api"
)

// TestRequirementsAndToolsAreBounded: what the claim matches in SQL for
// every build it passes (a spec's requires, a worker's tools) is bounded
// and well formed before it is stored.
func TestRequirementsAndToolsAreBounded(t *testing.T) {
	t.Parallel()
	for _, r := range []*api.Requirements{
		{CPUCores: -1}, {MemoryGB: 1 << 20}, {Xcode: "16.4'; DROP"}, {Image: strings.Repeat("x", 301)},
		{Tools: map[string]string{"Node": "20.19.4"}}, {Tools: map[string]string{"node": ""}}, {Tools: map[string]string{"node": "20 || 1"}},
	} {
		if err := CheckRequirements(r); !errors.Is(err, ErrInvalid) {
			t.Errorf("requires %+v: %v, want ErrInvalid", r, err)
		}
	}
	if err := CheckRequirements(&api.Requirements{CPUCores: 8, MemoryGB: 32, Xcode: "26.0", Image: "ghcr.io/a/b:1",
		Tools: map[string]string{"node": "20.19.4", "ndk": "27.1"}}); err != nil {
		t.Errorf("good requires: %v", err)
	}
	many := map[string][]string{}
	for i := range maxTools + 1 {
		many["t"+strings.Repeat("x", i)] = []string{"1.0"}
	}
	for _, tools := range []map[string][]string{many, {"node": make([]string, maxToolVersions+1)}, {"node": {"20.19.4\x00"}}, {"../x": {"1"}}} {
		req := api.RegisterRequest{Name: "mac", Capabilities: api.Capabilities{Tools: tools}}
		if err := ValidateRegistration(&req); !errors.Is(err, ErrInvalid) {
			t.Errorf("tools %q: %v, want ErrInvalid", tools, err)
		}
	}
	req := api.RegisterRequest{Name: "mac", Capabilities: api.Capabilities{Image: "freeagent-template", Tools: map[string][]string{"node": {"24.1.0", "20.19.4"}}}}
	if err := ValidateRegistration(&req); err != nil {
		t.Errorf("good tools: %v", err)
	}
}
