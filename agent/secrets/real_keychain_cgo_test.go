//go:build darwin && cgo

package secrets

import "testing"

func TestRealKeychainAPI(t *testing.T) {
	realKeychain(t)
	s := keychainStore{service: testService}
	exercise(t, s)
	s.Delete(KeyWorkerID)
}
