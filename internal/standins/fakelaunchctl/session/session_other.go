//go:build !linux

package session

// Without /proc the process tree is not read: no session is modelled.
func manager() (int, error) { return 0, ErrNotModelled }
