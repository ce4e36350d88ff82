//go:build unix

package blobs

import "golang.org/x/sys/unix"

// Space reports the free space of the file system holding the store.
func (d *Dir) Space() (avail, total uint64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(d.root, &st); err != nil {
		return 0, 0, err
	}
	return uint64(st.Bavail) * uint64(st.Bsize), uint64(st.Blocks) * uint64(st.Bsize), nil //nolint:unconvert // field types differ between systems
}
