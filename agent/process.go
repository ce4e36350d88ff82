package agent

import (
	"context"
	"errors"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// Process is an Instance backed by one supervised child process (the
// `tart run` of a VM, or the bootstrap itself for the local driver).
type Process struct {
	cmd     *exec.Cmd
	exited  chan struct{}
	err     error
	stopped sync.Once
	// Stop, when set, asks the environment to stop (e.g. `tart stop`)
	// before the process is signalled; Cleanup runs after it is gone.
	Stop    func(ctx context.Context) error
	Cleanup func(ctx context.Context) error
}

// StartProcess starts cmd in its own process group, at background
// priority, and supervises it.
func StartProcess(cmd *exec.Cmd) (*Process, error) {
	setProcessGroup(cmd)
	backgroundPriority(cmd)
	cmd.WaitDelay = time.Second // children that inherit our pipes must not hang Wait
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &Process{cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// Exited implements Instance.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Err implements Instance: how the process ended (nil while it runs).
func (p *Process) Err() error {
	select {
	case <-p.exited:
		return p.err
	default:
		return nil
	}
}

// Destroy implements Instance: Stop (if any), then SIGTERM to the process
// group, SIGKILL after a 10 s grace, then Cleanup (if any).
func (p *Process) Destroy(ctx context.Context) error {
	var errs []error
	p.stopped.Do(func() {
		if p.Stop != nil {
			if err := p.Stop(ctx); err != nil {
				errs = append(errs, err)
			}
		}
		select {
		case <-p.exited:
		default:
			signalGroup(p.cmd, syscall.SIGTERM)
			t := time.NewTimer(10 * time.Second)
			select {
			case <-p.exited:
			case <-t.C:
				signalGroup(p.cmd, syscall.SIGKILL)
				<-p.exited
			case <-ctx.Done():
				signalGroup(p.cmd, syscall.SIGKILL)
				<-p.exited
			}
			t.Stop()
		}
		if p.Cleanup != nil {
			if err := p.Cleanup(ctx); err != nil {
				errs = append(errs, err)
			}
		}
	})
	return errors.Join(errs...)
}
