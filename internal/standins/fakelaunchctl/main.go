// Command fakelaunchctl stands in for macOS's launchctl in tests of what
// runs in a user's launchd session (see package session for the model):
//
//	launchctl asuser UID PROGRAM [ARGS…]  run PROGRAM in UID's session (root only)
//	launchctl manageruid                  print the uid of the caller's session
//
// asuser does not change the user a program runs as, only its session,
// as on macOS: `launchctl asuser UID sudo -u USER …` is how root starts a
// command as USER in USER's session. Unlike the real one, which may exec
// the program, the stand-in waits for it (passing on its signals and its
// exit status, re-raising a signal that killed it), so that it stays an
// ancestor the session can be read from. manageruid of a process with no
// modelled session prints its own uid. Messages for misuse follow the
// real tool's as threads quote them; they were not taken from a Mac.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/freeagent-build/freeagent/internal/standins/fakelaunchctl/session"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "Usage: launchctl <subcommand> ... | help [subcommand]")
		return 64
	}
	switch args[0] {
	case "manageruid":
		uid, err := session.Manager()
		if errors.Is(err, session.ErrNotModelled) {
			uid, err = os.Getuid(), nil
		}
		if err != nil {
			fmt.Fprintf(stderr, "launchctl manageruid: %v\n", err)
			return 1
		}
		fmt.Fprintln(stdout, uid)
		return 0
	case "asuser":
		return asuser(args[1:], stderr)
	}
	fmt.Fprintf(stderr, "Unrecognized subcommand: %s\nUsage: launchctl <subcommand> ... | help [subcommand]\n", args[0])
	return 64
}

func asuser(args []string, stderr io.Writer) int {
	if len(args) < 2 {
		fmt.Fprintln(stderr, "Usage: launchctl asuser <UID> <program> [arguments ...]")
		return 64
	}
	if _, err := strconv.ParseUint(args[0], 10, 32); err != nil {
		fmt.Fprintf(stderr, "Invalid UID: %s\n", args[0])
		return 64
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(stderr, "Could not switch to audit session: 1: Operation not permitted")
		return 1
	}
	cmd := exec.Command(args[1], args[2:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "Could not execute %s: %v\n", args[1], err)
		return 1
	}
	done := make(chan struct{})
	forwarded := make(chan struct{})
	go func() {
		defer close(forwarded)
		for {
			select {
			case s := <-sigs:
				cmd.Process.Signal(s) //nolint:errcheck // it may have exited
			case <-done:
				return
			}
		}
	}()
	err := cmd.Wait()
	close(done)
	<-forwarded
	signal.Stop(sigs)
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		if err != nil {
			fmt.Fprintf(stderr, "launchctl asuser: %v\n", err)
			return 1
		}
		return 0
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		signal.Reset(ws.Signal())
		syscall.Kill(os.Getpid(), ws.Signal()) //nolint:errcheck // then the exit below
		return 128 + int(ws.Signal())
	}
	return ee.ExitCode()
}
