package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/internal/boundedfile"
	"github.com/freeagent-build/freeagent/internal/buildphase"
	"github.com/freeagent-build/freeagent/internal/vmshare"
)

// Why a build stopped early; the cause of its context.
var (
	errCancelRequested = errors.New("cancelled by the developer")
	errLeaseLost       = errors.New("the controller gave the build to another worker")
	errTimedOut        = errors.New("the build exceeded its timeout")
	errHandedBack      = errors.New("the worker is stopping; build handed back")
)

// build supervises one build attempt.
type build struct {
	a   *Agent
	job *api.Job
	log logrus.FieldLogger

	mu       sync.Mutex
	phase    string
	progress int
	started  time.Time
	ranVM    bool                    // its VM started (and so held one of the host's VM slots)
	warm     bool                    // it runs on a warm spare
	vmSlot   bool                    // it holds, or is getting, one of the host's VM slots
	vm       *api.AttemptVM          // its VM, once ready: every heartbeat reports it
	stop     context.CancelCauseFunc // stops the build (StopBuilds); nil until it runs
	beat     chan struct{}           // sends a heartbeat now (the VM is ready)
}

// outcome is what the worker reports.
type outcome struct {
	success   bool
	saved     []vmshare.SavedCache // the caches a successful build saved
	message   string
	code      string
	retryable bool
	reported  bool // already sent (a success is reported before the VM is torn down)
}

func (a *Agent) startBuild(ctx context.Context, job *api.Job) *build {
	b := &build{a: a, job: job, started: time.Now(), phase: "starting", beat: make(chan struct{}, 1),
		log: a.log.WithFields(logrus.Fields{"build": job.ID, "attempt": job.AttemptID})}
	a.mu.Lock()
	a.running[job.ID] = b
	a.mu.Unlock()
	a.kickSpare()
	b.log.WithField("platform", job.Platform).Info("build received")
	return b
}

func (b *build) snapshot() BuildStatus {
	b.mu.Lock()
	defer b.mu.Unlock()
	return BuildStatus{ID: b.job.ID, Platform: b.job.Platform, Phase: b.phase, Progress: b.progress, StartedAt: b.started}
}

// acknowledge sends the first heartbeat, which tells the controller the job
// arrived (until then it would hand the job out again).
func (b *build) acknowledge(ctx context.Context) error {
	var err error
	for i := 0; i < 3; i++ {
		if _, err = b.heartbeat(ctx); err == nil || api.StatusOf(err) == http.StatusConflict {
			return err
		}
		if !sleepCtx(ctx, time.Duration(i+1)*time.Second, nil) {
			return ctx.Err()
		}
	}
	return err
}

func (b *build) heartbeat(ctx context.Context) (api.HeartbeatResponse, error) {
	b.mu.Lock()
	progress := b.progress
	req := api.HeartbeatRequest{BuildID: b.job.ID, AttemptID: b.job.AttemptID, LeaseToken: b.job.LeaseToken, Phase: b.phase, Progress: &progress, VM: b.vm}
	b.mu.Unlock()
	b.a.mu.Lock()
	every := b.a.heartbeat
	b.a.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, 2*every)
	defer cancel()
	resp, err := b.a.client.Heartbeat(ctx, b.a.tokens.get(), req)
	if err == nil {
		b.a.tokens.keep(resp.TokenGrant)
	}
	return resp, err
}

// run executes the build and reports its outcome. The lease is renewed
// until the report is done.
func (b *build) run(ctx context.Context) {
	buildCtx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	b.mu.Lock()
	b.stop = stop
	b.mu.Unlock()
	hbCtx, stopHeartbeats := context.WithCancel(ctx)
	hbDone := make(chan struct{})
	go func() {
		defer close(hbDone)
		b.heartbeats(hbCtx, stop)
	}()
	cwDone := make(chan struct{})
	go func() {
		defer close(cwDone)
		b.watchCancel(hbCtx, stop)
	}()
	defer func() {
		stopHeartbeats()
		<-hbDone
		<-cwDone
	}()
	timer := time.AfterFunc(b.timeout(), func() { stop(errTimedOut) })
	defer timer.Stop()
	go func() {
		select {
		case <-b.a.cancelBuild:
			stop(errHandedBack)
		case <-buildCtx.Done():
		}
	}()

	out := b.execute(buildCtx)
	if out.reported {
		// A heartbeat during the teardown meets the finished build (409): no lease is lost.
		return
	}
	if errors.Is(context.Cause(buildCtx), errLeaseLost) {
		b.log.Warn("lease lost: the environment was stopped and nothing is reported")
		return
	}
	if ctx.Err() != nil { // the agent itself is going away without a drain
		out = outcome{code: api.CodeReleased, message: "the worker stopped"}
	}
	b.report(ctx, out)
}

// heartbeats renews the lease until ctx ends, stopping the build when the
// controller asks for a cancel or says the lease is gone. A ready VM is
// told at once, not at the next interval.
//
// A heartbeat still unanswered when the next is due does not hold that one
// back: the next goes out on another connection. The connection under the
// first may have died without either end hearing of it (a Mac that slept
// or changed networks, a NAT that forgot it), and waiting for it would let
// the lease expire.
func (b *build) heartbeats(ctx context.Context, stop context.CancelCauseFunc) {
	var inFlight sync.WaitGroup
	defer inFlight.Wait()
	unanswered := make(chan struct{}, maxUnansweredHeartbeats) // one per heartbeat awaiting its answer
	leaseLost := make(chan struct{})
	var lostOnce sync.Once
	for {
		b.a.mu.Lock()
		every := b.a.heartbeat
		b.a.mu.Unlock()
		t := time.NewTimer(every)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-leaseLost:
			t.Stop()
			return
		case <-b.beat:
			t.Stop()
		case <-t.C:
		}
		select {
		case unanswered <- struct{}{}:
		default:
			continue // as many await their answers as may
		}
		inFlight.Add(1)
		go func() {
			defer inFlight.Done()
			defer func() { <-unanswered }()
			resp, err := b.heartbeat(ctx)
			switch {
			case err == nil && resp.CancelRequested:
				b.log.Info("cancel requested by the controller")
				stop(errCancelRequested)
			case api.StatusOf(err) == http.StatusConflict:
				stop(errLeaseLost)
				lostOnce.Do(func() { close(leaseLost) })
			case err != nil && ctx.Err() == nil:
				b.log.WithError(err).Warn("heartbeat failed; retrying at the next interval")
			}
		}()
	}
}

// maxUnansweredHeartbeats bounds the heartbeats of one build waiting for
// their answers; each is given up after two intervals (heartbeat), when the
// lease it would have renewed has one interval left.
const maxUnansweredHeartbeats = 2

// watchCancel keeps a long poll open at the controller that answers as soon
// as a cancel of this build is requested, and then stops the build: a
// cancel takes effect within moments, not at the next heartbeat. Against a
// controller without the endpoint (404) it leaves the cancel to the
// heartbeats; on other failures it tries again after a pause.
func (b *build) watchCancel(ctx context.Context, stop context.CancelCauseFunc) {
	bo := b.a.cfg.quickBackoff().Sequence()
	for ctx.Err() == nil {
		wctx, cancel := context.WithTimeout(ctx, b.a.cfg.PollWait+b.a.cfg.AnswerGrace)
		resp, err := b.a.client.WatchCancel(wctx, b.a.tokens.get(), b.job.ID, b.a.cfg.PollWait)
		cancel()
		switch {
		case err == nil && resp.CancelRequested:
			b.a.tokens.keep(resp.TokenGrant)
			b.log.Info("cancel requested by the controller")
			stop(errCancelRequested)
			return
		case err == nil && resp.Status.Terminal():
			return // the heartbeats learn how it ended
		case err == nil:
			b.a.tokens.keep(resp.TokenGrant)
			bo.Reset()
			continue
		case ctx.Err() != nil:
			return
		case api.StatusOf(err) == http.StatusNotFound:
			// An older controller, or the build is no longer this worker's.
			b.log.WithError(err).Info("no cancel watch; cancels arrive with the heartbeats")
			return
		}
		b.log.WithError(err).Debug("cancel watch failed; retrying")
		if !sleepCtx(ctx, bo.After(err), nil) {
			return
		}
	}
}

// execute runs the build on the warm spare when there is one, else (or
// when the spare does not answer) on a fresh VM. The environment is always
// destroyed.
func (b *build) execute(ctx context.Context) outcome {
	if len(b.job.Caches) > 0 {
		defer b.a.reportCache(ctx)
	}
	if sp := b.a.takeSpare(b); sp != nil {
		out, ran := b.onSpare(ctx, sp)
		if ran || ctx.Err() != nil {
			b.a.countSpare(ran)
			return out
		}
	}
	b.a.countSpare(false)
	return b.onFreshVM(ctx)
}

// onFreshVM prepares a shared directory, clones and boots a VM for the
// build and runs it there.
func (b *build) onFreshVM(ctx context.Context) outcome {
	dir, err := os.MkdirTemp(b.a.cfg.WorkDir, "build-"+b.job.ID+"-")
	if err != nil {
		return outcome{retryable: true, code: "worker_disk", message: fmt.Sprintf("create the build's shared directory: %v", err)}
	}
	defer os.RemoveAll(dir)
	cacheDir := dir + "-caches"
	defer os.RemoveAll(cacheDir)
	mounted := b.stageCaches(cacheDir)
	if err := b.writeSharedDir(dir, mounted); err != nil {
		return outcome{retryable: true, code: "worker_disk", message: err.Error()}
	}
	b.setPhase("booting", 0)
	b.holdVMSlot()
	b.a.kickSpare() // a spare may have to make room
	name := "fa-" + b.job.ID + "-" + b.job.AttemptID
	res := b.a.cfg.Resources
	if len(mounted) > 0 {
		res.CacheDir = cacheDir
	}
	inst, err := b.a.driver.Start(ctx, name, dir, res)
	if err != nil {
		if ctx.Err() != nil { // stopped while starting: the cause decides
			return b.interrupted(ctx)
		}
		var se *StartError
		if errors.As(err, &se) && se.Code == CodeVMLimit {
			return b.hostFull(err)
		}
		if errors.As(err, &se) {
			return outcome{retryable: se.Retryable, code: se.Code, message: se.Error()}
		}
		return outcome{retryable: true, code: "vm_start_failed", message: err.Error()}
	}
	out, _ := b.runIn(ctx, dir, inst, 0)
	return out
}

// holdVMSlot marks the build as holding (or getting) a VM slot, until it
// ends: the warm spare keeper counts it.
func (b *build) holdVMSlot() {
	b.mu.Lock()
	b.vmSlot = true
	b.mu.Unlock()
}

// onSpare runs the build on the warm spare sp: it resumes a suspended one,
// gives it the build's caches and files, and waits, up to
// SpareAnswerTimeout, for its bootstrap's first sign. ran is false when
// the spare was dead or did not answer: it is destroyed, nothing was
// reported, and the build goes to a fresh VM without losing an attempt.
func (b *build) onSpare(ctx context.Context, sp *spare) (out outcome, ran bool) {
	defer removeSpareDirs(sp)
	log := b.log.WithField("vm", sp.name)
	fallBack := func(why string, err error) (outcome, bool) {
		log.WithError(err).Warn("the warm spare is unusable (" + why + "); booting a fresh VM for the build")
		destroySpare(ctx, b.log, sp)
		return outcome{}, false
	}
	if sp.inst == nil {
		return fallBack("it did not start", nil)
	}
	b.setPhase("booting", 0)
	if sp.suspended {
		if err := sp.inst.(Suspender).Resume(ctx); err != nil {
			return fallBack("it did not resume", err)
		}
	}
	select {
	case <-sp.inst.Exited():
		return fallBack("its VM stopped", sp.inst.Err())
	default:
	}
	b.mu.Lock()
	b.warm = true
	b.mu.Unlock()
	mounted := b.stageCaches(sp.cacheDir)
	if err := b.writeSharedDir(sp.dir, mounted); err != nil {
		destroySpare(ctx, b.log, sp)
		return outcome{retryable: true, code: "worker_disk", message: err.Error()}, true
	}
	log.Info("the build's files are in the warm spare's shared folder")
	// A spare still booting has the rest of its boot on top: it is never
	// slower than the fresh VM that would replace it.
	within := b.a.cfg.SpareAnswerTimeout
	if !sp.ready {
		within += max(0, b.a.cfg.BootTimeout-time.Since(sp.started))
	}
	out, answered := b.runIn(ctx, sp.dir, sp.inst, within)
	if !answered && ctx.Err() == nil {
		b.mu.Lock()
		b.warm = false
		b.mu.Unlock()
		log.WithField("within", within.Round(time.Second)).Warn("the warm spare's bootstrap did not answer; it was destroyed and the build boots a fresh VM")
		return outcome{}, false
	}
	return out, true
}

// runIn runs the build in the started environment inst, whose shared
// folder is dir: it watches it, reports a success before tearing it down,
// destroys it, then keeps the caches the build saved. With answerWithin
// set, an environment that gives no sign (progress, vm-ready, an end) in
// that time is destroyed with nothing reported, and answered is false.
func (b *build) runIn(ctx context.Context, dir string, inst Instance, answerWithin time.Duration) (out outcome, answered bool) {
	b.mu.Lock()
	b.ranVM = true
	b.mu.Unlock()
	out, answered = b.watch(ctx, dir, inst, answerWithin)
	if out.success {
		// The artifacts are uploaded: tell the developer now, and tear the
		// VM down after (a crash in between leaves an fa-* VM that the next
		// start removes).
		b.report(ctx, out)
		out.reported = true
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	if err := inst.Destroy(dctx); err != nil {
		b.log.WithError(err).Error("could not destroy the build environment")
	}
	if !answered {
		b.mu.Lock()
		b.ranVM = false
		b.mu.Unlock()
		return out, false
	}
	if out.success {
		b.keepCaches(dir, out.saved)
	}
	return out, true
}

// Modes of the shared folder and of what the agent puts in it. The guest's
// user need not have the host user's uid: Virtualization.framework does the
// host side of every access as the user running `tart run` and ignores the
// guest's chown, while the guest's kernel checks the mode bits against the
// guest user. So the folder must be usable by "others": writable (the guest
// creates and renames its signal files in it) and its files readable. The
// folder lives in WorkDir, which is 0700, so no other user of the host can
// reach it. See agent/README.md, "The shared folder".
const (
	sharedDirMode  os.FileMode = 0o777
	sharedFileMode os.FileMode = 0o644
	sharedExecMode os.FileMode = 0o755
)

// writeSharedDir puts the bootstrap, then the build's config, into the
// shared folder, each renamed into place whole: a warm spare's launcher,
// already polling the folder, must see the binary before the config (a
// config alone runs the image's copy) and never half of either.
func (b *build) writeSharedDir(dir string, caches []vmshare.CacheMount) error {
	// os.MkdirTemp made it 0700; chmod is not subject to the umask.
	if err := os.Chmod(dir, sharedDirMode); err != nil {
		return fmt.Errorf("open the shared folder to the VM's user: %w", err)
	}
	if b.a.cfg.BootstrapBinary != "" {
		// The VM runs the bootstrap of the agent's own version, so the two never drift apart.
		tmp := filepath.Join(dir, ".freeagent-vm.tmp")
		if err := copyFile(b.a.cfg.BootstrapBinary, tmp, sharedExecMode); err != nil {
			return err
		}
		if err := os.Rename(tmp, filepath.Join(dir, "freeagent-vm")); err != nil {
			return fmt.Errorf("copy the bootstrap binary: %w", err)
		}
	}
	b.mu.Lock()
	warm := b.warm
	b.mu.Unlock()
	cfg := vmshare.BuildConfig{BuildID: b.job.ID, AttemptID: b.job.AttemptID, ControllerURL: b.a.cfg.GuestControllerURL,
		OTP: b.job.OTP, Platform: b.job.Platform, Profile: b.job.Profile, Caches: caches,
		VM: &vmshare.VMInfo{WarmSpare: warm, ClaimedAt: b.started}}
	data, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, "."+vmshare.BuildConfigFile+".tmp")
	if err := os.WriteFile(tmp, data, sharedFileMode); err != nil {
		return fmt.Errorf("write %s: %w", vmshare.BuildConfigFile, err)
	}
	if err := os.Chmod(tmp, sharedFileMode); err != nil {
		return fmt.Errorf("write %s: %w", vmshare.BuildConfigFile, err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, vmshare.BuildConfigFile)); err != nil {
		return fmt.Errorf("write %s: %w", vmshare.BuildConfigFile, err)
	}
	return nil
}

// watch waits for vm-ready (within the boot timeout), then for
// build-complete or build-error, while watching the environment's process.
// With answerWithin set, answered is false when the bootstrap gave no
// sign (progress, vm-ready, an end) within it, or the environment ended
// before one: the caller then reports nothing.
func (b *build) watch(ctx context.Context, dir string, inst Instance, answerWithin time.Duration) (out outcome, answered bool) {
	tick := time.NewTicker(b.a.cfg.FileWatchInterval)
	defer tick.Stop()
	boot := time.NewTimer(b.a.cfg.BootTimeout)
	defer boot.Stop()
	var answer <-chan time.Time // nil: no bound
	if answerWithin > 0 {
		t := time.NewTimer(answerWithin)
		defer t.Stop()
		answer = t.C
	} else {
		answered = true
	}
	ready := false
	var lastProgress time.Time
	for {
		if out, ended := b.ended(dir); ended {
			return out, true
		}
		if !ready && isSignalled(dir, vmshare.ReadyFile) {
			ready, answered, answer = true, true, nil
			boot.Stop()
			b.a.vmStarted()
			b.vmReady()
		}
		var p vmshare.Progress
		if readVMFile(dir, vmshare.ProgressFile, maxProgressBytes, &p) == nil && p.UpdatedAt.After(lastProgress) {
			lastProgress = p.UpdatedAt
			answered, answer = true, nil
			b.setPhase(p.Phase, p.Progress)
		}
		select {
		case <-ctx.Done():
			return b.interrupted(ctx), answered
		case <-inst.Exited():
			// A last look: the bootstrap may have signalled just before power-off.
			if out, ended := b.ended(dir); ended {
				return out, true
			}
			err := inst.Err()
			var se *StartError
			if errors.As(err, &se) && se.Code == CodeVMLimit {
				return b.hostFull(err), answered
			}
			return outcome{retryable: true, code: "vm_exited", message: fmt.Sprintf("the build environment stopped before the build finished: %v", err)}, answered
		case <-boot.C:
			return outcome{retryable: true, code: "vm_boot_timeout",
				message: fmt.Sprintf("the build environment did not signal ready within %s", b.a.cfg.BootTimeout)}, answered
		case <-answer:
			return outcome{}, false
		case <-tick.C:
		}
	}
}

// vmReady notes how long the VM phase took (from the claim to vm-ready)
// and on what VM, in the log and, at once, to the controller.
func (b *build) vmReady() {
	took := time.Since(b.started).Round(time.Millisecond)
	vm := &api.AttemptVM{PhaseSeconds: took.Seconds()}
	if _, ok := b.a.spareDriver(); ok {
		vm.Spare = api.SpareMiss
	}
	b.mu.Lock()
	warm := b.warm
	if warm {
		vm.Spare = api.SpareHit
	}
	b.vm = vm
	b.mu.Unlock()
	kind := "a fresh VM"
	if warm {
		kind = "a warm spare"
	}
	b.log.WithFields(logrus.Fields{"warm_spare": warm, "vm_phase": took}).Info("environment ready: " + kind)
	select {
	case b.beat <- struct{}{}:
	default:
	}
}

// hostFull is the outcome of a VM the host refused (macOS's limit of two
// running VMs, counting other apps' and users' VMs): not the build's fault,
// so the build goes back to the queue without consuming an attempt, and the
// agent takes no new build for a while.
func (b *build) hostFull(err error) outcome {
	b.mu.Lock()
	b.ranVM = false
	b.mu.Unlock()
	wait := b.a.vmLimitHit()
	b.log.WithError(err).WithField("retry_in", wait.Round(time.Millisecond)).
		Warn("macOS refused another VM (two may run at a time, other apps' included); the build is handed back")
	return outcome{code: api.CodeReleased, message: fmt.Sprintf("%s: the Mac refused another VM (macOS runs two at a time): %v; "+
		"handed back without consuming an attempt", CodeVMLimit, err)}
}

// timeout is the build's own timeout, capped by the worker's MaxBuildTimeout.
func (b *build) timeout() time.Duration {
	t := time.Duration(b.job.BuildTimeoutSeconds) * time.Second
	if t <= 0 {
		t = 30 * time.Minute
	}
	if m := b.a.cfg.MaxBuildTimeout; m > 0 && t > m {
		t = m
	}
	return t
}

// interrupted turns the cause of a stopped build into its outcome.
func (b *build) interrupted(ctx context.Context) outcome {
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, errCancelRequested):
		return outcome{code: api.CodeCancelled, message: "cancelled; the build environment was stopped"}
	case errors.Is(cause, errTimedOut):
		return outcome{code: api.CodeTimeout, message: fmt.Sprintf("the build exceeded its timeout of %d seconds and was stopped", int(b.timeout().Seconds()))}
	case errors.Is(cause, errLeaseLost):
		return outcome{code: api.CodeLeaseLost, message: cause.Error()}
	default:
		return outcome{code: api.CodeReleased, message: "the worker stopped; build handed back"}
	}
}

// report sends the outcome, retrying transient failures for a while.
func (b *build) report(ctx context.Context, out outcome) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Minute)
	defer cancel()
	if !out.success {
		b.log.WithFields(logrus.Fields{"code": out.code, "retryable": out.retryable}).Warn("build did not succeed: " + firstLine(out.message))
	}
	var resp api.ResultResponse
	err := api.Retry(ctx, api.RetryPolicy{Backoff: b.a.cfg.quickBackoff(),
		// A refused worker token is retried with the one held then: a heartbeat's answer may have replaced it.
		Retryable: func(err error) bool { return api.Transient(err) || api.StatusOf(err) == http.StatusUnauthorized },
		OnRetry: func(err error, _ int, _ time.Duration) {
			b.log.WithError(err).Warn("reporting the result failed; retrying")
		}}, func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, b.a.cfg.AnswerGrace)
		defer cancel()
		var err error
		resp, err = b.a.client.Upload(ctx, b.a.tokens.get(), api.Result{BuildID: b.job.ID, AttemptID: b.job.AttemptID,
			LeaseToken: b.job.LeaseToken, Success: out.success, ErrorMessage: out.message, ErrorCode: out.code, Retryable: out.retryable})
		return err
	})
	switch {
	case err == nil:
		b.log.WithFields(logrus.Fields{"status": resp.Status, "requeued": resp.Requeued}).Info("result reported")
	case ctx.Err() != nil:
		b.log.WithError(err).Error("gave up reporting the result; the controller will requeue the build when its lease expires")
	default:
		b.log.WithError(err).Warn("the controller refused the result")
	}
}

func (b *build) setPhase(phase string, progress int) {
	b.mu.Lock()
	b.phase, b.progress = phase, progress
	b.mu.Unlock()
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// ended reads the bootstrap's last word: build-error or build-complete.
// A signal file that exists but cannot be read (a symbolic link, a FIFO, a
// file too large or not JSON) ends the build as failed: the bootstrap
// writes each atomically, so only the build's own code can have put it
// there.
func (b *build) ended(dir string) (outcome, bool) {
	var be vmshare.BuildError
	switch err := readVMFile(dir, vmshare.BuildErrorFile, maxSignalBytes, &be); {
	case err == nil:
		code := be.Code
		if code == "" {
			code = api.CodeBuildFailed
		}
		msg := be.Message
		if be.LogTail != "" {
			msg += buildphase.TailSeparator + be.LogTail
		}
		b.log.WithFields(logrus.Fields{"code": code, "retryable": be.Retryable}).Warn("build failed: " + be.Message)
		return outcome{code: code, message: msg, retryable: be.Retryable}, true
	case !errors.Is(err, fs.ErrNotExist):
		return b.badSignal(err), true
	}
	var done vmshare.Complete
	switch err := readVMFile(dir, vmshare.BuildCompleteFile, maxSignalBytes, &done); {
	case err == nil:
		b.log.WithField("artifacts", len(done.Artifacts)).Info("build completed")
		return outcome{success: true, saved: done.Caches}, true
	case !errors.Is(err, fs.ErrNotExist):
		return b.badSignal(err), true
	}
	return outcome{}, false
}

func (b *build) badSignal(err error) outcome {
	b.log.WithError(err).Warn("the build left an unreadable signal file in the shared folder")
	return outcome{code: api.CodeBuildFailed, message: fmt.Sprintf("the build's signal file is unusable (the build's code may have replaced it): %v", err)}
}

// Limits on what the agent reads from the shared folder, which the VM (and
// so the build's code) can write: a progress report is a few hundred bytes,
// a signal file carries at most an artifact list or a log tail.
const (
	maxProgressBytes = 64 << 10
	maxSignalBytes   = 1 << 20
)

// readVMFile decodes the JSON file name of the shared folder, bounded,
// without following a symbolic link and refusing anything but a regular
// file (see boundedfile). A missing file is fs.ErrNotExist.
func readVMFile(dir, name string, limit int64, v any) error {
	data, err := boundedfile.ReadNoFollow(filepath.Join(dir, name), limit)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// isSignalled reports whether the VM created the regular file name in the
// shared folder (its content does not matter; a link does not count).
func isSignalled(dir, name string) bool {
	st, err := os.Lstat(filepath.Join(dir, name))
	return err == nil && st.Mode().IsRegular()
}

func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("copy the bootstrap binary: %w", err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return fmt.Errorf("copy the bootstrap binary: %w", err)
	}
	_, err = io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(dst, mode) // OpenFile's mode went through the umask
	}
	if err != nil {
		return fmt.Errorf("copy the bootstrap binary: %w", err)
	}
	return nil
}
