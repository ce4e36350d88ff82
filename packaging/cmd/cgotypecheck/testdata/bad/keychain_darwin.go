//go:build darwin && cgo

// Package bad misspells a go-keychain call in a file only the darwin cgo
// build compiles: invisible to go vet on Linux and with CGO_ENABLED=0.
package bad

import "C"

import "github.com/keybase/go-keychain"

// Item makes a Keychain item.
func Item() keychain.Item {
	q := keychain.NewItem()
	q.SetAccesible(keychain.AccessibleAfterFirstUnlockThisDeviceOnly)
	return q
}
