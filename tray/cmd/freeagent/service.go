package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/freeagent-build/freeagent/launchd"
)

// appCommand is the subcommand the app bundle runs for the menu-bar app.
const appCommand = "app"

const serviceUsage = `Usage: freeagent service install|uninstall|status [--headless]

  install     start Free Agent at every login (a LaunchAgent in ~/Library/LaunchAgents),
              and start it now; logs go to ~/Library/Logs/FreeAgent
  uninstall   stop it and no longer start it at login
  status      whether it is installed and running

  --headless  install "freeagent run" (no menu bar) instead of the menu-bar app
`

// serviceArgs is what the LaunchAgent runs: the menu-bar app, or `run`,
// whose first SIGTERM then hands builds back, since launchd gives a job
// seconds at logout, restart or shutdown, not the minutes a drain takes.
func serviceArgs(headless bool) []string {
	if headless {
		return []string{"run", "--on-sigterm", onTermHandBack}
	}
	return []string{appCommand}
}

// cmdService manages the per-user LaunchAgent (macOS only: elsewhere the
// launchd package answers that it is unsupported).
func cmdService(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(stderr, serviceUsage)
		if len(args) == 0 {
			return usageError{errors.New("service: say install, uninstall or status")}
		}
		return flag.ErrHelp
	}
	sub := args[0]
	fs := flag.NewFlagSet("freeagent service "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, serviceUsage) }
	headless := fs.Bool("headless", false, `install "freeagent run" instead of the menu-bar app`)
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("service %s: unexpected argument %q", sub, fs.Arg(0))}
	}
	agent, err := launchd.CurrentApp(serviceArgs(*headless)...)
	if err != nil {
		return err
	}
	switch sub {
	case "install":
		if err := agent.Install(); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "installed %s: Free Agent starts at login and is running now; logs in %s\n", agent.PlistPath(), agent.LogDir())
		if *headless {
			// Its Local Network permission is not the shell's.
			fmt.Fprintln(stdout, "check what it reaches as launchd runs it: freeagent doctor --launchd")
		}
	case "uninstall":
		if err := agent.Uninstall(); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "uninstalled: Free Agent no longer starts at login (%s removed)\n", agent.PlistPath())
	case "status":
		st, err := agent.Status()
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s: %s (%s)\n", launchd.HostLabel, st, agent.PlistPath())
	default:
		fmt.Fprint(stderr, serviceUsage)
		return usageError{fmt.Errorf("service: unknown subcommand %q (install, uninstall or status)", sub)}
	}
	return nil
}
