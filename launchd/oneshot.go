package launchd

import (
	"bufio"
	"bytes"
	"strconv"
	"strings"
)

// OneShot is a job launchd runs once, in the login item's context: the
// same executable, environment, GUI session type and app association as
// h.Job, with args and its output in outPath. What it finds is what the
// login item finds; macOS grants the Local Network permission per app, so
// a check run from Terminal tests Terminal's.
func (h HostAgent) OneShot(label string, args []string, outPath string) (Job, error) {
	j, err := h.Job()
	if err != nil {
		return Job{}, err
	}
	j.Label = label
	j.ProgramArguments = append([]string{h.Executable}, args...)
	j.KeepAlive = nil
	j.StandardOutPath, j.StandardErrorPath = outPath, outPath
	return j, nil
}

// serviceState is what `launchctl print <service-target>` says of a job.
type serviceState struct {
	running  bool
	exited   bool // it ran and exited: lastExit holds its status
	lastExit int
}

// parseServiceState reads the top-level "state = …", "last exit code = …"
// and "last terminating signal = …" lines of `launchctl print`; a job that
// never exited prints "last exit code = (never exited)". A signal counts as
// 128 plus its number, as shells report it.
func parseServiceState(out []byte) serviceState {
	var s serviceState
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		// The service's own keys are indented by one tab; nested
		// dictionaries (endpoints, environment) by more.
		if !strings.HasPrefix(line, "\t") || strings.HasPrefix(line, "\t\t") {
			continue
		}
		key, value, ok := strings.Cut(strings.TrimSpace(line), " = ")
		if !ok {
			continue
		}
		switch key {
		case "state":
			s.running = value == "running"
		case "last exit code": // "0", "78: EX_CONFIG" or "(never exited)"
			number, _, _ := strings.Cut(value, ":")
			if n, err := strconv.Atoi(number); err == nil {
				s.exited, s.lastExit = true, n
			}
		case "last terminating signal": // "Terminated: 15"
			_, number, _ := strings.Cut(value, ": ")
			if n, err := strconv.Atoi(number); err == nil {
				s.exited, s.lastExit = true, 128+n
			}
		}
	}
	return s
}
