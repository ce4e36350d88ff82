package agent_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/internal/standins/faketart/faketarttest"
	"github.com/freeagent-build/freeagent/internal/testsupport/syncbuf"
	"github.com/freeagent-build/freeagent/internal/testsupport/testtool"
	"github.com/freeagent-build/freeagent/vmbootstrap"
)

// benchDependencies is a real npm tree of about a hundred packages from
// the registry (express, typescript, lodash and friends).
var benchDependencies = map[string]string{"express": "4.21.2", "typescript": "5.7.3", "lodash": "4.17.21", "axios": "1.7.9",
	"moment": "2.30.1", "uuid": "11.0.5", "chalk": "4.1.2", "commander": "13.1.0", "yargs": "17.7.2", "debug": "4.4.0"}

// BenchmarkWarmBuild measures the warm build's two figures on one worker (the
// local driver, so the default pipeline runs with nothing between it and
// this host's disk and network):
//   - the install: `npm ci` with an empty cache against what a warm build
//     does instead, restoring the node_modules archive the first build
//     saved and checking its stamp (`node --version`, `npm --version`),
//     best of two each, in the same run (target: warm ≤ 0.25 × cold);
//     also `npm ci` after restoring the npm cache archive, what a build
//     whose package.json or lockfile changed gets (store-install-s);
//   - the whole build, `expo-build build` of the same app twice in
//     a row (target: repeat ≤ 0.5 × first).
//
// Run: go test ./agent -run XXX -bench WarmBuild -benchtime 1x
func BenchmarkWarmBuild(b *testing.B) {
	// settle writes the dirty pages of the previous step back before a
	// timed one starts: otherwise the kernel's writeback of one step's
	// gigabytes throttles the next step's writes, and which of cold or warm
	// pays for it is luck.
	settle := func() { syscall.Sync() }
	testtool.Need(b, "node", "npm", "jar", "jarsigner", "apksigner", "zipalign")
	f := newFarm(b, nil)
	agent := f.startLocalAgent(b)
	app := npmApp(b, "bench-warm", map[string]string{}, benchDependencies)
	run := f.expoBuild(b)

	build := func() time.Duration {
		settle()
		start := time.Now()
		code, stdout, stderr := run("", "build", app, "--platform", "android", "--non-interactive", "-o", b.TempDir())
		if code != 0 {
			b.Fatalf("build: exit %d\n%s%s\nagent:\n%s", code, stdout, stderr, agent.output())
		}
		return time.Since(start)
	}
	first := build()
	archiveOf := func(name string) string {
		var archive string
		if !faketarttest.WaitFor(60*time.Second, func() bool {
			m, _ := filepath.Glob(filepath.Join(agent.dir, "caches", "bench-warm.*", name, "*.tar"))
			if len(m) == 1 {
				archive = m[0]
			}
			return archive != ""
		}) {
			b.Fatalf("the first build left no %s cache\n%s", name, agent.output())
		}
		return archive
	}
	archive, modules := archiveOf("npm"), archiveOf("node_modules")
	repeat := build()

	// The install alone, as the VM runs it.
	ci := func(cache string, env ...string) time.Duration {
		os.RemoveAll(filepath.Join(app, "node_modules"))
		settle()
		start := time.Now()
		inDir(b, app, append(append(os.Environ(), "CI=1", "npm_config_cache="+cache), env...), "npm", "ci", "--include=dev", "--no-audit", "--no-fund")
		return time.Since(start)
	}
	// What freeagent-vm does in place of `npm ci` on a node_modules hit:
	// extract while node and npm say their versions for the stamp, then
	// move the tree into place.
	restoreModules := func() time.Duration {
		os.RemoveAll(filepath.Join(app, "node_modules"))
		stage := b.TempDir()
		settle()
		start := time.Now()
		var extracted sync.WaitGroup
		var err error
		extracted.Go(func() {
			_, err = vmbootstrap.ExtractFile(context.Background(), modules, stage, vmbootstrap.DefaultExtractLimits())
		})
		for _, tool := range []string{"node", "npm"} {
			inDir(b, app, os.Environ(), tool, "--version")
		}
		extracted.Wait()
		if err != nil {
			b.Fatal(err)
		}
		if err := os.Rename(filepath.Join(stage, "0"), filepath.Join(app, "node_modules")); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	best := func(a, b time.Duration) time.Duration { return min(a, b) }
	var cold, warm, store time.Duration = 1 << 62, 1 << 62, 1 << 62
	for range 2 {
		cold = best(cold, ci(b.TempDir()))
		warm = best(warm, restoreModules())
		restoreTo := b.TempDir()
		settle()
		start := time.Now()
		if _, err := vmbootstrap.ExtractFile(context.Background(), archive, restoreTo, vmbootstrap.DefaultExtractLimits()); err != nil {
			b.Fatal(err)
		}
		restore := time.Since(start)
		store = best(store, restore+ci(filepath.Join(restoreTo, "0"), "npm_config_prefer_offline=true"))
	}
	b.ReportMetric(cold.Seconds(), "cold-install-s")
	b.ReportMetric(warm.Seconds(), "warm-install-s")
	b.ReportMetric(warm.Seconds()/cold.Seconds(), "install-ratio")
	b.ReportMetric(store.Seconds(), "store-install-s")
	b.ReportMetric(first.Seconds(), "first-build-s")
	b.ReportMetric(repeat.Seconds(), "repeat-build-s")
	b.ReportMetric(repeat.Seconds()/first.Seconds(), "build-ratio")
	if st, err := os.Stat(archive); err == nil {
		b.ReportMetric(float64(st.Size())/(1<<20), "npm-cache-MiB")
	}
	if st, err := os.Stat(modules); err == nil {
		b.ReportMetric(float64(st.Size())/(1<<20), "node_modules-MiB")
	}
}

// startLocalAgent runs `freeagent run` with the local driver: builds are
// plain processes of this host running the real freeagent-vm.
func (f *farm) startLocalAgent(tb testing.TB, env ...string) *agentProc {
	tb.Helper()
	return f.startLocalAgentIn(tb, tb.TempDir(), env...)
}

// startLocalAgentIn is startLocalAgent with the data directory dir, which
// a test may fill first (its caches, say).
func (f *farm) startLocalAgentIn(tb testing.TB, dir string, env ...string) *agentProc {
	tb.Helper()
	cmd := exec.Command(f.agentBin, "run", "--controller-url", f.url, "--vm-driver", "local", "--data-dir", dir,
		"--bootstrap", f.vmBin, "--backoff-min", "200ms", "--max-builds", "1", "--name", "bench-local", "--platforms", "android")
	cmd.Env = append(append(os.Environ(), "FREEAGENT_API_KEY="+f.workerKey, "FREEAGENT_POLL_WAIT=2s"), env...)
	p := &agentProc{cmd: cmd, log: &syncbuf.Buffer{}, done: make(chan error, 1), dir: dir}
	cmd.Stdout, cmd.Stderr = p.log, p.log
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	go func() { p.done <- cmd.Wait() }()
	tb.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
	})
	return p
}
