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
// prompt), never on its command line, where any process could read them.
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

func (s *SecurityStore) run(stdin string, args ...string) (string, error) {
	cmd := exec.Command(s.tool(), args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == 44 { // errSecItemNotFound
		return "", ErrNotFound
	}
	if err != nil {
		msg := strings.TrimSpace(errb.String())
		if strings.Contains(msg, "User interaction is not allowed") || strings.Contains(msg, "authorization") {
			return "", fmt.Errorf("the Keychain refused access (%s): unlock the login keychain or allow FreeAgent in Keychain Access", msg)
		}
		return "", fmt.Errorf("security %s: %v: %s", args[0], err, msg)
	}
	return out.String(), nil
}

// Get implements Store.
func (s *SecurityStore) Get(key string) (string, error) {
	out, err := s.run("", "find-generic-password", "-s", s.service(), "-a", key, "-w")
	if err != nil {
		return "", err
	}
	return strings.TrimSuffix(out, "\n"), nil
}

// Set implements Store. -U updates an existing item; the password is read
// from standard input (typed twice, as security's prompt asks).
func (s *SecurityStore) Set(key, value string) error {
	_, err := s.run(value+"\n"+value+"\n", "add-generic-password", "-U", "-s", s.service(), "-a", key, "-w")
	return err
}

// Delete implements Store; deleting a missing item is not an error.
func (s *SecurityStore) Delete(key string) error {
	_, err := s.run("", "delete-generic-password", "-s", s.service(), "-a", key)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	return err
}
