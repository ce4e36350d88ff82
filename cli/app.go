// Package cli is expo-build, the developers' command line of Free Agent:
// submit an Expo project to a self-hosted controller, follow the build and
// fetch its artifacts. Every call goes through the typed client of
// api. The package has no global state: an App carries its
// standard streams, environment and HTTP client, so tests run it in-process.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/freeagent-build/freeagent/api"
)

// App is one expo-build process.
type App struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Env looks up environment variables (nil: os.Getenv).
	Env func(string) string
	// Whether the standard streams are terminals: prompts need a terminal
	// on standard input; colours and progress bars need one on output.
	StdinTTY, StdoutTTY, StderrTTY bool
	// ReadPassword reads a secret without echo (nil: from the terminal on
	// standard input).
	ReadPassword func(prompt string) (string, error)
	// HTTPClient talks to the controller (nil: one with dial, TLS and
	// header timeouts and no overall timeout, since uploads, downloads and
	// log follows are long).
	HTTPClient *http.Client
	// Retry bounds the retries of network errors.
	Retry RetryPolicy
	// PollInterval paces status --watch and the log follow's polling
	// fallback.
	PollInterval time.Duration
	// StallTimeout ends a download or log stream that receives nothing for
	// this long (it is then resumed). The controller sends a keep-alive on
	// live logs every 15 s.
	StallTimeout time.Duration
	// Version is shown by `version` and in the User-Agent (default: the
	// module version from the build info).
	Version string
}

// New returns an App on the process's real streams and environment.
func New() *App {
	return &App{
		Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Env: os.Getenv,
		StdinTTY: isTerminal(os.Stdin), StdoutTTY: isTerminal(os.Stdout), StderrTTY: isTerminal(os.Stderr),
		Retry: DefaultRetry(), PollInterval: 2 * time.Second, StallTimeout: 60 * time.Second,
	}
}

func (a *App) getenv(k string) string {
	if a.Env == nil {
		return os.Getenv(k)
	}
	return a.Env(k)
}

func (a *App) version() string {
	if a.Version != "" {
		return a.Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

func (a *App) readPassword(prompt string) (string, error) {
	if a.ReadPassword != nil {
		return a.ReadPassword(prompt)
	}
	f, ok := a.Stdin.(*os.File)
	if !ok || !a.StdinTTY {
		return "", errors.New("standard input is not a terminal")
	}
	fmt.Fprint(a.Stderr, prompt)
	defer fmt.Fprintln(a.Stderr)
	return readHidden(f)
}

// command is one subcommand.
type command struct {
	name, args, summary string
	long                string // the help text above the flags
	run                 func(ctx context.Context, inv *invocation, args []string) error
	// renamedTo is the EAS name of a command kept under its old name for
	// one release (it runs as it did, after a note); why says what else
	// changed with the name.
	renamedTo, why string
}

func (a *App) commands() []*command {
	return []*command{
		{name: "build", args: "[path]", summary: "pack the Expo project, build it, wait and download the artifacts (as `eas build`; --no-wait returns once queued)", long: buildHelp, run: a.cmdBuild},
		{name: "build:list", args: "", summary: "list builds, newest first, with EAS's filters", long: buildListHelp, run: a.cmdBuildList},
		{name: "build:view", args: "[id]", summary: "a build's status, queue position, phase, attempts and error (default: the newest build; --watch follows it)", long: buildViewHelp, run: a.cmdBuildView},
		{name: "build:cancel", args: "[id]", summary: "cancel a build (without an id: choose among the running ones)", long: buildCancelHelp, run: a.cmdBuildCancel},
		{name: "build:download", args: "[id]", summary: "download a build's application archive (--all-artifacts: every artifact; resumable, SHA-256 verified)", long: buildDownloadHelp, run: a.cmdBuildDownload},
		{name: "logs", args: "<id>", summary: "a build's log (-f follows it live until the build ends)", long: logsHelp, run: a.cmdLogs},
		{name: "retry", args: "<id>", summary: "queue a finished build again (same source and settings)", long: retryHelp, run: a.cmdRetry},
		{name: "submit", args: "", summary: "send a finished build to its store (Google Play, App Store Connect), as `eas submit`; waits and prints the store's answer", long: submitHelp, run: a.cmdSubmit},
		{name: "env", args: "set|list|delete [NAME]", summary: "the project's environment variables and secrets on the farm", long: envHelp, run: a.cmdEnv},
		{name: "credentials", args: "set|list|delete", summary: "the project's signing credentials kept on the farm", long: credentialsHelp, run: a.cmdCredentials},
		{name: "build:version:get", args: "[path]", summary: "the build version the farm keeps for the app (remote version source)", long: versionGetHelp, run: a.cmdVersionGet},
		{name: "build:version:set", args: "[path]", summary: "set the build version the farm keeps for the app", long: versionSetHelp, run: a.cmdVersionSet},
		{name: "build:version:sync", args: "[path]", summary: "write the farm's build version into a bare app's native files", long: versionSyncHelp, run: a.cmdVersionSync},
		{name: "workers", args: "", summary: "list the workers (needs an admin API key)", long: workersHelp, run: a.cmdWorkers},
		{name: "config", args: "", summary: "show or set the controller URL and API key", long: configHelp, run: a.cmdConfig},
		{name: "version", args: "", summary: "print the version", long: "Prints expo-build's version.", run: a.cmdVersion},

		{name: "status", args: "<id>", long: statusHelp, run: a.cmdStatus, renamedTo: "build:view"},
		{name: "list", args: "", long: listHelp, run: a.cmdList, renamedTo: "build:list", why: "whose --json prints EAS's array of builds"},
		{name: "cancel", args: "<id>", long: cancelHelp, run: a.cmdCancel, renamedTo: "build:cancel"},
		{name: "download", args: "<id>", long: downloadHelp, run: a.cmdDownload, renamedTo: "build:download",
			why: "which downloads the application archive unless --all-artifacts"},
	}
}

// invocation is one run of one command: the global flags and the output.
type invocation struct {
	a             *App
	cmd           *command
	json          bool
	noColor       bool
	controllerURL string
	insecure      bool // --insecure: plain http to another machine allowed
	ui            *ui
	aliases       map[string]string // short flag → long flag, for help
}

// Run runs expo-build with args (without the program name) and returns the
// exit code.
func (a *App) Run(ctx context.Context, args []string) int {
	if a.Stdout == nil {
		a.Stdout = io.Discard
	}
	if a.Stderr == nil {
		a.Stderr = io.Discard
	}
	if a.Stdin == nil {
		a.Stdin = strings.NewReader("")
	}
	inv := &invocation{a: a, aliases: map[string]string{}}
	inv.setupUI(slices.Contains(args, "--json") || slices.Contains(args, "-json"))

	// Global flags may come before the command name.
	var pre []string
	name := ""
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if !strings.HasPrefix(arg, "-") || arg == "-" {
			name, args = arg, append(pre, args[i+1:]...)
			break
		}
		if arg == "-h" || arg == "-help" || arg == "--help" {
			name, args = "help", nil
			break
		}
		pre = append(pre, arg)
		flagName := strings.TrimLeft(arg, "-")
		// --controller-url takes a value, which is not the command name.
		if flagName == "controller-url" && i+1 < len(args) {
			i++
			pre = append(pre, args[i])
		}
	}
	if name == "" {
		if len(pre) > 0 {
			inv.ui.fail(ExitUsage, "no command given", "run `expo-build --help` for the commands")
			return ExitUsage
		}
		// A usage error like any other: the help goes to standard error,
		// so a script's captured output holds no help text.
		fmt.Fprint(a.Stderr, a.help())
		return ExitUsage
	}
	if name == "help" {
		if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
			name, args = args[0], []string{"--help"}
		} else {
			fmt.Fprint(a.Stdout, a.help())
			return ExitOK
		}
	}
	for _, c := range a.commands() {
		if c.name == name {
			inv.cmd = c
		}
	}
	if inv.cmd == nil {
		msg := fmt.Sprintf("unknown command %q", name)
		inv.ui.fail(ExitUsage, msg, "run `expo-build --help` for the commands")
		return ExitUsage
	}
	if c := inv.cmd; c.renamedTo != "" {
		inv.ui.warn("%s", oldNameNote(c.name, c.renamedTo, c.why))
	}
	err := inv.cmd.run(ctx, inv, args)
	if errors.Is(err, errHelpShown) {
		return ExitOK
	}
	if err != nil {
		var ce *cliError
		if ctx.Err() != nil && !errors.As(err, &ce) {
			err = context.Canceled
		}
		code := exitCode(err)
		msg, hint := describe(err, inv.sessionForErrors())
		inv.ui.fail(code, msg, hint)
		return code
	}
	return ExitOK
}

// sessionForErrors is the session the command opened, if any (for the
// controller URL in messages).
func (inv *invocation) sessionForErrors() *session {
	if inv.ui == nil {
		return nil
	}
	return inv.ui.session
}

func (inv *invocation) setupUI(jsonOut bool) {
	a := inv.a
	color := !inv.noColor && a.getenv("NO_COLOR") == "" && a.getenv("TERM") != "dumb"
	sess := (*session)(nil)
	var secrets []string
	if inv.ui != nil {
		sess, secrets = inv.ui.session, inv.ui.secrets
	}
	inv.ui = &ui{out: a.Stdout, err: a.Stderr, json: jsonOut, quiet: jsonOut,
		color: color && a.StdoutTTY, errColor: color && a.StderrTTY, errTTY: a.StderrTTY,
		session: sess, secrets: secrets}
}

var errHelpShown = errors.New("help shown")

// flags returns a flag set for the command with the global flags.
func (inv *invocation) flags() *flag.FlagSet {
	fs := flag.NewFlagSet(inv.cmd.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.BoolVar(&inv.json, "json", false, "machine-readable output on standard output")
	fs.StringVar(&inv.controllerURL, "controller-url", "", "the controller `URL` (overrides EXPO_CONTROLLER_URL and the config file)")
	fs.BoolVar(&inv.noColor, "no-color", false, "no colours (also NO_COLOR=1)")
	fs.BoolVar(&inv.insecure, "insecure", false, "allow a plain http:// controller URL on another machine (also EXPO_BUILD_INSECURE=1); keys and tokens then cross the network unencrypted")
	return fs
}

// alias registers short as another name of the flag long.
func (inv *invocation) alias(fs *flag.FlagSet, short, long string) {
	f := fs.Lookup(long)
	fs.Var(f.Value, short, "")
	inv.aliases[long] = short
}

// parse parses flags anywhere among the arguments and returns the others.
func (inv *invocation) parse(fs *flag.FlagSet, args []string, minArgs, maxArgs int) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fmt.Fprint(inv.a.Stdout, inv.usage(fs))
				return nil, errHelpShown
			}
			inv.setupUI(inv.json)
			return nil, &cliError{code: ExitUsage, msg: err.Error(), hint: fmt.Sprintf("run `expo-build %s --help`", inv.cmd.name)}
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if rest[0] == "--" {
			pos = append(pos, rest[1:]...)
			break
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
	inv.setupUI(inv.json)
	if len(pos) < minArgs || len(pos) > maxArgs {
		want := inv.cmd.args
		if want == "" {
			want = "no arguments"
		}
		return nil, &cliError{code: ExitUsage, msg: fmt.Sprintf("expo-build %s takes %s, got %d argument(s)", inv.cmd.name, want, len(pos)),
			hint: fmt.Sprintf("usage: expo-build %s %s [flags]; run `expo-build %s --help`", inv.cmd.name, inv.cmd.args, inv.cmd.name)}
	}
	return pos, nil
}

// resolveWait settles --wait (default true, as in EAS) and --no-wait
// into *wait.
func resolveWait(fs *flag.FlagSet, wait, noWait *bool) error {
	waitSet := false
	fs.Visit(func(f *flag.Flag) { waitSet = waitSet || f.Name == "wait" })
	if *noWait && waitSet && *wait {
		return usageErr("--wait and --no-wait contradict each other")
	}
	if *noWait {
		*wait = false
	}
	return nil
}

// session opens the config and resolves the controller and credentials.
func (inv *invocation) session() (*session, error) {
	s, err := inv.a.newSession(inv.ui, inv.controllerURL, inv.insecure)
	if err != nil {
		return nil, err
	}
	inv.ui.session = s
	return s, nil
}

// keySession opens the session of a command that needs the API key, and
// its client.
func (inv *invocation) keySession() (*session, *api.Client, error) {
	s, err := inv.session()
	if err != nil {
		return nil, nil, err
	}
	c, err := s.keyClient()
	return s, c, err
}

// buildArg parses a command that takes exactly one build id, then opens the
// session it needs.
func (inv *invocation) buildArg(fs *flag.FlagSet, args []string) (*session, string, error) {
	pos, err := inv.parse(fs, args, 1, 1)
	if err != nil {
		return nil, "", err
	}
	s, err := inv.session()
	if err != nil {
		return nil, "", err
	}
	return s, pos[0], nil
}

func (inv *invocation) usage(fs *flag.FlagSet) string {
	var b strings.Builder
	c := inv.cmd
	fmt.Fprintf(&b, "Usage: expo-build %s", c.name)
	if c.args != "" {
		b.WriteString(" " + c.args)
	}
	b.WriteString(" [flags]\n\n" + strings.TrimSpace(c.long) + "\n")
	global := []string{"json", "controller-url", "no-color", "insecure"}
	var own strings.Builder
	tw := tabwriter.NewWriter(&own, 0, 0, 2, ' ', 0)
	fs.VisitAll(func(f *flag.Flag) {
		if f.Usage == "" || slices.Contains(global, f.Name) {
			return
		}
		writeFlag(tw, f, inv.aliases[f.Name])
	})
	tw.Flush()
	if own.Len() > 0 {
		b.WriteString("\nFlags:\n" + own.String())
	}
	b.WriteString("\nGlobal flags:\n")
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, g := range global {
		writeFlag(tw, fs.Lookup(g), "")
	}
	tw.Flush()
	b.WriteString("\n" + exitCodesHelp + "\n")
	return b.String()
}

func writeFlag(w io.Writer, f *flag.Flag, short string) {
	name, usage := flag.UnquoteUsage(f)
	flagText := "--" + f.Name
	if short != "" {
		flagText = "-" + short + ", " + flagText
	}
	if name != "" {
		flagText += " " + name
	}
	if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" && f.DefValue != "0s" && f.DefValue != "[]" {
		usage += fmt.Sprintf(" (default %s)", f.DefValue)
	}
	fmt.Fprintf(w, "  %s\t%s\n", flagText, usage)
}

func (a *App) help() string {
	var b strings.Builder
	b.WriteString(`expo-build submits Expo / React Native builds to your own Free Agent controller,
follows them and fetches the results.

Usage: expo-build <command> [arguments] [flags]

Commands:
`)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	var renamed []string
	for _, c := range a.commands() {
		if c.renamedTo != "" {
			renamed = append(renamed, c.name+" → "+c.renamedTo)
			continue
		}
		fmt.Fprintf(tw, "  %s %s\t%s\n", c.name, c.args, c.summary)
	}
	tw.Flush()
	b.WriteString("\nRenamed to EAS's names (the old names work until the next release):\n  " + strings.Join(renamed, ", ") + "\n")
	b.WriteString(`
Global flags (every command):
  --json                machine-readable output on standard output; errors become a JSON
                        object on standard error: {"error", "hint", "exit_code"}
  --controller-url URL  the controller (overrides EXPO_CONTROLLER_URL and the config file)
  --no-color            no colours (also NO_COLOR=1); colours only ever go to a terminal
  --insecure            allow a plain http:// controller on another machine (also
                        EXPO_BUILD_INSECURE=1); refused otherwise, since keys, tokens and
                        credentials would cross the network unencrypted

Environment:
  EXPO_CONTROLLER_URL      the controller URL
  EXPO_CONTROLLER_API_KEY  the API key (overrides the config file; keys are never flags)
  EXPO_P12_PASSWORD        password of the --p12 certificate (else a hidden prompt)
  EXPO_BUILD_CONFIG        the config file (default <user config dir>/expo-build/config.json)
  EXPO_BUILD_INSECURE      1: as --insecure
  SSL_CERT_FILE            CA certificates to trust (a controller with a private CA)

Typical use:
  expo-build config --controller-url https://builds.example.com
  expo-build config --api-key-stdin          (paste a developer key)
  expo-build build --platform android --profile production   (waits, then downloads)
  expo-build build -p ios --p12 dist.p12 --provisioning-profile app.mobileprovision --no-wait

`)
	b.WriteString(exitCodesHelp)
	b.WriteString("\n\nRun `expo-build <command> --help` for a command's flags.\n")
	return b.String()
}

func (a *App) cmdVersion(ctx context.Context, inv *invocation, args []string) error {
	fs := inv.flags()
	if _, err := inv.parse(fs, args, 0, 0); err != nil {
		return err
	}
	if inv.json {
		return inv.ui.emit(map[string]string{"version": a.version()})
	}
	inv.ui.printf("expo-build %s\n", a.version())
	return nil
}
