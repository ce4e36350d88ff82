package vmbootstrap

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/internal/testsupport/syncbuf"
	"github.com/freeagent-build/freeagent/internal/testsupport/testtool"
)

// testBuildUser creates a throwaway unprivileged user (removed at cleanup)
// and returns it as a build user that runs the freeagent-vm under test.
// Each test gets its own user: stopping a step signals every process of
// the user, which must not reach another test's. Without root or outside
// Linux the test is skipped with the reason; on CI (root) a missing sudo
// or useradd fails it.
func testBuildUser(t *testing.T) *buildUser {
	t.Helper()
	switch {
	case runtime.GOOS != "linux":
		t.Skip("the build-user tests create throwaway users with useradd (Linux)")
	case os.Geteuid() != 0:
		t.Skip("the build-user tests need root (useradd, and sudo without a password)")
	}
	testtool.Need(t, "sudo", "useradd", "userdel")
	b := make([]byte, 4)
	rand.Read(b) //nolint:errcheck
	name := "fa-bu-" + hex.EncodeToString(b)
	if out, err := exec.Command("useradd", "--create-home", "--user-group", "--shell", "/bin/sh", name).CombinedOutput(); err != nil {
		t.Fatalf("useradd %s: %v: %s", name, err, out)
	}
	t.Cleanup(func() {
		exec.Command("pkill", "-KILL", "-u", name).Run() //nolint:errcheck // only this test's user
		if out, err := exec.Command("userdel", "--remove", name).CombinedOutput(); err != nil {
			t.Errorf("userdel %s: %v: %s", name, err, out)
		}
	})
	u, err := lookupBuildUser(name, vmBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := u.probe(context.Background()); err != nil {
		t.Fatal(err)
	}
	return u
}

// sharedTempDir is a temporary directory the build user can reach: the
// test's own TempDir is private to root.
func sharedTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "freeagent-bu-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// processesOf lists the pids of uid's live processes (from /proc; zombies,
// dead and waiting for a reaper, are not).
// survivorsOf is processesOf once the processes a SIGKILL has been sent to
// have had time to die: kill(2) only queues the signal, and on a loaded
// machine a killed process may still be running when it returns.
func survivorsOf(t *testing.T, uid int) []int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		left := processesOf(t, uid)
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func processesOf(t *testing.T, uid int) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		f, err := os.Open(filepath.Join("/proc", e.Name(), "status"))
		if err != nil {
			continue // gone
		}
		zombie, mine := false, false
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			switch {
			case len(f) >= 2 && f[0] == "State:":
				zombie = f[1] == "Z" || f[1] == "X"
			case len(f) >= 2 && f[0] == "Uid:":
				mine = f[1] == strconv.Itoa(uid)
			}
		}
		f.Close()
		if mine && !zombie {
			pids = append(pids, pid)
		}
	}
	return pids
}

// TestStepAsBuildUser: a step runs as the build user with the step's
// environment (HOME its own), which never appears in sudo's arguments,
// and writes the shared work tree.
func TestStepAsBuildUser(t *testing.T) {
	t.Parallel()
	u := testBuildUser(t)
	dir := filepath.Join(sharedTempDir(t), "work")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := u.share(dir, 0o770); err != nil {
		t.Fatal(err)
	}
	out := &syncbuf.Buffer{}
	env := u.env(append(os.Environ(), "STEP_SECRET=s3cr3t-value", "ORG_GRADLE_PROJECT_android.injected.signing.store.password=dotted"), dir)
	r := &stepRunner{env: env, out: out, grace: 5 * time.Second, drain: time.Second, user: u}
	script := `id -u > uid; printf '%s|%s|%s|%s' "$STEP_SECRET" "$HOME" "$USER" "$TMPDIR" > env; umask > umask`
	if err := r.run(context.Background(), Step{Argv: []string{"sh", "-c", script}, Dir: dir}); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		return strings.TrimSpace(string(b))
	}
	if got := read("uid"); got != strconv.Itoa(u.uid) {
		t.Errorf("the step ran as uid %s, want the build user's %d", got, u.uid)
	}
	if got, want := read("env"), "s3cr3t-value|"+u.home+"|"+u.name+"|"+dir; got != want {
		t.Errorf("the step's environment: %q, want %q", got, want)
	}
	// A shell drops variables whose names are not identifiers: env shows them.
	if err := r.run(context.Background(), Step{Argv: []string{"env"}, Dir: dir}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "\nORG_GRADLE_PROJECT_android.injected.signing.store.password=dotted\n") {
		t.Errorf("a variable with dots in its name did not cross:\n%s", out)
	}
	if got := read("umask"); got != "0007" {
		t.Errorf("the step's umask is %s, want 0007", got)
	}
	st, err := os.Stat(filepath.Join(dir, "uid"))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o660 {
		t.Errorf("a file the build wrote has mode %04o, want 0660 (group-readable for the bootstrap)", st.Mode().Perm())
	}
	cmd := u.command(context.Background(), "/bin/sh", []string{"sh"}, env)
	if args := strings.Join(cmd.Args, " "); strings.Contains(args, "s3cr3t-value") || strings.Contains(args, "dotted") {
		t.Errorf("a variable's value is in sudo's argv: %s", args)
	}
}

// TestStepAsBuildUserCancel: stopping a step run as the build user stops
// every process it started, also those that left its process group.
func TestStepAsBuildUserCancel(t *testing.T) {
	t.Parallel()
	u := testBuildUser(t)
	dir := filepath.Join(sharedTempDir(t), "work")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := u.share(dir, 0o770); err != nil {
		t.Fatal(err)
	}
	out := &syncbuf.Buffer{}
	r := &stepRunner{env: u.env(os.Environ(), dir), out: out, grace: 2 * time.Second, drain: time.Second, user: u}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		// A child that ignores SIGTERM in a session of its own, and one in
		// the step's group.
		errc <- r.run(ctx, Step{Argv: []string{"sh", "-c", `setsid sh -c 'trap "" TERM; echo $$ > escaped; while :; do sleep 1; done' & sleep 300 & echo $! > child; wait`}, Dir: dir})
	}()
	for _, f := range []string{"escaped", "child"} {
		readPid(t, filepath.Join(dir, f))
	}
	if len(processesOf(t, u.uid)) < 3 {
		t.Fatalf("the build user runs %v", processesOf(t, u.uid))
	}
	cancel()
	if err := <-errc; err == nil || !strings.Contains(err.Error(), "stopped") {
		t.Fatalf("run: %v\n%s", err, out)
	}
	if left := survivorsOf(t, u.uid); len(left) != 0 {
		t.Fatalf("processes of the build user left after the step was stopped: %v\n%s", left, out)
	}
}
