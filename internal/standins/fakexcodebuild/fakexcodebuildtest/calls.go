// Package fakexcodebuildtest reads what the stand-in xcodebuild
// (internal/standins/fakexcodebuild) records, for the tests that run it.
package fakexcodebuildtest

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// Calls returns the command lines the stand-in ran, in order, from the
// $FAKE_XCODEBUILD_LOG file at path (one JSON array per line).
func Calls(t testing.TB, path string) [][]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var calls [][]string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var argv []string
		if err := json.Unmarshal([]byte(line), &argv); err != nil {
			t.Fatal(err)
		}
		calls = append(calls, argv)
	}
	return calls
}
