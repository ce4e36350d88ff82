package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/internal/standins/faketart/faketarttest"
)

// spareAgent starts a worker that keeps warm spares, on a fake Tart whose
// VMs take a Mac's steps to come up (a boot, then the auto-login), scaled
// down from the benchmark's 40 s so the test stays short; the host's rules
// read signals (not on battery).
func spareAgent(t *testing.T, f *farm, extraEnv ...string) (*agentProc, string) {
	t.Helper()
	signals := filepath.Join(t.TempDir(), "signals.json")
	writeSignals(t, signals, `{"on_battery": false}`)
	env := append([]string{"FREEAGENT_WARM_SPARE=1", "FAKETART_BOOT_DELAY=2s", "FAKETART_LOGIN_DELAY=1s",
		"FREEAGENT_HOST_SIGNALS=" + signals, "FREEAGENT_HOST_CHECK_INTERVAL=200ms"}, extraEnv...)
	return f.startAgent(env...), signals
}

func writeSignals(t *testing.T, path, js string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(js), 0o600); err != nil {
		t.Fatal(err)
	}
}

// waitLog waits until the agent's log holds what at least n times.
func (p *agentProc) waitLog(t testing.TB, what string, n int, within time.Duration) {
	t.Helper()
	if !faketarttest.WaitFor(within, func() bool { return strings.Count(p.output(), what) >= n }) {
		t.Fatalf("the agent's log did not say %q %d times within %s:\n%s", what, n, within, p.output())
	}
}

// runningVMs lists the farm's fa-* VMs that run.
func (f *farm) runningVMs() []string {
	f.t.Helper()
	res := faketarttest.Run(f.t, f.tart, faketarttest.Env(f.tartHome), "list", "--source", "local", "--format", "json")
	var list []struct {
		Name    string
		Running bool
	}
	if err := json.Unmarshal([]byte(res.Stdout), &list); err != nil {
		f.t.Fatalf("tart list: %v: %s", err, res.Stdout)
	}
	var running []string
	for _, vm := range list {
		if vm.Running && strings.HasPrefix(vm.Name, "fa-") {
			running = append(running, vm.Name)
		}
	}
	return running
}

// waitSpare waits until the controller shows a worker's warm spare as
// cond wants it (GET /api/workers).
func (f *farm) waitSpare(t *testing.T, what string, within time.Duration, cond func(*api.WorkerSpare) bool) {
	t.Helper()
	var last []api.Worker
	if !faketarttest.WaitFor(within, func() bool {
		list, err := f.admin.ListWorkers(context.Background())
		if err != nil {
			return false
		}
		last = list.Workers
		return slices.ContainsFunc(list.Workers, func(w api.Worker) bool { return cond(w.Spare) })
	}) {
		t.Fatalf("GET /api/workers did not show %s within %s: %+v", what, within, last)
	}
}

// attemptVM is the VM the build's one attempt ran on, as the controller has it.
func (f *farm) attemptVM(t *testing.T, id string) api.AttemptVM {
	t.Helper()
	b, err := f.admin.GetBuild(context.Background(), id)
	if err != nil || len(b.AttemptHistory) != 1 || b.AttemptHistory[0].VM == nil {
		t.Fatalf("build %s: no VM reported for its attempt: %+v, %v", id, b.AttemptHistory, err)
	}
	return *b.AttemptHistory[0].VM
}

const quickApk = "mkdir -p \"$FREEAGENT_ARTIFACTS_DIR\"\necho ok > \"$FREEAGENT_ARTIFACTS_DIR/app.apk\"\n"

// TestEndToEndWarmSpare: with a fake that boots and logs in like a Mac,
// the worker boots a spare before any build; the first build and the
// second, right after it, run on spares (the replacement was made while
// the first ran); a host pause removes the spare and its end brings one
// back; two builds at once keep none (the host's two VM slots are theirs);
// at the end no VM is left.
func TestEndToEndWarmSpare(t *testing.T) {
	f := newFarm(t, nil)
	a, signals := spareAgent(t, f)
	a.waitLog(t, "warm spare ready", 1, 60*time.Second)

	// The first build lasts longer than a boot; the second comes as soon
	// as it ended, while the first's VM is still being torn down.
	for i, id := range []string{f.submit("sleep 4\n" + quickApk), ""} {
		if i == 1 {
			id = f.submit(quickApk)
		}
		b := f.waitFor(id, 60*time.Second, "completed", func(b api.Build) bool { return b.Status.Terminal() })
		if b.Status != api.StatusCompleted || b.Attempts != 1 {
			t.Fatalf("build %d: %+v\nlog:\n%s", i+1, b, f.logs(id))
		}
		if logs := f.logs(id); !strings.Contains(logs, "▸ VM: a warm spare, booted before the build was claimed; the VM phase took") {
			t.Fatalf("build %d's log does not say it ran on a warm spare:\n%s", i+1, logs)
		}
		a.waitLog(t, "environment ready: a warm spare", i+1, 10*time.Second)
		if vm := f.attemptVM(t, id); vm.Spare != api.SpareHit || vm.PhaseSeconds <= 0 {
			t.Fatalf("build %d's attempt VM: %+v, want a warm spare with its VM phase", i+1, vm)
		}
	}
	f.waitSpare(t, "a waiting spare and two hits", 60*time.Second, func(sp *api.WorkerSpare) bool {
		return sp != nil && (sp.State == api.SpareReady || sp.State == api.SpareSuspended) && sp.Hits == 2 && sp.Misses == 0
	})

	// The host's rules say no: the spare goes, as new builds would wait.
	writeSignals(t, signals, `{"on_battery": true}`)
	a.waitLog(t, "warm spare removed: the worker is paused", 1, 30*time.Second)
	booted := strings.Count(a.output(), "warm spare booting")
	if !faketarttest.WaitFor(30*time.Second, func() bool { return len(f.runningVMs()) == 0 }) {
		t.Fatalf("VMs running while the worker is paused: %v", f.runningVMs())
	}
	if n := strings.Count(a.output(), "warm spare booting"); n != booted {
		t.Fatalf("the worker booted a spare while paused:\n%s", a.output())
	}
	writeSignals(t, signals, `{"on_battery": false}`)
	a.waitLog(t, "warm spare ready", 3, 60*time.Second)

	// Two builds at once: the first takes the spare, the second its
	// replacement, and no third VM is booted while both run.
	release := filepath.Join(t.TempDir(), "release")
	hold := "while [ ! -e " + release + " ]; do sleep 0.2; done\n" + quickApk
	ids := []string{f.submit(hold), f.submit(hold)}
	for _, id := range ids {
		f.waitFor(id, 60*time.Second, "building", func(b api.Build) bool { return b.Status == api.StatusBuilding })
	}
	a.waitLog(t, "no warm spare: two builds run: both VM slots are in use", 1, 30*time.Second)
	f.waitSpare(t, "no spare while two builds run", 30*time.Second, func(sp *api.WorkerSpare) bool {
		return sp != nil && sp.State == api.SpareNone && sp.Reason == "two builds run: both VM slots are in use"
	})
	if vms := f.runningVMs(); len(vms) != 2 {
		t.Fatalf("VMs while two builds run: %v, want the builds' two", vms)
	}
	if strings.Contains(a.output(), "could not boot a warm spare") {
		t.Fatalf("the worker tried to boot a spare while two builds ran:\n%s", a.output())
	}
	os.WriteFile(release, nil, 0o644)
	for _, id := range ids {
		if b := f.waitFor(id, 60*time.Second, "completed", func(b api.Build) bool { return b.Status.Terminal() }); b.Status != api.StatusCompleted {
			t.Fatalf("held build: %+v\nlog:\n%s", b, f.logs(id))
		}
	}
	a.waitLog(t, "warm spare ready", 4, 60*time.Second)
	a.stop(t)
	f.noBuildVMs()
}

// TestEndToEndSuspendedSpare: with --suspend-spare the ready spare is
// suspended (no VM runs, none holds a slot) and a build resumes it and
// runs on it; on a Mac that cannot suspend, the refusal is said once and
// the spares stay running, still taken by builds.
func TestEndToEndSuspendedSpare(t *testing.T) {
	f := newFarm(t, nil)
	a, _ := spareAgent(t, f, "FREEAGENT_SUSPEND_SPARE=1")
	a.waitLog(t, "warm spare suspended", 1, 60*time.Second)
	f.waitSpare(t, "a suspended spare", 30*time.Second, func(sp *api.WorkerSpare) bool {
		return sp != nil && sp.State == api.SpareSuspended
	})
	if vms := f.runningVMs(); len(vms) != 0 {
		t.Fatalf("VMs running beside a suspended spare: %v", vms)
	}
	id := f.submit(quickApk)
	b := f.waitFor(id, 60*time.Second, "completed", func(b api.Build) bool { return b.Status.Terminal() })
	if b.Status != api.StatusCompleted || b.Attempts != 1 {
		t.Fatalf("build on a suspended spare: %+v\nlog:\n%s", b, f.logs(id))
	}
	if logs := f.logs(id); !strings.Contains(logs, "▸ VM: a warm spare") {
		t.Fatalf("the build's log does not say it ran on the warm spare:\n%s", logs)
	}
	if vm := f.attemptVM(t, id); vm.Spare != api.SpareHit {
		t.Fatalf("the attempt on a suspended spare: %+v, want a warm spare hit", vm)
	}
	a.waitLog(t, "warm spare suspended", 2, 60*time.Second)
	a.stop(t)
	f.noBuildVMs()

	// A Mac that cannot suspend (macOS 13): the refusal powers the VM off,
	// and the worker keeps its next spares running.
	a2, _ := spareAgent(t, f, "FREEAGENT_SUSPEND_SPARE=1",
		"FAKETART_SUSPEND_FAIL=this functionality is only supported on macOS 14 (Sonoma) or newer")
	a2.waitLog(t, "this Mac cannot suspend the spare VM", 1, 60*time.Second)
	a2.waitLog(t, "warm spare ready", 2, 60*time.Second)
	f.waitSpare(t, "a running spare", 30*time.Second, func(sp *api.WorkerSpare) bool {
		return sp != nil && sp.State == api.SpareReady
	})
	id = f.submit(quickApk)
	b = f.waitFor(id, 60*time.Second, "completed", func(b api.Build) bool { return b.Status.Terminal() })
	if b.Status != api.StatusCompleted || b.Attempts != 1 {
		t.Fatalf("build after a refused suspension: %+v\nlog:\n%s", b, f.logs(id))
	}
	if vm := f.attemptVM(t, id); vm.Spare != api.SpareHit {
		t.Fatalf("the attempt after a refused suspension: %+v, want a warm spare hit", vm)
	}
	if n := strings.Count(a2.output(), "this Mac cannot suspend the spare VM"); n != 1 {
		t.Fatalf("the refusal was met %d times, want once: the worker tried again\n%s", n, a2.output())
	}
	a2.stop(t)
	f.noBuildVMs()
}

// guestsOf lists the pids of the processes running in the farm's VMs whose
// name contains vm.
func (f *farm) guestsOf(vm string) []int {
	var pids []int
	for _, p := range f.guestProcesses() {
		pid, _, _ := strings.Cut(p, ":")
		env, _ := os.ReadFile("/proc/" + pid + "/environ")
		if bytes.Contains(env, []byte("TART_FAKE_VM_NAME=")) && bytes.Contains(env, []byte(vm)) {
			n, _ := strconv.Atoi(pid)
			pids = append(pids, n)
		}
	}
	return pids
}

// TestEndToEndSpareFaults: a spare whose bootstrap does not answer (a
// frozen guest) is destroyed and the build boots a fresh VM without losing
// an attempt; a spare whose VM died is replaced; a worker killed with a
// spare leaves no VM after its next start; a template deleted under a
// spare is reported, and not cloned again and again.
func TestEndToEndSpareFaults(t *testing.T) {
	f := newFarm(t, nil)
	tartLog := filepath.Join(t.TempDir(), "tart.log")
	a, _ := spareAgent(t, f, "FREEAGENT_SPARE_ANSWER_TIMEOUT=3s", "FAKETART_LOG="+tartLog)
	a.waitLog(t, "warm spare ready", 1, 60*time.Second)

	// Frozen: the spare's guest (its launcher) stops.
	frozen := f.guestsOf("-spare-1")
	if len(frozen) == 0 {
		t.Fatalf("no guest processes of the spare: %v", f.guestProcesses())
	}
	for _, pid := range frozen {
		syscall.Kill(pid, syscall.SIGSTOP)
	}
	id := f.submit(quickApk)
	b := f.waitFor(id, 90*time.Second, "completed", func(b api.Build) bool { return b.Status.Terminal() })
	if b.Status != api.StatusCompleted || b.Attempts != 1 {
		t.Fatalf("build after a frozen spare: %+v\nlog:\n%s", b, f.logs(id))
	}
	if !strings.Contains(a.output(), "the warm spare's bootstrap did not answer") || !strings.Contains(f.logs(id), "▸ VM: a fresh VM") {
		t.Fatalf("the build did not fall back from the frozen spare to a fresh VM:\nagent:\n%s\nbuild:\n%s", a.output(), f.logs(id))
	}
	if vm := f.attemptVM(t, id); vm.Spare != api.SpareMiss {
		t.Fatalf("the attempt after a frozen spare: %+v, want a spare miss", vm)
	}

	// Died: the next spare's `tart run` is killed; another replaces it.
	a.waitLog(t, "warm spare ready", 2, 60*time.Second)
	var run []int
	for _, e := range faketarttest.ReadLog(t, tartLog) {
		if e.Event == "boot" && strings.Contains(strings.Join(e.Argv, " "), "-spare-2") {
			run = append(run, e.PID)
		}
	}
	if len(run) != 1 {
		t.Fatalf("boot records of the second spare: %v", run)
	}
	syscall.Kill(run[0], syscall.SIGKILL)
	a.waitLog(t, "warm spare removed: the spare VM stopped", 1, 30*time.Second)
	a.waitLog(t, "warm spare ready", 3, 60*time.Second)

	// Killed with a spare: the next start (spares off) sweeps it.
	a.cmd.Process.Signal(syscall.SIGKILL)
	<-a.done
	a.done <- nil
	b2 := f.startAgent()
	f.noBuildVMs()
	b2.stop(t)

	// The template goes while a spare waits.
	a3, _ := spareAgent(t, f, "FAKETART_LOG="+tartLog)
	a3.waitLog(t, "warm spare ready", 1, 60*time.Second)
	if r := faketarttest.Run(t, f.tart, faketarttest.Env(f.tartHome), "delete", "macos-expo"); r.Code != 0 {
		t.Fatalf("delete the template: %+v", r)
	}
	a3.waitLog(t, "warm spare removed: the VM template", 1, 30*time.Second)
	f.waitSpare(t, "the failed spare", 30*time.Second, func(sp *api.WorkerSpare) bool {
		return sp != nil && sp.State == api.SpareFailed && strings.Contains(sp.Reason, "macos-expo")
	})
	clones := func() int {
		n := 0
		for _, e := range faketarttest.ReadLog(t, tartLog) {
			if e.Cmd == "clone" {
				n++
			}
		}
		return n
	}
	before := clones()
	time.Sleep(2 * time.Second) // ten of the keeper's host checks
	if n := clones(); n != before {
		t.Fatalf("the worker cloned %d more times after its template was deleted", n-before)
	}
	f.noBuildVMs()
	a3.stop(t)
}
