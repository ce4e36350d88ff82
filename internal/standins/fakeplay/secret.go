package fakeplay

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
)

// AssertNoKey fails t if a service account's JSON key file, its private
// key or any long line of it shows in data, as it is or base64-encoded
// (from every offset, so a key inside a larger base64 text is found too).
func AssertNoKey(t testing.TB, data, keyFile []byte) {
	t.Helper()
	var f struct {
		PrivateKey string `json:"private_key"`
	}
	if err := json.Unmarshal(keyFile, &f); err != nil {
		t.Fatalf("read the key file: %v", err)
	}
	needles := []string{string(keyFile)}
	for _, line := range strings.Split(f.PrivateKey, "\n") {
		if len(line) < 40 {
			continue
		}
		needles = append(needles, line)
		for shift := range 3 { // base64 of the line at each alignment
			enc := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("x", shift) + line))
			needles = append(needles, enc[4:40])
		}
	}
	for _, n := range needles {
		if bytes.Contains(data, []byte(n)) {
			t.Fatalf("the service account key shows in what was checked (%.30q…)", n)
		}
	}
}
