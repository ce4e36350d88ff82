package vmbootstrap

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// How build commands run as the build user (Config.BuildUser), separate
// from the bootstrap's own user (see README.md, "The build user").
//
// The bootstrap is not root in a macOS VM, so it switches users with
// `sudo -n -u USER`, allowed by the template's sudoers drop-in and by
// nothing else. sudo resets the environment (env_reset, secure_path), and
// keeping it (-E) would need SETENV and still leave sudoers' env_delete in
// the way, while a build's variables (signing passwords, secrets) must
// never be in an argv that every user sees in ps. So sudo runs this very
// program as `freeagent-vm as-build-user exec BIN ARGV…`, which reads the
// step's whole environment NUL-separated from its stdin, sets the umask
// the file scheme needs and execs the step: sudo's own environment rules
// never touch it.
//
// Sessions: on macOS a process inherits its launchd session (bootstrap
// namespace) across sudo, so `sudo -u USER` alone runs USER's commands in
// the auto-login user's session, where USER's per-user services are not:
// Xcode's asset catalog and storyboard compilers fail to reach
// CoreSimulatorService, and security's user domain is the wrong one. So,
// where there is launchd (Config.Launchctl), a step starts as
// `sudo -n LAUNCHCTL asuser UID SUDO -n -u USER -- freeagent-vm
// as-build-user exec …`: root moves into USER's own session (a user
// domain exists without a login, as an SSH session's does), then becomes
// USER. The template's sudoers drop-in allows exactly that command line
// besides `sudo -u USER`.
//
// Signals: the step's processes belong to the build user, whom the
// bootstrap cannot signal, and a step may leave its process group (setsid,
// daemons). So stopping a step is `sudo -n -u USER freeagent-vm
// as-build-user signal TERM|KILL`, which signals every process of the
// build user: the VM runs one build, and everything that user runs is
// that build's.

// AsBuildUserCommand is the first argument that makes freeagent-vm act as
// the build user's side of a step (see AsBuildUser).
const AsBuildUserCommand = "as-build-user"

// maxStepEnv bounds the environment a step reads from its stdin.
const maxStepEnv = 16 << 20

// buildUmask is the umask of the build user's processes and of the
// bootstrap when there is a build user: files are shared with the
// group both users are in, never with other users.
const buildUmask = 0o007

// sudoPath is sudo on macOS and Debian alike.
const sudoPath = "/usr/bin/sudo"

// buildUser is the account build commands run as.
type buildUser struct {
	name string
	uid  int
	gid  int // its primary group: the group the work tree is shared through
	home string
	sudo string
	self string // this program, which the build user runs as the step's launcher
	// launchctl, when set, starts steps in the build user's own launchd
	// session (see above); "" leaves them in this process's.
	launchctl string
}

// lookupBuildUser resolves name and checks that this process can share
// files with it and is not it.
func lookupBuildUser(name, self string) (*buildUser, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("the build user %q: %w (create it with scripts/build-vm-template.sh, or unset FREEAGENT_BUILD_USER)", name, err)
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("the build user %q: %w", name, err)
	}
	if uid == 0 {
		return nil, fmt.Errorf("the build user %q is root: build commands must run unprivileged", name)
	}
	if uid == os.Getuid() {
		return nil, fmt.Errorf("the build user %q is the bootstrap's own user: name a separate, unprivileged account", name)
	}
	if os.Getuid() != 0 {
		me, err := user.Current()
		if err != nil {
			return nil, fmt.Errorf("look up the bootstrap's user: %w", err)
		}
		groups, err := me.GroupIds()
		if err != nil {
			return nil, fmt.Errorf("look up the groups of %s: %w", me.Username, err)
		}
		if !slices.Contains(groups, u.Gid) {
			return nil, fmt.Errorf("the bootstrap's user %s is not in group %s, the primary group of the build user %q: the two share the work tree through it", me.Username, u.Gid, name)
		}
	}
	return &buildUser{name: name, uid: uid, gid: gid, home: u.HomeDir, sudo: sudoPath, self: self}, nil
}

// env is base with the variables that name the user set to the build
// user's (HOME, USER, LOGNAME) and TMPDIR in tmp: the bootstrap's
// temporary directory on macOS is private to it.
func (u *buildUser) env(base []string, tmp string) []string {
	return mergeEnv(base, "HOME="+u.home, "USER="+u.name, "LOGNAME="+u.name, "TMPDIR="+tmp)
}

// command returns the command that runs bin (with argv, argv[0] as the
// name it sees) as the build user with exactly env. Its Stdin carries env:
// callers must not replace it. When ctx ends, every process of the build
// user is killed (sudo itself is root's: this process cannot signal it).
func (u *buildUser) command(ctx context.Context, bin string, argv []string, env []string) *exec.Cmd {
	args := append([]string{"-n", "-u", u.name, "--", u.self, AsBuildUserCommand, "exec", bin}, argv...)
	if u.launchctl != "" {
		args = append([]string{"-n", "--", u.launchctl, "asuser", strconv.Itoa(u.uid), u.sudo}, args...)
	}
	cmd := exec.CommandContext(ctx, u.sudo, args...)
	cmd.Stdin = bytes.NewReader(encodeEnv(env))
	cmd.Cancel = func() error {
		kctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		return u.signalAll(kctx, true)
	}
	return cmd
}

// signalAll sends SIGTERM (SIGKILL when kill) to every process of the
// build user.
func (u *buildUser) signalAll(ctx context.Context, kill bool) error {
	name := "TERM"
	if kill {
		name = "KILL"
	}
	out, err := exec.CommandContext(ctx, u.sudo, "-n", "-u", u.name, "--", u.self, AsBuildUserCommand, "signal", name).CombinedOutput()
	if err != nil {
		return fmt.Errorf("signal the build user's processes (sudo -n -u %s): %w: %s", u.name, err, bytes.TrimSpace(out))
	}
	return nil
}

// probe checks that sudo lets this process run commands as the build
// user, and that they get its uid.
func (u *buildUser) probe(ctx context.Context) error {
	out, err := exec.CommandContext(ctx, u.sudo, "-n", "-u", u.name, "--", u.self, AsBuildUserCommand, "id").CombinedOutput()
	if err != nil {
		return fmt.Errorf("cannot run commands as the build user %q (sudo -n -u %s %s): %w: %s; the template's sudoers drop-in must let this user run commands as %s without a password (rebuild it with scripts/build-vm-template.sh)",
			u.name, u.name, u.self, err, bytes.TrimSpace(out), u.name)
	}
	if got := strings.TrimSpace(string(out)); got != strconv.Itoa(u.uid) {
		return fmt.Errorf("a command run as the build user %q ran as uid %q, want %d", u.name, got, u.uid)
	}
	return nil
}

// probeSession checks that a step, started as command starts it, lands in
// the build user's own launchd session: `launchctl manageruid` started
// that way prints the build user's uid.
func (u *buildUser) probeSession(ctx context.Context) error {
	cmd := u.command(ctx, u.launchctl, []string{"launchctl", "manageruid"}, []string{"PATH=/usr/bin:/bin:/usr/sbin:/sbin"})
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("sudo -n %s asuser %d %s -n -u %s -- … launchctl manageruid: %w: %s", u.launchctl, u.uid, u.sudo, u.name, err, bytes.TrimSpace(out))
	}
	if got := strings.TrimSpace(string(out)); got != strconv.Itoa(u.uid) {
		return fmt.Errorf("a command started in the build user's session runs in the session of uid %q, want %d", got, u.uid)
	}
	return nil
}

// share makes path (a file or directory this process owns) belong to the
// build user's group with the group's permissions mode; directories also
// get setgid, so what is created in them belongs to that group (macOS
// does so anyway).
func (u *buildUser) share(path string, mode fs.FileMode) error {
	if err := os.Lchown(path, -1, u.gid); err != nil {
		return fmt.Errorf("share %s with the build user: %w", path, err)
	}
	st, err := os.Lstat(path)
	if err != nil {
		return fmt.Errorf("share %s with the build user: %w", path, err)
	}
	if st.IsDir() {
		mode |= fs.ModeSetgid
	}
	if err := os.Chmod(path, mode); err != nil {
		return fmt.Errorf("share %s with the build user: %w", path, err)
	}
	return nil
}

// shareTree shares root and everything under it for reading: directories
// rwxr-s---, files rw-r----- (rwxr-x--- when executable). Links are
// left alone.
func (u *buildUser) shareTree(root string) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return u.share(p, 0o750)
		case d.Type().IsRegular():
			info, err := d.Info()
			if err != nil {
				return err
			}
			return u.share(p, 0o640|info.Mode().Perm()&0o110)
		}
		return nil
	})
}

func encodeEnv(env []string) []byte {
	var b bytes.Buffer
	for _, kv := range env {
		if strings.IndexByte(kv, 0) >= 0 {
			continue // cannot be in an environment anyway
		}
		b.WriteString(kv)
		b.WriteByte(0)
	}
	return b.Bytes()
}

// AsBuildUser is freeagent-vm's side of a command run as the build user
// (args follow AsBuildUserCommand):
//
//	exec BIN ARGV0 ARGS…  read the environment from stdin, then exec BIN
//	signal TERM|KILL      signal every process of this user but itself
//	id                    print this process's uid
//
// It returns an exit code only when it did not exec.
func AsBuildUser(args []string, stdin io.Reader, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintf(stderr, "freeagent-vm %s: want exec, signal or id\n", AsBuildUserCommand)
		return 2
	}
	switch args[0] {
	case "id":
		fmt.Println(os.Getuid())
		return 0
	case "signal":
		if len(args) != 2 || args[1] != "TERM" && args[1] != "KILL" {
			fmt.Fprintf(stderr, "freeagent-vm %s signal: want TERM or KILL\n", AsBuildUserCommand)
			return 2
		}
		if os.Getuid() == 0 {
			fmt.Fprintf(stderr, "freeagent-vm %s signal: refusing to signal every process as root\n", AsBuildUserCommand)
			return 2
		}
		if err := signalOwnProcesses(args[1] == "KILL"); err != nil {
			fmt.Fprintf(stderr, "freeagent-vm %s signal: %v\n", AsBuildUserCommand, err)
			return 1
		}
		return 0
	case "exec":
		if len(args) < 3 {
			fmt.Fprintf(stderr, "freeagent-vm %s exec: want BIN ARGV0 [ARGS…]\n", AsBuildUserCommand)
			return 2
		}
		data, err := io.ReadAll(io.LimitReader(stdin, maxStepEnv+1))
		if err != nil || len(data) > maxStepEnv {
			fmt.Fprintf(stderr, "freeagent-vm %s exec: read the environment from stdin: %v (at most %d bytes)\n", AsBuildUserCommand, err, maxStepEnv)
			return 1
		}
		var env []string
		for kv := range strings.SplitSeq(strings.TrimSuffix(string(data), "\x00"), "\x00") {
			if kv != "" {
				env = append(env, kv)
			}
		}
		// stdin is at its end now: the step reads nothing from it, as
		// from /dev/null.
		err = execWithUmask(args[1], args[2:], env, buildUmask)
		fmt.Fprintf(stderr, "freeagent-vm %s exec %s: %v\n", AsBuildUserCommand, args[1], err)
		return 127
	}
	fmt.Fprintf(stderr, "freeagent-vm %s: unknown subcommand %q\n", AsBuildUserCommand, args[0])
	return 2
}
