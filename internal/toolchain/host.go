package toolchain

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Host is what this machine offers a build that runs on it (the local
// driver): its CPU cores, memory, Xcode and tools.
type Host struct {
	CPUCores int
	MemoryGB int
	Xcode    string // `xcodebuild -version`, "" without Xcode
	Tools    map[string][]string
}

// ProbeHost probes this machine with the environment builds get.
func ProbeHost(ctx context.Context, env []string) Host {
	h := Host{CPUCores: runtime.NumCPU(), MemoryGB: memoryGB(ctx), Tools: Probe(ctx, env)}
	if bin, err := LookPath("xcodebuild", env); err == nil && runtime.GOOS == "darwin" {
		h.Xcode, _ = Version(ctx, bin, "-version")
	}
	return h
}

// memoryGB is the machine's memory in whole GB (GiB), 0 when unknown:
// sysctl hw.memsize on macOS, /proc/meminfo elsewhere.
func memoryGB(ctx context.Context) int {
	if runtime.GOOS == "darwin" {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, "sysctl", "-n", "hw.memsize").Output()
		if err != nil {
			return 0
		}
		b, _ := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
		return int(b >> 30)
	}
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return int(kb >> 20)
		}
	}
	return 0
}
