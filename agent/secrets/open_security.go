//go:build darwin && !cgo

package secrets

// Open returns the platform's store: the login Keychain through
// /usr/bin/security in builds without cgo.
func Open(string) Store { return &SecurityStore{} }
