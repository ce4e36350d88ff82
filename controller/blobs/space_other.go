//go:build !unix

package blobs

import "errors"

// Space is not available on this system: the floor cannot be checked.
func (d *Dir) Space() (avail, total uint64, err error) {
	return 0, 0, errors.New("free space is not reported on this system; set --min-free-disk 0")
}
