//go:build linux

package bench

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// sysProcAttr puts the controller in its own process group (a terminal
// Ctrl-C reaches the benchmark, which then stops the controller in order)
// and has the kernel kill it should the benchmark die first.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// memory returns a process's resident set size and its peak (VmRSS, VmHWM)
// in bytes.
func memory(pid int) (rss, hwm int64, err error) {
	f, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		k, v, ok := strings.Cut(s.Text(), ":")
		if !ok || (k != "VmRSS" && k != "VmHWM") {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/%d/status %s: %w", pid, k, err)
		}
		if k == "VmRSS" {
			rss = n << 10
		} else {
			hwm = n << 10
		}
	}
	if err := s.Err(); err != nil {
		return 0, 0, err
	}
	if rss == 0 {
		return 0, 0, fmt.Errorf("/proc/%d/status has no VmRSS", pid)
	}
	return rss, hwm, nil
}

// resetPeakMemory resets VmHWM to the current RSS (Linux ≥ 4.0).
func resetPeakMemory(pid int) error {
	return os.WriteFile(filepath.Join("/proc", strconv.Itoa(pid), "clear_refs"), []byte("5"), 0)
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat times: 100 on every
// Linux architecture Go supports.
const clockTicks = 100

// procStat is the parent pid and CPU times of a process.
type procStat struct {
	ppid                         int
	utime, stime, cutime, cstime int64 // clock ticks
}

func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return procStat{}, err
	}
	// "pid (comm) state ppid ..." — comm may hold anything: cut at the last ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	// After the ')': state(0) ppid(1) ... utime(11) stime(12) cutime(13) cstime(14).
	if len(f) < 15 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	var st procStat
	var errs []error
	num := func(s string) int64 {
		n, err := strconv.ParseInt(s, 10, 64)
		errs = append(errs, err)
		return n
	}
	st.ppid = int(num(f[1]))
	st.utime, st.stime, st.cutime, st.cstime = num(f[11]), num(f[12]), num(f[13]), num(f[14])
	return st, errors.Join(errs...)
}

// cpuSeconds is the CPU time a process has used (user + system).
func cpuSeconds(pid int) (float64, error) {
	st, err := readStat(pid)
	if err != nil {
		return 0, err
	}
	return float64(st.utime+st.stime) / clockTicks, nil
}

// treeCPUSeconds is the CPU time of a server and its children: its own,
// that of its live children (Postgres backends and helpers), and that of
// the children it has already reaped (cutime, cstime). It only grows, so
// the difference of two readings is the CPU used in between, even when
// backends come and go.
func treeCPUSeconds(root int) (float64, error) {
	st, err := readStat(root)
	if err != nil {
		return 0, err
	}
	total := st.utime + st.stime + st.cutime + st.cstime
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, ent := range entries {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil || pid == root {
			continue
		}
		c, err := readStat(pid)
		if err != nil || c.ppid != root {
			continue // gone already, or not one of the server's
		}
		total += c.utime + c.stime
	}
	return float64(total) / clockTicks, nil
}

// machineCPU is the machine's CPU time since boot, from /proc/stat: busy
// (user, nice, system, irq, softirq; not idle or iowait) and steal (time
// the hypervisor gave to other guests while this one wanted to run).
func machineCPU() (busy, steal float64, err error) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) < 9 || fields[0] != "cpu" {
			continue
		}
		// user nice system idle iowait irq softirq steal [guest guest_nice, already in user/nice]
		var n [8]int64
		for i, v := range fields[1:9] {
			if n[i], err = strconv.ParseInt(v, 10, 64); err != nil {
				return 0, 0, fmt.Errorf("/proc/stat: %w", err)
			}
		}
		return float64(n[0]+n[1]+n[2]+n[5]+n[6]) / clockTicks, float64(n[7]) / clockTicks, nil
	}
	if err := s.Err(); err != nil {
		return 0, 0, err
	}
	return 0, 0, errors.New("/proc/stat has no cpu line")
}

// processesCPU is the CPU time of every process on the machine, including
// what the dead ones used (their parents' cutime and cstime), so that it only
// grows; kthreads is the kernel threads' part (children of kthreadd, pid 2).
func processesCPU() (all, kthreads float64, err error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, 0, err
	}
	var a, k int64
	for _, ent := range entries {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		st, err := readStat(pid)
		if err != nil {
			continue // exited meanwhile
		}
		a += st.utime + st.stime + st.cutime + st.cstime
		if pid == 2 || st.ppid == 2 {
			k += st.utime + st.stime
		}
	}
	return float64(a) / clockTicks, float64(k) / clockTicks, nil
}
