// Command freeagent-vm runs inside each build VM: it reads the build's
// configuration from the host's shared folder, builds, streams the log to
// the controller and reports back through files in that folder.
//
//	freeagent-vm [--shared-dir DIR] [--build-timeout 2h] [--wait-timeout 5m] …
//
// Every flag has an environment variable (FREEAGENT_SHARED_DIR, …); see
// --help. Exit status: 0 after build-complete, 1 after build-error or when
// no build configuration appeared, 2 for bad usage.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/freeagent-build/freeagent/internal/toolchain"
	"github.com/freeagent-build/freeagent/vmbootstrap"
)

func main() {
	os.Exit(run())
}

func run() int {
	// sudo runs this program as the build user to start each build
	// command (see vmbootstrap.AsBuildUser).
	if len(os.Args) > 1 && os.Args[1] == vmbootstrap.AsBuildUserCommand {
		return vmbootstrap.AsBuildUser(os.Args[2:], os.Stdin, os.Stderr)
	}
	// scripts/build-vm-template.sh asks the template's build tools once,
	// in the guest's login shell, for workers to advertise.
	if len(os.Args) == 2 && os.Args[1] == toolsCommand {
		return printTools(os.Stdout)
	}
	cfg, err := vmbootstrap.ParseConfig(os.Args[1:], os.Getenv, os.Stderr)
	if errors.Is(err, vmbootstrap.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "freeagent-vm: %v\n", err)
		return 2
	}
	log := logrus.New()
	log.SetOutput(os.Stderr)
	log.SetFormatter(&logrus.TextFormatter{FullTimestamp: true, TimestampFormat: "2006-01-02T15:04:05.000Z07:00"})
	level, err := logrus.ParseLevel(cfg.LogLevel)
	if err != nil {
		fmt.Fprintf(os.Stderr, "freeagent-vm: --log-level: %v\n", err)
		return 2
	}
	log.SetLevel(level)

	// The first SIGTERM/SIGINT cancels the build (its steps get SIGTERM,
	// then SIGKILL after the grace period) and still reports build-error;
	// later ones are ignored so that report can be written.
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		first := true
		for sig := range sigs {
			if first {
				log.WithField("signal", sig.String()).Warn("stopping the build")
				cancel(fmt.Errorf("%w (%s)", vmbootstrap.ErrSignalled, sig))
				first = false
				continue
			}
			log.WithField("signal", sig.String()).Warn("already stopping")
		}
	}()

	b := &vmbootstrap.Bootstrap{Config: cfg, Log: log, Version: version()}
	code := b.Run(ctx)
	log.WithField("exit_code", code).Debug("exiting")
	return code
}

func version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := info.Main.Version
	for _, s := range info.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			if v == "" || v == "(devel)" {
				return s.Value[:12]
			}
		}
	}
	if v == "" {
		return "unknown"
	}
	return v
}

// toolsCommand prints the machine's build tools as JSON (tool → versions,
// newest first): the "tools" of the template's marker.
const toolsCommand = "tools"

func printTools(w io.Writer) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := json.NewEncoder(w).Encode(toolchain.Probe(ctx, os.Environ())); err != nil {
		fmt.Fprintf(os.Stderr, "freeagent-vm: %v\n", err)
		return 1
	}
	return 0
}
