package main

import (
	"bytes"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
)

// A worker with the local driver advertises only what this host builds:
// never ios without macOS and xcodebuild (issue 17), and says why.
func TestLocalWorkerAdvertisesWhatTheHostBuilds(t *testing.T) {
	_, err := exec.LookPath("xcodebuild")
	canIOS := runtime.GOOS == "darwin" && err == nil
	for _, set := range []string{"", "ios,android"} {
		var logBuf bytes.Buffer
		log := logrus.New()
		log.SetOutput(&logBuf)
		cfg := &Config{VMDriver: "local", Platforms: set}
		got := cfg.capabilities(log).Platforms
		if slices.Contains(got, "ios") != canIOS || !slices.Contains(got, "android") {
			t.Errorf("--platforms %q on %s (xcodebuild: %v): advertises %v", set, runtime.GOOS, err, got)
		}
		if !canIOS && !strings.Contains(logBuf.String(), "not advertising ios") {
			t.Errorf("--platforms %q: the log does not say why ios is left out:\n%s", set, logBuf.String())
		}
	}
}
