package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/freeagent-build/freeagent/agent/hostcheck"
	"github.com/freeagent-build/freeagent/agent/tart"
	"github.com/freeagent-build/freeagent/controller/controllertest"
	"github.com/freeagent-build/freeagent/controller/pgtest"
	"github.com/freeagent-build/freeagent/controller/serve"
	"github.com/freeagent-build/freeagent/internal/standins/faketart/faketarttest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// controller starts a controller on a throwaway database and returns its
// URL and a new worker API key.
func controller(t *testing.T) (url, workerKey string) {
	url, workerKey, _ = controllerWithDev(t)
	return url, workerKey
}

// controllerWithDev is controller, and a developer key too.
func controllerWithDev(t *testing.T) (url, workerKey, devKey string) {
	t.Helper()
	url, workerKey, devKey, _ = controllerWithAdmin(t)
	return url, workerKey, devKey
}

// controllerWithAdmin is controllerWithDev, and an admin key too.
func controllerWithAdmin(t *testing.T) (url, workerKey, devKey, adminKey string) {
	t.Helper()
	log := logrus.New()
	log.SetOutput(io.Discard)
	c := controllertest.Start(t, controllertest.Logger(log),
		controllertest.Configure(func(c *serve.Config) { c.ReaperInterval = time.Second }))
	workerKey, devKey, adminKey = c.WorkerKey, c.DeveloperKey, c.AdminKey
	return c.URL, workerKey, devKey, adminKey
}

func TestDoctor(t *testing.T) {
	url, key := controller(t)
	tartBin, home := faketarttest.Build(t), faketarttest.Home(t)
	t.Setenv("TART_HOME", home)
	t.Setenv("FREEAGENT_API_KEY", key)
	dir := t.TempDir()
	args := []string{"doctor", "--data-dir", dir, "--controller-url", url, "--vm-driver", "tart", "--tart", tartBin,
		"--template", "macos-expo", "--min-free-gb", "1"}

	var stdout, stderr bytes.Buffer
	code := run(append(args, "--softnet", filepath.Join(dir, "no-softnet")), strings.NewReader(""), &stdout, &stderr)
	if code != 1 || !strings.Contains(stdout.String(), `✗ template    template VM "macos-expo" is missing`) ||
		!strings.Contains(stdout.String(), "✗ softnet     softnet is not installed") ||
		!strings.Contains(stdout.String(), "fix: build it with scripts/build-vm-template.sh") ||
		!strings.Contains(stdout.String(), "✓ controller") || !strings.Contains(stdout.String(), "✓ tart        Tart 2.32.0") ||
		!strings.Contains(stdout.String(), "dhcp_lease  DHCP leases for Tart VMs last") {
		t.Fatalf("missing template: %d\n%s%s", code, stdout.String(), stderr.String())
	}

	faketarttest.Template(t, home, "macos-expo", nil, nil)
	// Softnet's root (setuid or sudo) cannot be had without root here:
	// the shared network is only a warning.
	args = append(args, "--vm-network", "shared")
	stdout.Reset()
	stderr.Reset()
	if code := run(args, strings.NewReader(""), &stdout, &stderr); code != 0 || strings.Contains(stdout.String(), "✗") || !strings.Contains(stdout.String(), "softnet     VMs run on Tart's shared network") {
		t.Fatalf("healthy host: %d\n%s%s", code, stdout.String(), stderr.String())
	}

	stdout.Reset()
	stderr.Reset()
	t.Setenv("FREEAGENT_API_KEY", "fak_revoked")
	code = run(append(args, "--json"), strings.NewReader(""), &stdout, &stderr)
	var report struct {
		OK     bool
		Checks []hostcheck.Result
	}
	if err := json.Unmarshal(stdout.Bytes(), &report); err != nil || code != 1 || report.OK || stderr.Len() != 0 {
		t.Fatalf("json: %d %v %q %q", code, err, stdout.String(), stderr.String())
	}
	for _, c := range report.Checks {
		if c.ID == hostcheck.IDController && (c.Severity != hostcheck.Fail || !strings.Contains(c.Fix, "keys create")) {
			t.Fatalf("refused key: %+v", c)
		}
	}
	if len(report.Checks) != 11 {
		t.Fatalf("want all ten checks and the caches: %+v", report.Checks)
	}
	if last := report.Checks[10]; last.ID != "caches" || last.Message != "dependency caches: 0 B of 20.0 GiB, no build yet" {
		t.Fatalf("caches line %+v", last)
	}
}

// TestPlatformsComeFromTheTemplate: a template built without Android
// (its marker says ios) must not make the worker advertise
// android, whatever the setting, and doctor says so.
func TestPlatformsComeFromTheTemplate(t *testing.T) {
	tartBin, home := faketarttest.Build(t), faketarttest.Home(t)
	t.Setenv("TART_HOME", home)
	faketarttest.Template(t, home, "macos-expo", nil, nil)
	log := logrus.New()
	log.SetOutput(io.Discard)
	cfg := &Config{VMDriver: "tart", Tart: tartBin, Template: "macos-expo"}
	if got := cfg.capabilities(log).Platforms; !slices.Equal(got, hostcheck.DefaultPlatforms) {
		t.Fatalf("no marker, no setting: advertises %v", got)
	}
	marker := filepath.Join(home, "vms", "macos-expo", tart.TemplateInfoFile)
	if err := os.WriteFile(marker, []byte(`{"platforms": ["ios"], "xcode_version": "16.2"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The worker advertises the template's Xcode and its Tart's version.
	if caps := cfg.capabilities(log); caps.XcodeVersion != "16.2" || caps.TartVersion == "" {
		t.Errorf("capabilities of a template whose marker records Xcode 16.2: xcode %q, tart %q", caps.XcodeVersion, caps.TartVersion)
	}
	for _, set := range []string{"", "ios,android"} {
		cfg.Platforms = set
		if got := cfg.capabilities(log).Platforms; !slices.Equal(got, []string{"ios"}) {
			t.Errorf("--platforms %q with an iOS-only template: advertises %v", set, got)
		}
	}
	cfg.Platforms = "android"
	_, r := hostcheck.Platforms(cfg.tartDriver(log), cfg.platforms())
	if r.Severity != hostcheck.Fail || !strings.Contains(r.Message, "takes no builds") {
		t.Errorf("android only on an iOS template: %+v", r)
	}
	var stdout, stderr bytes.Buffer
	code := run([]string{"doctor", "--data-dir", t.TempDir(), "--controller-url", "http://127.0.0.1:1", "--vm-driver", "tart", "--tart", tartBin,
		"--template", "macos-expo", "--platforms", "ios,android"}, strings.NewReader(""), &stdout, &stderr)
	if code != 1 || !strings.Contains(stdout.String(), `! platforms   template "macos-expo" cannot build android: advertising ios only`) {
		t.Fatalf("doctor: %d\n%s%s", code, stdout.String(), stderr.String())
	}
}

// Builds never pull a template that is on this Mac; `freeagent pull` is how
// the owner follows a moved tag.
func TestPullRefreshesOnlyARemoteTemplate(t *testing.T) {
	tartBin := faketarttest.Build(t)
	home, registry := faketarttest.Home(t), t.TempDir()
	faketarttest.RegistryImage(t, registry, "ghcr.io/acme/macos-expo:latest", faketarttest.VM{OS: "darwin"})
	faketarttest.Template(t, home, "macos-local", nil, nil)
	t.Setenv("TART_HOME", home)
	t.Setenv("FAKETART_REGISTRY", registry)
	logFile := filepath.Join(t.TempDir(), "tart.log")
	t.Setenv("FAKETART_LOG", logFile)

	pull := func(template string) (int, string) {
		var stdout, stderr bytes.Buffer
		code := run([]string{"pull", "--data-dir", t.TempDir(), "--vm-driver", "tart", "--tart", tartBin, "--template", template},
			strings.NewReader(""), &stdout, &stderr)
		return code, stdout.String() + stderr.String()
	}
	code, out := pull("macos-local")
	if code != 0 || !strings.Contains(out, `template "macos-local" is a local VM: nothing to pull`) {
		t.Fatalf("pull of a local template: %d\n%s", code, out)
	}
	for range 2 { // again: the owner asked, so the cached image is pulled again
		code, out = pull("ghcr.io/acme/macos-expo")
		if code != 0 || !strings.Contains(out, "pulling the VM template") || !strings.Contains(out, "template ghcr.io/acme/macos-expo is up to date") {
			t.Fatalf("pull of a remote template: %d\n%s", code, out)
		}
	}
	pulls := 0
	for _, e := range faketarttest.ReadLog(t, logFile) {
		if e.Cmd == "pull" {
			pulls++
			if e.Exit == nil || *e.Exit != 0 {
				t.Errorf("tart pull failed: %+v", e)
			}
		}
	}
	if pulls != 2 {
		t.Fatalf("tart pull ran %d times, want 2", pulls)
	}
	code, out = pull("ghcr.io/acme/missing")
	if code != 1 || !strings.Contains(out, "404") {
		t.Fatalf("pull of a missing image: %d\n%s", code, out)
	}
}

// TestWorkerAdvertisesWhatBuildsGet: a Tart worker advertises its
// template's name, size (tart get, unless --cpu/--memory-mb set it) and the
// tools its marker records; a local-driver worker its host's cores,
// memory and tools. These select builds by eas.json resourceClass, image
// and tool pins.
func TestWorkerAdvertisesWhatBuildsGet(t *testing.T) {
	tartBin, home := faketarttest.Build(t), faketarttest.Home(t)
	t.Setenv("TART_HOME", home)
	faketarttest.Template(t, home, "macos-expo", nil, nil) // 4 CPUs, 4 GiB
	marker := filepath.Join(home, "vms", "macos-expo", tart.TemplateInfoFile)
	if err := os.WriteFile(marker, []byte(`{"platforms": ["ios"], "xcode_version": "26.0", "tools": {"node": ["24.1.0", "20.19.4"], "cocoapods": ["1.16.2"]}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	log := logrus.New()
	log.SetOutput(io.Discard)
	cfg := &Config{VMDriver: "tart", Tart: tartBin, Template: "macos-expo"}
	caps := cfg.capabilities(log)
	if caps.Image != "macos-expo" || caps.CPUCores != 4 || caps.MemoryGB != 4 || caps.XcodeVersion != "26.0" ||
		!slices.Equal(caps.Tools["node"], []string{"24.1.0", "20.19.4"}) || !slices.Equal(caps.Tools["cocoapods"], []string{"1.16.2"}) {
		t.Errorf("tart worker advertises %+v", caps)
	}
	cfg.CPU, cfg.MemoryMB = 8, 16384
	if caps := cfg.capabilities(log); caps.CPUCores != 8 || caps.MemoryGB != 16 {
		t.Errorf("--cpu 8 --memory-mb 16384: advertises %d cores, %d GB", caps.CPUCores, caps.MemoryGB)
	}

	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "node"), []byte("#!/bin/sh\necho v20.19.4\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv("HOME", t.TempDir())
	t.Setenv("HOMEBREW_PREFIX", t.TempDir())
	local := &Config{VMDriver: "local", Platforms: "android"}
	caps = local.capabilities(log)
	if caps.Image != "local" || caps.CPUCores < 1 || caps.MemoryGB < 1 || !slices.Contains(caps.Tools["node"], "20.19.4") {
		t.Errorf("local worker advertises %+v", caps)
	}
}
