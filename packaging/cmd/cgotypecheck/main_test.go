package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const root = "../../.."

func TestCatchesAMisspelledKeychainCall(t *testing.T) {
	// The fixture's file is darwin+cgo only: the ordinary checks never see it.
	for _, env := range [][]string{nil, {"GOOS=darwin", "GOARCH=arm64", "CGO_ENABLED=0"}} {
		cmd := exec.Command("go", "vet", "./packaging/cmd/cgotypecheck/testdata/bad")
		cmd.Dir = root
		cmd.Env = append(cmd.Environ(), env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go vet %v should pass (it cannot see the file): %v\n%s", env, err, out)
		}
	}
	res, err := check(root, []string{"./packaging/cmd/cgotypecheck/testdata/bad"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.errs) != 1 || !strings.Contains(res.errs[0], "testdata/bad/keychain_darwin.go:14:4") || !strings.Contains(res.errs[0], "SetAccesible undefined") {
		t.Fatalf("errors: %q", res.errs)
	}
}

func TestAcceptsCorrectCgoCode(t *testing.T) {
	res, err := check(root, []string{"./packaging/cmd/cgotypecheck/testdata/good"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.errs) != 0 || res.checked != 1 || !slices.Equal(res.cgo, []string{"github.com/freeagent-build/freeagent/packaging/cmd/cgotypecheck/testdata/good"}) {
		t.Fatalf("%+v", res)
	}
}

func TestTheModuleTypeChecks(t *testing.T) {
	res, err := check(root, []string{"./..."})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.errs) != 0 {
		t.Fatalf("the darwin cgo build has type errors:\n%s", strings.Join(res.errs, "\n"))
	}
	if res.checked < 20 {
		t.Fatalf("only %d packages checked", res.checked)
	}
}

func TestReportsBrokenPatterns(t *testing.T) {
	res, err := check(root, []string{"./no/such/package"})
	if err == nil || !strings.Contains(err.Error(), "matched no package") {
		t.Fatalf("a missing package passed: %+v", res)
	}
}

func TestChecksTestFilesToo(t *testing.T) {
	res, err := check(root, []string{"./packaging/cmd/cgotypecheck/testdata/badtest", "./packaging/cmd/cgotypecheck/testdata/bad"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.errs) != 2 || !strings.Contains(res.errs[0], "bad/keychain_darwin.go:14:4") || !strings.Contains(res.errs[1], "badtest/item_darwin_test.go:13:4: q.SetServise undefined") {
		t.Fatalf("want one error each, once: %q", res.errs)
	}
}
