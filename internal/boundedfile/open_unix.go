//go:build unix

package boundedfile

import (
	"errors"
	"syscall"
)

// O_NONBLOCK: opening a FIFO returns at once instead of waiting for a
// writer (the file is then refused as not regular); it changes nothing for
// regular files.
const (
	openFlags = syscall.O_NONBLOCK
	noFollow  = syscall.O_NOFOLLOW
)

// isSymlinkRefused: open(2) with O_NOFOLLOW fails with ELOOP on a link
// (EMLINK on FreeBSD, EFTYPE on NetBSD).
func isSymlinkRefused(err error) bool {
	return errors.Is(err, syscall.ELOOP) || errors.Is(err, syscall.EMLINK)
}
