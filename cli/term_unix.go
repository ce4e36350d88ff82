//go:build linux || darwin

package cli

import (
	"bufio"
	"os"
	"strings"
	"syscall"
	"unsafe"
)

// isTerminal reports whether f is a terminal.
func isTerminal(f *os.File) bool {
	var t syscall.Termios
	return ioctl(f.Fd(), ioctlGetTermios, &t) == nil
}

func ioctl(fd uintptr, req uintptr, t *syscall.Termios) error {
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, fd, req, uintptr(unsafe.Pointer(t))); errno != 0 {
		return errno
	}
	return nil
}

// readHidden reads one line from the terminal f without echoing it.
func readHidden(f *os.File) (string, error) {
	var old syscall.Termios
	if err := ioctl(f.Fd(), ioctlGetTermios, &old); err != nil {
		return "", err
	}
	quiet := old
	quiet.Lflag &^= syscall.ECHO
	quiet.Lflag |= syscall.ICANON | syscall.ISIG
	if err := ioctl(f.Fd(), ioctlSetTermios, &quiet); err != nil {
		return "", err
	}
	defer ioctl(f.Fd(), ioctlSetTermios, &old) //nolint:errcheck // best effort restore
	line, err := bufio.NewReader(f).ReadString('\n')
	if err != nil && line == "" {
		return "", err
	}
	return strings.TrimRight(line, "\r\n"), nil
}
