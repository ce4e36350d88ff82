//go:build unix

package agent_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/freeagent-build/freeagent/agent"
	"github.com/freeagent-build/freeagent/agent/power"
	"github.com/freeagent-build/freeagent/agent/power/powertest"
	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/controllertest"
	"github.com/freeagent-build/freeagent/controller/serve"
)

// heldDriver's environments fail to start once the test releases them, so
// a build runs exactly as long as the test wants.
type heldDriver struct {
	started chan string
	release chan struct{}
}

func (heldDriver) Name() string                      { return "held" }
func (heldDriver) Cleanup(ctx context.Context) error { return nil }
func (d heldDriver) Start(ctx context.Context, name, dir string, res agent.Resources) (agent.Instance, error) {
	d.started <- name
	select {
	case <-d.release:
	case <-ctx.Done():
	}
	return nil, &agent.StartError{Code: "vm_start_failed", Err: errors.New("released by the test")}
}

// inProcess is a controller on real Postgres for agents run in-process,
// with a key of each role.
type inProcess struct {
	url                         string
	devKey, workerKey, adminKey string
	log                         *logrus.Logger // discards
}

func startController(t *testing.T) inProcess {
	t.Helper()
	quiet := logrus.New()
	quiet.SetOutput(io.Discard)
	c := controllertest.Start(t, controllertest.Logger(quiet),
		controllertest.Configure(func(c *serve.Config) { c.ReaperInterval = time.Second }))
	return inProcess{url: c.URL, log: quiet, devKey: c.DeveloperKey, workerKey: c.WorkerKey, adminKey: c.AdminKey}
}

// TestHostKeptAwakeWhileBuilding: the agent takes the power assertion (a
// stand-in caffeinate, driven by the production power.Caffeinate) when a
// build starts and releases it when the build ends.
func TestHostKeptAwakeWhileBuilding(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := startController(t)
	quiet, devKey, workerKey := c.log, c.devKey, c.workerKey

	caffeinate, log := powertest.StandIn(t)
	awake := &power.Caffeinate{Path: caffeinate, PID: os.Getpid()}
	t.Cleanup(func() { awake.SetBusy(false) })
	d := heldDriver{started: make(chan string, 1), release: make(chan struct{})}
	a, err := agent.New(agent.Config{ControllerURL: c.url, APIKey: workerKey, WorkDir: t.TempDir(),
		PollWait: time.Second, Awake: awake}, d, quiet)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()

	dev := &api.Client{BaseURL: c.url, APIKey: devKey}
	resp, err := dev.Submit(ctx, api.SubmitRequest{Platform: "android", Source: bytes.NewReader(fixture(t, "true"))})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-d.started:
	case <-time.After(30 * time.Second):
		t.Fatal("the build never reached the driver")
	}
	lines := powertest.WaitLog(t, log, 1)
	if f := strings.Fields(lines[0]); len(f) != 5 || f[0] != "start" || strings.Join(f[2:], " ") != "-i -w "+strconv.Itoa(os.Getpid()) {
		t.Fatalf("while building: %q, want caffeinate -i -w %d", lines, os.Getpid())
	}
	close(d.release)
	lines = powertest.WaitLog(t, log, 2)
	if want := "stop " + strings.Fields(lines[0])[1]; len(lines) != 2 || lines[1] != want {
		t.Fatalf("after the build: %q, want %q", lines, want)
	}
	if bs := a.Status().Builds; len(bs) != 0 {
		t.Fatalf("released while build %+v runs", bs)
	}
	b, err := dev.GetBuild(ctx, resp.ID)
	if err != nil || b.Status == "running" {
		t.Fatalf("build %+v, %v", b, err)
	}
	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	if got := log(); len(got) != 2 {
		t.Fatalf("after the agent stopped: %q", got)
	}
}
