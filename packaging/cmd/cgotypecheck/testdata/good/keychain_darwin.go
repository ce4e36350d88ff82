//go:build darwin && cgo

// Package good uses go-keychain and a cgo preamble correctly.
package good

/*
#include <unistd.h>
*/
import "C"

import "github.com/keybase/go-keychain"

// Item makes a Keychain item; Pid calls C.
func Item() keychain.Item {
	q := keychain.NewItem()
	q.SetAccessible(keychain.AccessibleAfterFirstUnlockThisDeviceOnly)
	return q
}

// Pid calls into C.
func Pid() int { return int(C.getpid()) }
