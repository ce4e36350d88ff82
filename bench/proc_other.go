//go:build !linux

package bench

import (
	"errors"
	"syscall"
)

// The benchmark reads memory and CPU figures from Linux's /proc; elsewhere
// it builds, but those measurements fail.

var errNoProc = errors.New("this measurement needs Linux's /proc")

func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

func memory(pid int) (rss, hwm int64, err error) { return 0, 0, errNoProc }

func resetPeakMemory(pid int) error { return errNoProc }

func cpuSeconds(pid int) (float64, error) { return 0, errNoProc }

func treeCPUSeconds(root int) (float64, error) { return 0, errNoProc }

func machineCPU() (busy, steal float64, err error) { return 0, 0, errNoProc }

func processesCPU() (all, kthreads float64, err error) { return 0, 0, errNoProc }
