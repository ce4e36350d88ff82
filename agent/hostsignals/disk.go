package hostsignals

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// FreeBytes is the space available to this user on dir's file system, or
// on its nearest existing parent (the data folder may not exist yet).
func FreeBytes(dir string) (uint64, error) {
	for {
		var st unix.Statfs_t
		err := unix.Statfs(dir, &st)
		if err == nil {
			return uint64(st.Bavail) * uint64(st.Bsize), nil
		}
		if !os.IsNotExist(err) {
			return 0, fmt.Errorf("statfs %s: %w", dir, err)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return 0, fmt.Errorf("statfs %s: %w", dir, err)
		}
		dir = parent
	}
}
