//go:build linux

package session

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// maxDepth bounds the walk up the process tree.
const maxDepth = 256

func manager() (int, error) {
	pid := os.Getppid()
	for range maxDepth {
		if pid <= 1 {
			return 0, ErrNotModelled
		}
		if uid, ok, err := asuserOf(pid); err != nil || ok {
			return uid, err
		}
		ppid, err := parentOf(pid)
		if err != nil {
			return 0, err
		}
		pid = ppid
	}
	return 0, ErrNotModelled
}

// asuserOf reports whether pid runs `launchctl asuser UID …`, and UID.
func asuserOf(pid int) (int, bool, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return 0, false, fmt.Errorf("read the command line of process %d: %w", pid, err)
	}
	argv := strings.Split(string(bytes.TrimSuffix(b, []byte{0})), "\x00")
	if len(argv) < 3 || filepath.Base(argv[0]) != "launchctl" || argv[1] != "asuser" {
		return 0, false, nil
	}
	uid, err := strconv.Atoi(argv[2])
	if err != nil {
		return 0, false, fmt.Errorf("process %d runs launchctl asuser with uid %q: %w", pid, argv[2], err)
	}
	return uid, true, nil
}

// parentOf reads pid's parent from /proc/PID/stat, whose second field
// (the command name, in parentheses) may itself hold spaces and ")".
func parentOf(pid int) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("read the status of process %d: %w", pid, err)
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("process %d: unexpected /proc stat %q", pid, b)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0, fmt.Errorf("process %d: unexpected /proc stat %q", pid, b)
	}
	return strconv.Atoi(f[1])
}
