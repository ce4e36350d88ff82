package launchd

import (
	"slices"
	"testing"
)

// TestOneShotRunsInTheLoginItemsContext: the one-shot job runs the same
// executable as the login item, with its PATH, GUI session type and app
// association (to which macOS attributes the Local Network permission),
// runs once and sends both outputs to the one file; paths the login item
// refuses are refused.
func TestOneShotRunsInTheLoginItemsContext(t *testing.T) {
	h := HostAgent{Executable: "/Applications/FreeAgent.app/Contents/MacOS/freeagent", Args: []string{"run", "--on-sigterm", "hand-back"}, Home: "/Users/me"}
	login, err := h.Job()
	if err != nil {
		t.Fatal(err)
	}
	j, err := h.OneShot("build.freeagent.doctor.1", []string{"doctor", "--json"}, "/tmp/d/out.log")
	if err != nil {
		t.Fatal(err)
	}
	if j.Label != "build.freeagent.doctor.1" || !slices.Equal(j.ProgramArguments, []string{h.Executable, "doctor", "--json"}) {
		t.Errorf("label %q, arguments %q", j.Label, j.ProgramArguments)
	}
	if !j.RunAtLoad || j.KeepAlive != nil || j.StandardOutPath != "/tmp/d/out.log" || j.StandardErrorPath != "/tmp/d/out.log" {
		t.Errorf("want a job run once with its output in the file: %+v", j)
	}
	if !slices.Equal(j.AssociatedBundleIdentifiers, login.AssociatedBundleIdentifiers) || len(j.AssociatedBundleIdentifiers) == 0 ||
		j.EnvironmentVariables["PATH"] != login.EnvironmentVariables["PATH"] || j.LimitLoadToSessionType != login.LimitLoadToSessionType ||
		j.ProcessType != login.ProcessType {
		t.Errorf("the job's context differs from the login item's:\n%+v\n%+v", j, login)
	}
	if _, err := (HostAgent{Executable: "/Volumes/FreeAgent/FreeAgent.app/Contents/MacOS/freeagent", Home: "/Users/me"}).OneShot("x", nil, "/tmp/o"); err == nil {
		t.Error("a job from a disk image was accepted")
	}
}

// TestParseServiceState reads `launchctl print` of a job that runs, one
// that exited, one killed by a signal, and one that never ran; keys of
// nested dictionaries do not count.
func TestParseServiceState(t *testing.T) {
	for _, c := range []struct {
		name, out string
		want      serviceState
	}{
		{"running", "gui/501/build.freeagent.doctor.1 = {\n\tactive count = 1\n\tstate = running\n\tprogram = /x\n\tlast exit code = (never exited)\n}\n", serviceState{running: true}},
		{"exited", "gui/501/build.freeagent.doctor.1 = {\n\tactive count = 0\n\tstate = not running\n\tenvironment = {\n\t\tlast exit code = 9\n\t}\n\truns = 1\n\tlast exit code = 1\n}\n", serviceState{exited: true, lastExit: 1}},
		{"exited with a name", "x = {\n\tstate = not running\n\tlast exit code = 78: EX_CONFIG\n}\n", serviceState{exited: true, lastExit: 78}},
		{"killed", "x = {\n\tstate = not running\n\tlast terminating signal = Terminated: 15\n}\n", serviceState{exited: true, lastExit: 143}},
		{"waiting to run", "x = {\n\tstate = spawn scheduled\n\tlast exit code = (never exited)\n}\n", serviceState{}},
	} {
		if got := parseServiceState([]byte(c.out)); got != c.want {
			t.Errorf("%s: got %+v, want %+v", c.name, got, c.want)
		}
	}
}
