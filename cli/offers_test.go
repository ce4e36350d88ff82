package cli

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/freeagent-build/freeagent/api"
)

// TestProfilesRunOnWorkersThatOfferThem: resourceClass, image and node
// select among the farm's workers. While no online worker has what a
// profile asks, the submit is refused before the upload, naming what the
// workers offer; once one has it, the build is queued with its
// requirements and only that worker claims it.
func TestProfilesRunOnWorkersThatOfferThem(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := e.proxy()
	small := e.workerWith("small", api.Capabilities{Platforms: []string{"ios", "android"}, MaxConcurrentBuilds: 2,
		CPUCores: 2, MemoryGB: 4, Image: "freeagent-template", Tools: map[string][]string{"node": {"22.17.0"}}})
	cases := []struct {
		name, platform, easJSON string
		refused                 []string // what the refusal names
		want                    api.Requirements
	}{
		{"resourceClass m-medium", "ios", `{"build":{"production":{"ios":{"simulator":true,"resourceClass":"m-medium"}}}}`,
			[]string{`resourceClass "m-medium"`, "4 CPU cores, 8 GB of memory", "1 × 2 CPU cores, 4 GB, image freeagent-template, node 22.17.0"},
			api.Requirements{CPUCores: 4, MemoryGB: 8}},
		{"image latest", "ios", `{"build":{"production":{"ios":{"simulator":true,"image":"latest"}}}}`,
			[]string{`image "latest"`, "no online iOS worker reports its Xcode", "image freeagent-template"},
			api.Requirements{Xcode: "26.0"}},
		{"node 20.19.4", "android", `{"build":{"production":{"node":"20.19.4"}}}`,
			[]string{`node "20.19.4"`, "node 20.19.4", "no online worker", "node 22.17.0"},
			api.Requirements{Tools: map[string]string{"node": "20.19.4"}}},
	}
	dirs := make([]string, len(cases))
	for i, c := range cases {
		dirs[i] = project(t, map[string]string{"eas.json": c.easJSON})
		r := e.run(map[string]string{"EXPO_CONTROLLER_URL": p.URL}, "build", dirs[i], "--platform", c.platform, "--no-wait", "--non-interactive")
		if r.code != ExitUsage {
			t.Fatalf("%s with only a small worker: want exit %d\n%s", c.name, ExitUsage, r)
		}
		for _, w := range c.refused {
			if !strings.Contains(r.stderr, w) {
				t.Errorf("%s: the refusal lacks %q\n%s", c.name, w, r)
			}
		}
		noSubmit(t, p, c.name)
	}
	if n := e.buildCount(t); n != 0 {
		t.Fatalf("%d builds were made while no worker could run them", n)
	}

	big := e.workerWith("big", api.Capabilities{Platforms: []string{"ios", "android"}, MaxConcurrentBuilds: 2,
		CPUCores: 8, MemoryGB: 16, XcodeVersion: "26.0", Image: "freeagent-template",
		Tools: map[string][]string{"node": {"24.1.0", "20.19.4"}}})
	for i, c := range cases {
		r := e.mustRun(0, nil, "build", "--no-wait", dirs[i], "--platform", c.platform, "--json")
		id := queuedID(t, r)
		spec := e.storedSpec(t, id)
		if spec.Requires == nil || spec.Requires.String() != c.want.String() {
			t.Errorf("%s: the spec requires %v, want %v", c.name, spec.Requires, &c.want)
		}
		// The small worker polls first and gets nothing: the claim
		// routes the build to the worker that has what it needs.
		resp, err := small.c.Poll(context.Background(), small.token, 0)
		if err != nil {
			t.Fatalf("poll: %v", err)
		}
		small.keep(resp.TokenGrant)
		if resp.Job != nil {
			t.Fatalf("%s: the small worker was given build %s", c.name, resp.Job.ID)
		}
		j := big.claim()
		if j.ID != id {
			t.Fatalf("%s: the big worker claimed %s, want %s", c.name, j.ID, id)
		}
		big.finish(j, true, "app.tar.gz", []byte("artifact"))
	}

	// What the farm offers, as a developer key sees it.
	offers, err := (&api.Client{BaseURL: e.URL, APIKey: e.devKey}).FarmOffers(context.Background(), "demo")
	if err != nil {
		t.Fatal(err)
	}
	if len(offers.Offers) != 2 || !slices.ContainsFunc(offers.Offers, func(o api.Offer) bool { return o.XcodeVersion == "26.0" && o.Workers == 1 }) {
		t.Errorf("offers: %+v", offers)
	}
}
