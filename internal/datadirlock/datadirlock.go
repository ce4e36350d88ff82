// Package datadirlock is a process's claim on a data directory: an flock on
// a file in it, held for as long as the process uses the directory and
// released by the kernel however the process ends (a killed process leaves
// no lock behind, only a file whose content no longer counts). The file
// says who holds it (its pid, then a note such as the URL it serves), so a
// second start can name the process that is running.
package datadirlock

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Lock is a held claim.
type Lock struct{ f *os.File }

// HeldError is Acquire's answer when another process holds the lock.
type HeldError struct {
	Path string
	PID  int    // 0 when the file does not say (it is still being written)
	Note string // what the holder wrote with Lock.Note; "" until it does
}

func (e *HeldError) Error() string {
	who := "another process"
	if e.PID > 0 {
		who += fmt.Sprintf(" (pid %d)", e.PID)
	}
	return fmt.Sprintf("%s holds %s", who, e.Path)
}

// Acquire takes the lock on dir/name, creating the file, and records this
// process's pid in it. When another process holds it the error is a
// *HeldError.
func Acquire(dir, name string) (*Lock, error) {
	path := filepath.Join(dir, name)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		content, _ := io.ReadAll(io.LimitReader(f, 4096))
		f.Close()
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		pid, note, _ := strings.Cut(strings.TrimSpace(string(content)), "\n")
		held := &HeldError{Path: path, Note: strings.TrimSpace(note)}
		held.PID, _ = strconv.Atoi(pid)
		return nil, held
	}
	l := &Lock{f: f}
	if err := l.Note(""); err != nil {
		l.Release()
		return nil, err
	}
	return l, nil
}

// Note records this process and what it wants a second start to read
// (for example the URL it serves).
func (l *Lock) Note(note string) error {
	if err := l.f.Truncate(0); err != nil {
		return fmt.Errorf("write %s: %w", l.f.Name(), err)
	}
	if _, err := l.f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"+note+"\n"), 0); err != nil {
		return fmt.Errorf("write %s: %w", l.f.Name(), err)
	}
	return nil
}

// Release gives the claim up; a nil Lock is fine.
func (l *Lock) Release() {
	if l != nil {
		l.f.Close() // closing the last descriptor drops the flock
	}
}
