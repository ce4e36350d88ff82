package vmbootstrap

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/freeagent-build/freeagent/internal/toolchain"
)

// Step is one command of a build, run as a child process in its own
// process group.
type Step struct {
	Argv []string
	Dir  string // absolute
	// Shown is how the step is announced in the log ("▸ …"); Argv joined
	// when empty.
	Shown string
	// Env adds to (or replaces in) the runner's environment for this step
	// only, e.g. signing properties only Gradle may see.
	Env []string
}

func (s Step) String() string {
	if s.Shown != "" {
		return s.Shown
	}
	return shellJoin(s.Argv)
}

// StepError is a build command that ran and failed: the project's fault,
// not the machine's.
type StepError struct {
	Step   Step
	Status string // "exit status 1", "signal: killed"
	Code   int    // exit code, -1 when killed by a signal
}

func (e *StepError) Error() string {
	return fmt.Sprintf("`%s` failed with %s", e.Step, e.Status)
}

// ToolMissingError is a build command that could not be started (npm,
// xcodebuild, … missing from the VM image).
type ToolMissingError struct {
	Step Step
	Err  error
}

func (e *ToolMissingError) Error() string {
	return fmt.Sprintf("cannot run `%s`: %v", e.Step, e.Err)
}

func (e *ToolMissingError) Unwrap() error { return e.Err }

// stepRunner runs steps with their output merged into out.
type stepRunner struct {
	env   []string
	out   io.Writer
	grace time.Duration // SIGTERM → SIGKILL
	// drain bounds the wait for output after the step's main process
	// exited, when something it left behind still holds the pipe.
	drain time.Duration
	// user, when set, runs the steps (see buildUser); their "process
	// group" is then every process of that user.
	user *buildUser
}

// run runs s to completion. When ctx ends first, the step's whole process
// group gets SIGTERM, then SIGKILL after the grace period, and the error
// wraps ctx's cause. Members of the group still running after the main
// process exited are killed.
func (r *stepRunner) run(ctx context.Context, s Step) error {
	fmt.Fprintf(r.out, "\n▸ %s\n", s)
	if ctx.Err() != nil {
		return fmt.Errorf("`%s` not started: %w", s, context.Cause(ctx))
	}
	env := r.env
	if len(s.Env) > 0 {
		env = mergeEnv(r.env, s.Env...)
	}
	bin, err := toolchain.LookPath(s.Argv[0], env)
	if err != nil {
		return &ToolMissingError{Step: s, Err: err}
	}
	var cmd *exec.Cmd
	if r.user != nil {
		cmd = r.user.command(context.Background(), bin, s.Argv, env) // its stdin carries env, then ends
	} else {
		cmd = exec.Command(bin, s.Argv[1:]...)
		cmd.Args[0] = s.Argv[0]
		cmd.Env = env
		cmd.Stdin = nil // /dev/null: nothing may wait for input
	}
	cmd.Dir = s.Dir
	// One writer for both: os/exec then gives the child a single pipe,
	// so stdout and stderr stay in the order they were written.
	cmd.Stdout, cmd.Stderr = r.out, r.out
	cmd.WaitDelay = r.drain
	setProcessGroup(cmd)
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return &ToolMissingError{Step: s, Err: err}
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
		r.kill(cmd.Process) // leftovers of a finished step
	case <-ctx.Done():
		fmt.Fprintf(r.out, "\n▸ stopping `%s`: %v\n", s, context.Cause(ctx))
		r.terminate(cmd.Process)
		select {
		case <-done:
		case <-time.After(r.grace):
			r.kill(cmd.Process)
			<-done
		}
		r.kill(cmd.Process)
		return fmt.Errorf("`%s` stopped: %w", s, context.Cause(ctx))
	}
	if errors.Is(err, exec.ErrWaitDelay) {
		err = nil // it succeeded; a leftover held the pipe (now killed)
	}
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		fmt.Fprintf(r.out, "\n▸ `%s` failed with %s after %s\n", s, exitErr.ProcessState, time.Since(start).Round(time.Second))
		return &StepError{Step: s, Status: exitErr.ProcessState.String(), Code: exitErr.ExitCode()}
	}
	if err != nil {
		return fmt.Errorf("run `%s`: %w", s, err)
	}
	return nil
}

// terminate sends SIGTERM to the step: its process group, or every
// process of the build user.
func (r *stepRunner) terminate(p *os.Process) {
	if r.user == nil {
		terminateGroup(p)
		return
	}
	r.signalUser(false)
}

// kill sends SIGKILL to the step's process group and, with a build user,
// to every process of that user.
func (r *stepRunner) kill(p *os.Process) {
	killGroup(p) // sudo's group, where this process may signal
	if r.user != nil {
		r.signalUser(true)
	}
}

func (r *stepRunner) signalUser(kill bool) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := r.user.signalAll(ctx, kill); err != nil {
		fmt.Fprintf(r.out, "\n▸ warning: %v\n", err)
	}
}

// mergeEnv returns base with the key=value pairs of set replacing or
// adding entries.
func mergeEnv(base []string, set ...string) []string {
	out := make([]string, 0, len(base)+len(set))
	keys := map[string]bool{}
	for _, kv := range set {
		k, _, _ := strings.Cut(kv, "=")
		keys[k] = true
	}
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if !keys[k] {
			out = append(out, kv)
		}
	}
	return append(out, set...)
}

// shellJoin renders argv the way a shell user would type it.
func shellJoin(argv []string) string {
	parts := make([]string, len(argv))
	for i, a := range argv {
		if a != "" && strings.IndexFunc(a, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=,+@%", r))
		}) < 0 {
			parts[i] = a
			continue
		}
		parts[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(parts, " ")
}

// relDir shows dir relative to root for log headers ("ios"), or "".
func relDir(root, dir string) string {
	rel, err := filepath.Rel(root, dir)
	if err != nil || rel == "." {
		return ""
	}
	return rel
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
