//go:build unix

package power

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Caffeinate holds a power assertion by running caffeinate(8) while busy:
// `caffeinate -i -w PID` keeps the system from idle sleep until it is
// stopped or process PID (the agent) exits, so an agent that crashes
// mid-build does not keep the Mac awake for good.
type Caffeinate struct {
	Path string // caffeinate's path: /usr/bin/caffeinate on macOS
	PID  int    // the agent's process id

	mu     sync.Mutex
	cmd    *exec.Cmd     // nil when idle
	exited chan struct{} // closed when cmd has exited
}

// stopGrace is how long caffeinate gets to exit on SIGTERM before SIGKILL.
const stopGrace = 5 * time.Second

// SetBusy starts caffeinate when busy and it is not running (again, if it
// died), and stops it, waiting for it to exit, when idle.
func (c *Caffeinate) SetBusy(busy bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if busy {
		return c.start()
	}
	return c.stop()
}

func (c *Caffeinate) start() error {
	if c.cmd != nil {
		select {
		case <-c.exited: // killed by someone: take the assertion again
		default:
			return nil
		}
	}
	cmd := exec.Command(c.Path, "-i", "-w", strconv.Itoa(c.PID))
	// Its own process group: a Ctrl-C in `freeagent run`'s terminal drains
	// the agent, and the builds it lets finish still need the assertion.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		c.cmd, c.exited = nil, nil
		return fmt.Errorf("start %s to keep the Mac awake during builds (it may sleep mid-build; set Energy Saver to prevent sleep): %w", c.Path, err)
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait() //nolint:errcheck // killed on purpose; nothing to report
		close(exited)
	}()
	c.cmd, c.exited = cmd, exited
	return nil
}

func (c *Caffeinate) stop() error {
	if c.cmd == nil {
		return nil
	}
	cmd, exited := c.cmd, c.exited
	c.cmd, c.exited = nil, nil
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stop %s (pid %d), which keeps the Mac awake: %w", c.Path, cmd.Process.Pid, err)
	}
	select {
	case <-exited:
	case <-time.After(stopGrace):
		cmd.Process.Kill() //nolint:errcheck // exits on its own at worst with the agent (-w)
		<-exited
	}
	return nil
}
