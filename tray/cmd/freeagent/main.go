// Command freeagent is the Free Agent worker. `freeagent run` runs it
// headless; the menu-bar app embeds the same agent.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/sirupsen/logrus"

	"github.com/freeagent-build/freeagent/agent"
	"github.com/freeagent-build/freeagent/agent/hostcheck"
	"github.com/freeagent-build/freeagent/agent/local"
	"github.com/freeagent-build/freeagent/agent/logfile"
	"github.com/freeagent-build/freeagent/agent/power"
	"github.com/freeagent-build/freeagent/agent/secrets"
	"github.com/freeagent-build/freeagent/agent/tart"
	"github.com/freeagent-build/freeagent/tray/conffile"
)

const usage = `freeagent — turn this Mac into a Free Agent build worker

Usage:
  freeagent app   [flags]   the menu-bar app with the worker inside (what FreeAgent.app runs when
                            opened; Quit drains: running builds finish, a second Quit hands them back)
  freeagent run   [flags]   run the worker headless (Ctrl-C drains: running builds finish first;
                            a second Ctrl-C hands them back; a third exits at once)
  freeagent setup [flags]   store the controller URL and API key (the key is read from stdin)
  freeagent service install|uninstall|status   start at login (macOS LaunchAgent)
  freeagent doctor [--json] [--launchd]
                            check this host (Tart, VM template, disk, VM limit, DHCP lease time,
                            controller, key)
                            and print the fix for each problem; exit status 1 when a check fails;
                            --launchd runs the checks as launchd runs the login item (macOS grants
                            the Local Network permission per app: Terminal's is not the worker's)
  freeagent pull  [flags]   pull the remote VM template again, to follow a moved tag (builds
                            only pull an image that is not on this Mac)

Run "freeagent COMMAND -h" for a command's flags. Every flag can also be set
by the environment variable shown in its help, or as "name = value" in
DATA_DIR/agent.conf; a flag wins over the environment, which wins over the file.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	args = withoutProcessSerialNumber(args)
	if len(args) == 0 && inAppBundle() {
		args = []string{"app"}
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stderr, usage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	var err error
	switch args[0] {
	case "run":
		err = cmdRun(args[1:], stderr)
	case "setup":
		err = cmdSetup(args[1:], stdin, stdout, stderr)
	case "service":
		err = cmdService(args[1:], stdout, stderr)
	case "app":
		err = cmdApp(args[1:], stderr)
	case "doctor":
		err = cmdDoctor(args[1:], stdout, stderr)
	case "pull":
		err = cmdPull(args[1:], stdout, stderr)
	default:
		fmt.Fprintf(stderr, "freeagent: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, new(quietError)):
		return 1
	case errors.As(err, new(usageError)):
		fmt.Fprintf(stderr, "freeagent: %v\n", err)
		return 2
	default:
		fmt.Fprintf(stderr, "freeagent: %v\n", err)
		return 1
	}
}

type usageError struct{ error }

// withoutProcessSerialNumber drops the -psn_<high>_<low> argument that
// macOS's Launch Services still passes to an app opened from Finder on its
// first launch (after the Gatekeeper dialog). It is not ours to parse, and
// taken as a command it would make the app exit with a usage error.
func withoutProcessSerialNumber(args []string) []string {
	var out []string
	for _, a := range args {
		if !isProcessSerialNumber(a) {
			out = append(out, a)
		}
	}
	return out
}

// isProcessSerialNumber reports whether a is "-psn_" followed by two
// decimal numbers joined by "_", e.g. "-psn_0_1234567".
func isProcessSerialNumber(a string) bool {
	rest, ok := strings.CutPrefix(a, "-psn_")
	if !ok {
		return false
	}
	high, low, ok := strings.Cut(rest, "_")
	return ok && isDigits(high) && isDigits(low)
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// quietError ends the command with status 1 without a message: the output
// already says what went wrong (e.g. `doctor --json`, which keeps stderr clean).
type quietError struct{ error }

func cmdSetup(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	cfg, err := loadConfig("setup", args, stderr)
	if err != nil {
		return err
	}
	store := secrets.Open(cfg.DataDir)
	if cfg.ControllerURL != "" {
		if err := conffile.Update(filepath.Join(cfg.DataDir, confName), map[string]string{"controller-url": cfg.ControllerURL}); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "controller URL %s saved in %s\n", cfg.ControllerURL, filepath.Join(cfg.DataDir, confName))
	}
	if cfg.apiKeyStdin {
		key, err := bufio.NewReader(stdin).ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("read the API key from stdin: %w", err)
		}
		key = strings.TrimSpace(key)
		if key == "" {
			return usageError{errors.New("no API key on stdin (pipe it in: freeagent setup --api-key-stdin < key.txt)")}
		}
		if err := store.Set(secrets.KeyAPIKey, key); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "API key saved in %s\n", store.Where())
	}
	return nil
}

func cmdRun(args []string, stderr io.Writer) error {
	cfg, err := loadConfig("run", args, stderr)
	if err != nil {
		return err
	}
	lock, err := lockWorker(cfg.DataDir, "freeagent run")
	if err != nil {
		return err
	}
	defer lock.Release()
	log, closeLog, err := newLogger(cfg, stderr)
	if err != nil {
		return err
	}
	defer closeLog()
	store := secrets.Open(cfg.DataDir)
	if err := cfg.resolveKey(store); err != nil {
		return err
	}
	a, err := newAgent(cfg, store, log)
	if err != nil {
		return err
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 3)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	var signals sync.WaitGroup
	signals.Add(1)
	go func() {
		defer signals.Done()
		if exitNow := handleSignals(ctx, sigs, a, cfg.OnSIGTERM, log); exitNow {
			os.Exit(130)
		}
	}()
	log.WithFields(logrus.Fields{"controller": cfg.ControllerURL, "driver": cfg.VMDriver, "max_builds": cfg.MaxBuilds}).Info("worker starting")
	err = a.Run(ctx)
	cancel()
	signals.Wait()
	return err
}

// What `run` does with its first SIGTERM (--on-sigterm).
const (
	onTermDrain    = "drain"
	onTermHandBack = "hand-back"
)

// stoppable is what the signals of `run` act on (*agent.Agent).
type stoppable interface {
	Drain()
	CancelBuilds()
}

// handleSignals acts on run's signals until ctx ends: the first drains
// (or, for a SIGTERM with onTerm hand-back, hands the running builds
// back at once, as launchd allows only seconds at logout), the second
// hands back, the third asks for an exit now (true).
func handleSignals(ctx context.Context, sigs <-chan os.Signal, w stoppable, onTerm string, log logrus.FieldLogger) bool {
	for count := 1; ; count++ {
		var sig os.Signal
		select {
		case <-ctx.Done():
			return false
		case sig = <-sigs:
		}
		switch {
		case count == 1 && !(sig == syscall.SIGTERM && onTerm == onTermHandBack):
			w.Drain()
		case count <= 2:
			w.CancelBuilds()
		default:
			log.Error("third signal: exiting now")
			return true
		}
	}
}

// newLogger logs to w and to DATA_DIR/logs/agent.log (rotated).
func newLogger(cfg *Config, w io.Writer) (*logrus.Logger, func() error, error) {
	log := logrus.New()
	lvl, err := logrus.ParseLevel(cfg.LogLevel)
	if err != nil {
		return nil, nil, usageError{fmt.Errorf("log level %q: use debug, info, warn or error", cfg.LogLevel)}
	}
	log.SetLevel(lvl)
	log.SetFormatter(&logrus.TextFormatter{FullTimestamp: true})
	lf, err := logfile.Open(cfg.logPath(), 10<<20, 5)
	if err != nil {
		return nil, nil, err
	}
	log.SetOutput(io.MultiWriter(w, lf))
	return log, lf.Close, nil
}

// newAgent is the worker for cfg (whose APIKey is already resolved).
func newAgent(cfg *Config, store secrets.Store, log logrus.FieldLogger) (*agent.Agent, error) {
	workerID, err := store.Get(secrets.KeyWorkerID)
	if err != nil && !errors.Is(err, secrets.ErrNotFound) {
		return nil, err
	}
	driver, err := newDriver(cfg, log)
	if err != nil {
		return nil, err
	}
	workDir := filepath.Join(cfg.DataDir, "builds")
	// 0700 even when it exists: the build folders in it are open to every
	// uid (the VM's user need not be ours), so this folder is their lock.
	if err := os.MkdirAll(workDir, 0o700); err != nil {
		return nil, fmt.Errorf("create %s: %w", workDir, err)
	}
	if err := os.Chmod(workDir, 0o700); err != nil {
		return nil, fmt.Errorf("make %s private: %w", workDir, err)
	}
	if w := cfg.insecureWarning(); w != "" {
		log.Warn(w)
	}
	a, err := agent.New(agent.Config{
		ControllerURL:      cfg.ControllerURL,
		APIKey:             cfg.APIKey,
		GuestControllerURL: cfg.guestURL(),
		WorkerID:           workerID,
		Name:               cfg.Name,
		Capabilities:       cfg.capabilities(log),
		MaxBuilds:          cfg.MaxBuilds,
		Resources:          agent.Resources{CPU: cfg.CPU, MemoryMB: cfg.MemoryMB},
		BootstrapBinary:    cfg.Bootstrap,
		WorkDir:            workDir,
		PollWait:           cfg.PollWait,
		BootTimeout:        cfg.BootTimeout,
		BackoffMin:         cfg.BackoffMin,
		MaxBuildTimeout:    cfg.BuildTimeout,
		Awake:              power.ForHost(), // the Mac must not sleep mid-build
		Host:               workerGate(cfg, driver, log),
		HostCheckInterval:  cfg.HostCheck,
		CacheDir:           cfg.cacheDir(),
		CacheMaxBytes:      int64(cfg.CacheGB) << 30,
		WarmSpare:          cfg.WarmSpare,
		SuspendSpares:      cfg.SuspendSpare,
		SpareAnswerTimeout: cfg.SpareAnswerTimeout,
		OnWorkerID: func(id string) {
			if err := store.Set(secrets.KeyWorkerID, id); err != nil {
				log.WithError(err).Warn("could not remember the worker id")
			}
		},
	}, driver, log)
	if err != nil {
		return nil, usageError{err}
	}
	return a, nil
}

func newDriver(cfg *Config, log logrus.FieldLogger) (agent.Driver, error) {
	switch cfg.VMDriver {
	case "tart":
		if cfg.MaxBuilds > agent.MaxMacOSVMs {
			return nil, usageError{fmt.Errorf("--max-builds %d: macOS allows at most %d VMs per host", cfg.MaxBuilds, agent.MaxMacOSVMs)}
		}
		d := cfg.tartDriver(log.WithField("driver", "tart"))
		d.LogDir = filepath.Join(cfg.DataDir, "logs")
		if _, err := cfg.tartPath(); err != nil {
			// Not fatal: the worker stays up (and says why builds fail) until tart is installed.
			log.WithError(err).Warn("tart not found: builds will fail until it is installed (brew install cirruslabs/cli/tart) or --tart names it")
		} else {
			log.WithField("tart", d.Tart).Info("using tart")
		}
		if d.Network == tart.NetworkShared {
			log.Warn("VMs run on Tart's shared network (--vm-network shared): builds can reach this Mac's LAN; install softnet and drop --vm-network shared to isolate them")
			return d, nil
		}
		// Softnet: refuse to run without it rather than fail every build.
		r := hostcheck.Softnet(context.Background(), d)
		if _, err := d.SoftnetPath(); err != nil {
			return nil, fmt.Errorf("%s; fix: %s", r.Message, r.Fix)
		}
		if r.Severity != hostcheck.OK {
			log.WithField("fix", r.Fix).Warn(r.Message)
		}
		allow, err := cfg.softnetAllow(net.LookupIP)
		if err != nil {
			return nil, err
		}
		d.SoftnetAllow = allow
		log.WithFields(logrus.Fields{"softnet": d.Softnet, "allow": strings.Join(allow, ",")}).Info("VMs run on Softnet")
		return d, nil
	case "local":
		log.Warn("the local driver runs builds as plain processes on this machine, with no isolation; use it only for trusted projects")
		return &local.Driver{Root: filepath.Join(cfg.DataDir, "local-vms")}, nil
	}
	return nil, usageError{fmt.Errorf("--vm-driver %q: use tart or local", cfg.VMDriver)}
}
