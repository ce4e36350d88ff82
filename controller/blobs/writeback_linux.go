package blobs

import (
	"os"

	"golang.org/x/sys/unix"
)

// startWriteback asks the kernel to start writing [off, off+n) of f to
// disk without waiting for it, so that the fsync at the end finds little
// left to do: the disk works while the rest of the file is received and
// hashed, instead of after.
func startWriteback(f *os.File, off, n int64) {
	unix.SyncFileRange(int(f.Fd()), off, n, unix.SYNC_FILE_RANGE_WRITE) //nolint:errcheck // a hint; the fsync decides
}
