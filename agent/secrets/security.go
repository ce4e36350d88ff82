package secrets

import (
	"bytes"
	"errors"
	"fmt"
	"os/exec"
	"strings"
)

// SecurityStore keeps secrets in the login Keychain through the
// /usr/bin/security tool: the Keychain path for binaries built without cgo.
// Secrets go to security on standard input (-w with no value makes it
// prompt, and with no controlling terminal the prompt reads stdin), never
// on its command line, where any process could read them.
type SecurityStore struct {
	Tool    string // path of the security tool; "" → /usr/bin/security
	Service string // "" → Service
}

func (s *SecurityStore) tool() string {
	if s.Tool == "" {
		return "/usr/bin/security"
	}
	return s.Tool
}

func (s *SecurityStore) service() string {
	if s.Service == "" {
		return Service
	}
	return s.Service
}

// Where implements Store.
func (s *SecurityStore) Where() string { return "the macOS login Keychain" }

// command is the tool with args, stdin as its standard input, and no
// controlling terminal: security reads a -w password from /dev/tty when it
// can open it (a `freeagent setup` typed in Terminal, say), and would wait
// there for someone to type the secret instead of reading the stdin it was
// given.
func (s *SecurityStore) command(stdin string, args ...string) *exec.Cmd {
	cmd := exec.Command(s.tool(), args...)
	cmd.Stdin = strings.NewReader(stdin)
	withoutTerminal(cmd)
	return cmd
}

// run calls the tool; op says what for, in error messages ("read").
func (s *SecurityStore) run(op, stdin string, args ...string) (string, error) {
	cmd := s.command(stdin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err == nil {
		return out.String(), nil
	}
	msg := strings.TrimSpace(errb.String())
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code := exit.ExitCode()
		if exitStatusIs(code)(errSecItemNotFound) {
			return "", ErrNotFound
		}
		if derr := deniedError(op, msg, exitStatusIs(code)); derr != nil {
			return "", derr
		}
	}
	return "", fmt.Errorf("could not %s the Free Agent credentials with %s %s: %w: %s", op, s.tool(), args[0], err, msg)
}

// Get implements Store.
func (s *SecurityStore) Get(key string) (string, error) {
	out, err := s.run("read", "", "find-generic-password", "-s", s.service(), "-a", key, "-w")
	if err != nil {
		return "", err
	}
	return strings.TrimSuffix(out, "\n"), nil
}

// Set implements Store. -U updates an existing item; the password is read
// from standard input (typed twice, as security's prompt asks). The item goes
// to the login keychain, as the cgo build's does (see the package comment).
func (s *SecurityStore) Set(key, value string) error {
	_, err := s.run("store", value+"\n"+value+"\n", "add-generic-password", "-U", "-s", s.service(), "-a", key, "-l", "Free Agent worker "+key, "-w")
	return err
}

// Delete implements Store; deleting a missing item is not an error.
func (s *SecurityStore) Delete(key string) error {
	_, err := s.run("delete", "", "delete-generic-password", "-s", s.service(), "-a", key)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	return err
}
