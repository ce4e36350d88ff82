// Package tart drives Tart (https://tart.run) through its command line: one
// fresh VM per build, cloned from a template, destroyed afterwards.
package tart

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/freeagent-build/freeagent/agent"
)

// VMPrefix marks the VMs this agent owns; it never touches any other VM.
const VMPrefix = "fa-"

// Error is a failed tart command, classified as Tart reports it: exit 2 for
// a missing VM or one in the wrong state, 1 for operational failures, 64
// for a usage error (a bug on our side).
type Error struct {
	Args     []string
	ExitCode int
	Line     string // first non-empty line of stderr, else stdout
}

func (e *Error) Error() string {
	return fmt.Sprintf("tart %s: exit %d: %s", strings.Join(e.Args, " "), e.ExitCode, e.Line)
}

// WrongState reports a missing VM, or one not running / already running.
func (e *Error) WrongState() bool { return e.ExitCode == 2 }

// ErrNotInstalled means the tart binary was not found.
var ErrNotInstalled = errors.New("tart is not installed (brew install cirruslabs/cli/tart), or set --tart to its path")

// Driver is the agent.Driver for Tart.
type Driver struct {
	Tart     string // path or name of the tart binary
	Template string // local VM or OCI image the build VMs are cloned from
	LogDir   string // `tart run` output of each VM
	Env      []string
	Log      logrus.FieldLogger
	// Network is the VMs' network: NetworkSoftnet (also ""), or
	// NetworkShared, Tart's default (see network.go).
	Network string
	// Softnet is the softnet binary (a path, or a name looked up on PATH;
	// "" is "softnet"), put first on `tart run`'s PATH.
	Softnet string
	// SoftnetAllow are IPv4 CIDRs a softnet VM may reach beyond Softnet's
	// defaults (`--net-softnet-allow`): the controller, a LAN registry.
	SoftnetAllow []string
	// AutoPrune lets Tart delete OCI-cache images and IPSWs to make room
	// when it clones or pulls (its "automatic pruning"), the template's own
	// base image among them. Off by default: every tart command then runs
	// with TART_NO_AUTO_PRUNE set.
	AutoPrune bool

	mu    sync.Mutex
	owned map[string]bool // VMs started by this process
	self  *owner          // this process's claim on its VMs (owner.go)
}

// Name implements agent.Driver.
func (d *Driver) Name() string { return "tart" }

// run executes one tart command and returns its stdout.
func (d *Driver) run(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, d.Tart, args...)
	cmd.Env = d.env()
	// Interrupt rather than kill on cancel, so tart cleans up its temp dir.
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 10 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if notInstalled(err) {
		return nil, ErrNotInstalled
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		line := firstLine(stderr.String())
		if line == "" {
			line = firstLine(stdout.String())
		}
		return stdout.Bytes(), &Error{Args: args, ExitCode: exit.ExitCode(), Line: line}
	}
	if err != nil {
		return nil, fmt.Errorf("tart %s: %w", strings.Join(args, " "), err)
	}
	return stdout.Bytes(), nil
}

// noAutoPrune is what turns Tart's automatic pruning off: the variable's
// presence, whatever its value (Prune.reclaimIfNeeded).
const noAutoPrune = "TART_NO_AUTO_PRUNE"

// env is the environment of every tart command: this process's, then
// d.Env, then the pruning choice, which overrides both.
func (d *Driver) env() []string {
	var env []string
	for _, kv := range append(os.Environ(), d.Env...) {
		if !strings.HasPrefix(kv, noAutoPrune+"=") {
			env = append(env, kv)
		}
	}
	if !d.AutoPrune {
		env = append(env, noAutoPrune+"=1")
	}
	return env
}

// notInstalled: no tart on PATH, or none at the configured path.
func notInstalled(err error) bool {
	var pe *os.PathError
	return errors.Is(err, exec.ErrNotFound) || (errors.As(err, &pe) && errors.Is(pe.Err, os.ErrNotExist))
}

// lastLine is the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(s, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" {
			return l
		}
	}
	return ""
}

func firstLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			return l
		}
	}
	return ""
}

// VM is one entry of `tart list --format json`.
type VM struct {
	Name    string `json:"Name"`
	Source  string `json:"Source"`
	State   string `json:"State"`
	Running bool   `json:"Running"`
}

// List returns the local VMs.
func (d *Driver) List(ctx context.Context) ([]VM, error) {
	return d.list(ctx, "--source", "local")
}

// list is `tart list --format json` with args.
func (d *Driver) list(ctx context.Context, args ...string) ([]VM, error) {
	out, err := d.run(ctx, append([]string{"list", "--format", "json"}, args...)...)
	if err != nil {
		return nil, err
	}
	var vms []VM
	if err := json.Unmarshal(out, &vms); err != nil {
		return nil, fmt.Errorf("tart list: undecodable output: %w", err)
	}
	return vms, nil
}

// Cleanup implements agent.Driver: it stops and deletes the VMs whose
// owning agent process is gone (a crash mid-build), and nothing else: not
// the VMs of another live agent on this Mac, not VMs it did not name.
func (d *Driver) Cleanup(ctx context.Context) error {
	self, err := d.instance()
	if err != nil {
		return err
	}
	dir, err := d.ownersDir()
	if err != nil {
		return err
	}
	vms, err := d.List(ctx)
	if err != nil {
		return err
	}
	var errs []error
	dead := map[string]bool{} // instance id → its owner is gone (and we hold its lock)
	for _, vm := range vms {
		if d.isOwned(vm.Name) {
			continue
		}
		if m := ownerVM.FindStringSubmatch(vm.Name); m != nil && m[1] != self {
			isDead, seen := dead[m[1]]
			if !seen {
				var release func()
				isDead, release, err = deadOwner(dir, m[1])
				if err != nil {
					errs = append(errs, err)
				}
				if isDead {
					defer release()
				}
				dead[m[1]] = isDead
			}
			if !isDead {
				continue // another agent's live VM
			}
		} else if m == nil && !legacyVM.MatchString(vm.Name) {
			continue // not a name an agent gives its VMs
		}
		d.Log.WithField("vm", vm.Name).Warn("removing a VM whose agent is gone")
		if err := d.destroy(ctx, vm.Name); err != nil {
			errs = append(errs, err)
		}
	}
	// An agent that left no VM behind still left its lock file: remove
	// the dead ones' so they do not pile up, one per start of an agent.
	locks, _ := filepath.Glob(filepath.Join(dir, "*.lock"))
	for _, l := range locks {
		id := strings.TrimSuffix(filepath.Base(l), ".lock")
		if _, seen := dead[id]; seen || id == self {
			continue
		}
		isDead, release, err := deadOwner(dir, id)
		if err != nil {
			errs = append(errs, err)
		} else if isDead {
			release()
		}
	}
	return errors.Join(errs...)
}

func (d *Driver) isOwned(name string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.owned[name]
}

func (d *Driver) setOwned(name string, owned bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.owned == nil {
		d.owned = map[string]bool{}
	}
	if owned {
		d.owned[name] = true
	} else {
		delete(d.owned, name)
	}
}

// EnsureTemplate makes sure the template is on this Mac: a local VM, or a
// remote image already in Tart's OCI cache. A remote image is pulled only
// when it is absent: pulling contacts the registry every time (an outage
// would fail every build) and follows a moved tag (tens of GB mid-build).
// PullTemplate refreshes it when the owner asks.
func (d *Driver) EnsureTemplate(ctx context.Context) error {
	present, err := d.TemplatePresent(ctx)
	if err != nil {
		return err
	}
	if present {
		return nil
	}
	if !IsRemote(d.Template) {
		return &agent.StartError{Retryable: true, Code: "template_missing",
			Err: fmt.Errorf("the VM template %q does not exist: build it with scripts/build-vm-template.sh or set --template to an image", d.Template)}
	}
	return d.PullTemplate(ctx)
}

// TemplatePresent reports whether the template is on this Mac. `tart list`
// shows local VMs with Source "local" and pulled images with Source "OCI"
// (named host/namespace:tag, or @sha256:… for digests), so both are read.
func (d *Driver) TemplatePresent(ctx context.Context) (bool, error) {
	vms, err := d.list(ctx)
	if err != nil {
		return false, err
	}
	remote := IsRemote(d.Template)
	want := d.Template
	if remote {
		want = fullRemoteName(d.Template)
	}
	for _, vm := range vms {
		// Older Tart releases printed the source as "oci".
		if remote == strings.EqualFold(vm.Source, "OCI") && vm.Name == want {
			return true, nil
		}
	}
	return false, nil
}

// IsRemote reports whether a template name is an OCI image: Tart treats a
// name with a registry host (host/namespace…) as one; local VM names
// cannot contain "/".
func IsRemote(name string) bool { return strings.Contains(name, "/") }

// fullRemoteName is name as `tart list` shows it: Tart adds the tag
// "latest" to a reference with neither a tag nor a digest.
func fullRemoteName(name string) string {
	if strings.Contains(name, "@") || strings.LastIndex(name, ":") > strings.LastIndex(name, "/") {
		return name
	}
	return name + ":latest"
}

// PullTemplate pulls the remote template (again), with Tart's progress in
// the log: what the owner asks for to follow a moved tag. A local template
// has nothing to pull.
func (d *Driver) PullTemplate(ctx context.Context) error {
	if !IsRemote(d.Template) {
		return nil
	}
	// Pulled here rather than implicitly by clone, so the progress reaches the log.
	d.Log.WithField("image", d.Template).Info("pulling the VM template (this can take a while)")
	cmd := exec.CommandContext(ctx, d.Tart, "pull", d.Template)
	cmd.Env = append(d.env(), "CI=1") // line-oriented progress
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		if notInstalled(err) {
			return ErrNotInstalled
		}
		return err
	}
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" {
			d.Log.WithField("image", d.Template).Info(line)
		}
	}
	if err := cmd.Wait(); err != nil {
		return &agent.StartError{Retryable: true, Code: "template_pull_failed",
			Err: fmt.Errorf("tart pull %s: %v: %s", d.Template, err, firstLine(stderr.String()))}
	}
	return nil
}

// clone clones the template as name. Tart creates a clone's temporary
// directory and only then locks it (VMDirectory.temporary, then
// FileLock), and every other tart command first removes the unlocked
// entries of $TART_HOME/tmp: one run by this agent for another build can
// remove the directory in between. Such a clone fails naming that
// directory, and cloning again succeeds.
func (d *Driver) clone(ctx context.Context, name string) error {
	home, err := d.tartHome()
	if err != nil {
		return err
	}
	tmp := filepath.Join(home, "tmp") + string(filepath.Separator)
	for attempt := 1; ; attempt++ {
		_, err := d.run(ctx, "clone", d.Template, name)
		var te *Error
		if err == nil || attempt == 3 || !errors.As(err, &te) || !strings.Contains(te.Line, tmp) {
			return err
		}
		d.Log.WithError(err).Warn("another tart command removed the clone's temporary directory; cloning again")
	}
}

// Start implements agent.Driver: clone, size, and boot a VM with sharedDir
// mounted as "build-config". The VM is named fa-<instance>-<rest of name>,
// owned by this process (owner.go).
func (d *Driver) Start(ctx context.Context, name, sharedDir string, res agent.Resources) (agent.Instance, error) {
	if !strings.HasPrefix(name, VMPrefix) {
		return nil, fmt.Errorf("VM name %q lacks the %q prefix", name, VMPrefix)
	}
	self, err := d.instance()
	if err != nil {
		return nil, &agent.StartError{Retryable: true, Code: "worker_disk", Err: err}
	}
	name = vmName(self, name)
	if err := d.EnsureTemplate(ctx); err != nil {
		return nil, classify(err)
	}
	runEnv, err := d.runEnv()
	if err != nil {
		return nil, &agent.StartError{Retryable: true, Code: "softnet_missing", Err: err}
	}
	d.setOwned(name, true)
	if err := d.clone(ctx, name); err != nil {
		d.setOwned(name, false)
		return nil, classify(err)
	}
	set := []string{"set", name, "--random-mac"}
	if res.CPU > 0 {
		set = append(set, "--cpu", strconv.Itoa(res.CPU))
	}
	if res.MemoryMB > 0 {
		set = append(set, "--memory", strconv.Itoa(res.MemoryMB))
	}
	if _, err := d.run(ctx, set...); err != nil {
		d.destroy(context.WithoutCancel(ctx), name) //nolint:errcheck
		return nil, classify(err)
	}
	args := append([]string{"run", "--no-graphics", "--no-audio", "--no-clipboard"}, d.networkArgs()...)
	if res.Suspendable {
		args = append(args, "--suspendable")
	}
	args = append(args, "--dir", "build-config:"+sharedDir)
	if res.CacheDir != "" {
		// The VM sees it at vmbootstrap.DefaultCacheShare; ro: the build
		// can read its project's caches, never change the worker's copy.
		args = append(args, "--dir", "caches:"+res.CacheDir+":ro")
	}
	v := &vm{d: d, name: name, args: append(args, name), env: runEnv,
		logPath: filepath.Join(d.LogDir, name+".tart-run.log"), exited: make(chan struct{})}
	if err := v.launch(os.O_TRUNC); err != nil {
		d.destroy(context.WithoutCancel(ctx), name) //nolint:errcheck
		return nil, err
	}
	return v, nil
}

// vm is one build VM: its `tart run`, started again by a Resume after a
// Suspend (which ends the first).
type vm struct {
	d       *Driver
	name    string
	args    []string // tart run's
	env     []string
	logPath string // `tart run`'s output, across resumes

	mu         sync.Mutex
	proc       *agent.Process
	suspending bool // a Suspend waits for proc to end
	suspended  bool
	exited     chan struct{} // closed when the VM ended (not by a suspension)
	err        error
}

// launch starts `tart run` (again), its output added to the log file
// (truncated first with os.O_TRUNC).
func (v *vm) launch(mode int) error {
	logFile, err := os.OpenFile(v.logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND|mode, 0o644)
	if err != nil {
		return &agent.StartError{Retryable: true, Code: "worker_disk", Err: err}
	}
	cmd := exec.Command(v.d.Tart, v.args...)
	cmd.Env = v.env
	cmd.Stdout, cmd.Stderr = logFile, logFile
	p, err := agent.StartProcess(cmd)
	logFile.Close()
	if err != nil {
		return classify(err)
	}
	p.Stop = func(ctx context.Context) error {
		// tart stop powers the VM off (SIGINT to `tart run`, SIGKILL after
		// the timeout), or drops a suspended VM's snapshot.
		if _, err := v.d.run(ctx, "stop", "--timeout", "30", v.name); err != nil && !isWrongState(err) {
			return err
		}
		return nil
	}
	p.Cleanup = func(ctx context.Context) error {
		defer os.Remove(v.logPath)
		if out, _ := os.ReadFile(v.logPath); len(out) > 0 {
			v.d.Log.WithField("vm", v.name).Debugf("tart run output: %s", bytes.TrimSpace(out))
		}
		err := v.d.delete(ctx, v.name)
		v.d.setOwned(v.name, false)
		return err
	}
	v.mu.Lock()
	v.proc, v.suspended = p, false
	v.mu.Unlock()
	go v.watch(p)
	return nil
}

// watch ends the VM when its `tart run` ends, unless a Suspend ended it.
func (v *vm) watch(p *agent.Process) {
	<-p.Exited()
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.suspending || v.proc != p {
		return
	}
	v.err = v.explain(p.Err())
	close(v.exited)
}

// Exited implements agent.Instance.
func (v *vm) Exited() <-chan struct{} { return v.exited }

// Err implements agent.Instance.
func (v *vm) Err() error {
	select {
	case <-v.exited:
		return v.err
	default:
		return nil
	}
}

// Destroy implements agent.Instance: `tart stop` (of the running or the
// suspended VM), then `tart delete`.
func (v *vm) Destroy(ctx context.Context) error {
	v.mu.Lock()
	p := v.proc
	v.mu.Unlock()
	return p.Destroy(ctx)
}

// Suspend implements agent.Suspender: `tart suspend`, whose `tart run`
// saves the VM's state and exits 0, leaving the VM "suspended".
func (v *vm) Suspend(ctx context.Context) error {
	v.mu.Lock()
	p := v.proc
	select {
	case <-v.exited:
		v.mu.Unlock()
		return fmt.Errorf("suspend %s: the VM is no longer running: %w", v.name, v.err)
	default:
	}
	v.suspending = true
	v.mu.Unlock()
	_, err := v.d.run(ctx, "suspend", v.name)
	if err == nil {
		select {
		case <-p.Exited():
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	if err == nil && p.Err() != nil {
		err = v.explain(p.Err())
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.suspending = false
	if err == nil {
		v.suspended = true
		return nil
	}
	// Tart exits when the save fails, which powers the VM off; a VM still
	// running is left to Destroy.
	err = fmt.Errorf("suspend %s: %w", v.name, err)
	select {
	case <-p.Exited():
		v.err = err
		close(v.exited)
	default:
	}
	return err
}

// Resume implements agent.Suspender: `tart run` again, which restores the
// VM from its snapshot.
func (v *vm) Resume(ctx context.Context) error {
	v.mu.Lock()
	suspended := v.suspended
	v.mu.Unlock()
	if !suspended {
		return fmt.Errorf("resume %s: the VM is not suspended", v.name)
	}
	if err := v.launch(0); err != nil {
		v.mu.Lock()
		v.err = fmt.Errorf("resume %s: %w", v.name, err)
		close(v.exited)
		v.mu.Unlock()
		return v.err
	}
	return nil
}

// limitMessage is how Tart reports Virtualization.framework's refusal of
// another VM (RuntimeError.VirtualMachineLimitExceeded, exit 1), printed
// once the VM has failed to start.
const limitMessage = "The number of VMs exceeds the system limit"

// explain adds to the exit of `tart run` the last line of its output,
// which is where Tart prints why the VM stopped or failed to start.
func (v *vm) explain(err error) error {
	if err == nil {
		return nil
	}
	out, _ := os.ReadFile(v.logPath)
	if len(bytes.TrimSpace(out)) == 0 {
		return err
	}
	err = fmt.Errorf("%w: %s", err, lastLine(string(out)))
	if bytes.Contains(out, []byte(limitMessage)) {
		return &agent.StartError{Retryable: true, Code: agent.CodeVMLimit, Err: err}
	}
	return err
}

// destroy stops (if running) and deletes a VM; a VM already gone is fine.
func (d *Driver) destroy(ctx context.Context, name string) error {
	if _, err := d.run(ctx, "stop", "--timeout", "30", name); err != nil && !isWrongState(err) {
		return err
	}
	return d.delete(ctx, name)
}

// delete removes a VM, retrying while its `tart run` is still exiting.
func (d *Driver) delete(ctx context.Context, name string) error {
	for i := 0; ; i++ {
		_, err := d.run(ctx, "delete", name)
		var te *Error
		switch {
		case err == nil, isWrongState(err):
			return nil
		case errors.As(err, &te) && te.ExitCode == 1 && i < 20:
			// "VM is running": the run process has not released its lock yet.
			select {
			case <-ctx.Done():
				return err
			case <-time.After(250 * time.Millisecond):
			}
		default:
			return err
		}
	}
}

func isWrongState(err error) bool {
	var te *Error
	return errors.As(err, &te) && te.WrongState()
}

// classify turns a tart failure into a StartError the agent can report.
func classify(err error) error {
	var se *agent.StartError
	if errors.As(err, &se) {
		return err
	}
	var te *Error
	switch {
	case errors.Is(err, ErrNotInstalled):
		return &agent.StartError{Retryable: true, Code: "tart_missing", Err: err}
	case errors.As(err, &te) && strings.Contains(te.Line, limitMessage):
		return &agent.StartError{Retryable: true, Code: agent.CodeVMLimit, Err: err}
	case errors.As(err, &te) && te.ExitCode == 64:
		return &agent.StartError{Retryable: true, Code: "tart_usage", Err: fmt.Errorf("bug: tart rejected our command line: %w", err)}
	}
	return &agent.StartError{Retryable: true, Code: "vm_start_failed", Err: err}
}

// Version returns `tart --version` (e.g. "2.32.0").
func (d *Driver) Version(ctx context.Context) (string, error) {
	out, err := d.run(ctx, "--version")
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}
