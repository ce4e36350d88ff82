package secrets

import (
	"os"
	"testing"
)

// testService keeps the real-Keychain tests away from a worker's own items.
const testService = "build.freeagent.test"

// realKeychain skips unless FREEAGENT_TEST_REAL_KEYCHAIN=1 (scripts/mac-e2e.sh
// sets it): the tests write to the login keychain of whoever runs them.
func realKeychain(t *testing.T) {
	if os.Getenv("FREEAGENT_TEST_REAL_KEYCHAIN") != "1" {
		t.Skip("set FREEAGENT_TEST_REAL_KEYCHAIN=1 to use this Mac's login keychain")
	}
}

func TestRealSecurityTool(t *testing.T) {
	realKeychain(t)
	exercise(t, &SecurityStore{Service: testService})
	(&SecurityStore{Service: testService}).Delete(KeyWorkerID)
}
