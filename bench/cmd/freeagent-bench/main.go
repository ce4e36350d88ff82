// Command freeagent-bench measures the controller on this machine: full
// build lifecycles per second over HTTP, pickup latency, empty-poll cost,
// a storm of workers sharing one key with and without request budgets,
// what a fleet of hundreds of workers costs,
// claim latency against a million queued builds, memory while a 2 GiB
// artifact streams through, and the Postgres ceiling of the same SQL
// (pgbench). It starts its own durable Postgres and controller and removes
// them afterwards. See package bench.
//
//	go run ./bench/cmd/freeagent-bench [flags]
//
// It exits 0 when every phase ran (figures that miss their targets are
// reported as MISS), 1 on an error and 2 on bad flags.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/freeagent-build/freeagent/bench"
	"github.com/freeagent-build/freeagent/internal/config"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	cfg, asJSON, _, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "freeagent-bench: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := bench.Run(ctx, cfg)
	if rep != nil && (err == nil || len(rep.Summary) > 0) {
		var werr error
		if asJSON {
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			werr = enc.Encode(rep)
		} else {
			werr = rep.WriteText(stdout)
		}
		if werr != nil && err == nil {
			err = werr
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			fmt.Fprintln(stderr, "freeagent-bench: interrupted; everything it started has been stopped and removed")
			return 130
		}
		fmt.Fprintf(stderr, "freeagent-bench: %v\n", err)
		return 1
	}
	return 0
}

// parseFlags reads the command line; it returns the flag set too, for
// tests to list the settings.
func parseFlags(args []string, stderr io.Writer) (bench.Config, bool, *flag.FlagSet, error) {
	fs := flag.NewFlagSet("freeagent-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, "Usage: freeagent-bench [flags]\n\nMeasures the Free Agent controller on this machine (about 3 minutes).\n\nFlags:\n")
		fs.PrintDefaults()
	}
	// --smoke picks the configuration the other flags then adjust, so it is
	// looked for before parsing (and registered only for -h and its
	// syntax).
	cfg := bench.DefaultConfig()
	for _, a := range args {
		if a == "-smoke" || a == "--smoke" || a == "-smoke=true" || a == "--smoke=true" {
			cfg = bench.SmokeConfig()
		}
	}
	o := config.New(fs, nil, config.File{})
	fs.Bool("smoke", false, "a seconds-long run with tiny sizes that only proves the benchmark works (other flags still apply)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	quiet := fs.Bool("quiet", false, "no progress lines on standard error")
	fs.BoolVar(&cfg.Trace, "trace", false, "log completions per second during the lifecycle run")
	o.Duration(&cfg.Duration, "duration", "", cfg.Duration, "measured window of the lifecycle run")
	o.DurationOrZero(&cfg.Warmup, "warmup", "", cfg.Warmup, "load before the lifecycle window opens (0: none)")
	fs.IntVar(&cfg.Workers, "workers", cfg.Workers, "simulated workers W (0: the best of --sweep)")
	fs.IntVar(&cfg.Submitters, "submitters", cfg.Submitters, "submitters S (0: the best of --sweep)")
	fs.IntVar(&cfg.Backlog, "backlog", cfg.Backlog, "most builds submitted but not completed (0: 2×W)")
	sweep := fs.String("sweep", shapes(cfg.Sweep), "W×S shapes tried to pick the load, e.g. 8x2,16x4")
	o.Duration(&cfg.SweepDuration, "sweep-duration", "", cfg.SweepDuration, "measured window of each sweep shape")
	o.Duration(&cfg.PollWait, "poll-wait", "", cfg.PollWait, "long-poll wait of the lifecycle workers")
	fs.IntVar(&cfg.PickupWorkers, "pickup-workers", cfg.PickupWorkers, "idle workers parked in long polls")
	fs.IntVar(&cfg.PickupSamples, "pickup-samples", cfg.PickupSamples, "builds submitted one at a time")
	o.DurationOrZero(&cfg.PickupSpacing, "pickup-spacing", "", cfg.PickupSpacing, "pause between those builds (0: none)")
	fs.IntVar(&cfg.CancelSamples, "cancel-samples", cfg.CancelSamples, "running builds cancelled one at a time")
	fs.IntVar(&cfg.EmptyPollClients, "empty-clients", cfg.EmptyPollClients, "clients polling the empty queue")
	o.Duration(&cfg.EmptyPollDuration, "empty-duration", "", cfg.EmptyPollDuration, "how long they poll")
	fs.IntVar(&cfg.StormWorkers, "storm-workers", cfg.StormWorkers, "workers of the storm, sharing one worker key")
	fs.IntVar(&cfg.StormBuilds, "storm-builds", cfg.StormBuilds, "queued builds the storm's workers drain")
	fs.IntVar(&cfg.StormRounds, "storm-rounds", cfg.StormRounds, "drains without and with the production budgets, each")
	fleetWorkers := fs.String("fleet-workers", ints(cfg.FleetWorkers), "simulated worker counts of the fleet phase")
	o.Duration(&cfg.FleetWindow, "fleet-window", "", cfg.FleetWindow, "measured window of each fleet size")
	o.DurationOrZero(&cfg.FleetWarmup, "fleet-warmup", "", cfg.FleetWarmup, "fleet load before its window opens (workers arrive over one poll wait)")
	o.Duration(&cfg.FleetBuildTime, "fleet-build-time", "", cfg.FleetBuildTime, "mean build time of the fleet (uniform in ½× to 1½×)")
	fs.Float64Var(&cfg.FleetBusyShare, "fleet-busy", cfg.FleetBusyShare, "share of the fleet's workers kept busy")
	o.Size(&cfg.FleetArtifactBytes, "fleet-artifact-size", "", cfg.FleetArtifactBytes, "artifact each fleet build uploads")
	fs.IntVar(&cfg.ClaimSmall, "claim-small", cfg.ClaimSmall, "pending builds for the first claim measurement")
	fs.IntVar(&cfg.ClaimLarge, "claim-large", cfg.ClaimLarge, "pending builds for the second")
	fs.IntVar(&cfg.ClaimSamples, "claim-samples", cfg.ClaimSamples, "claims timed at each size")
	o.Size(&cfg.ArtifactBytes, "artifact-size", "", cfg.ArtifactBytes, "artifact streamed through the controller: bytes, or with a unit (2GiB)")
	o.Size(&cfg.TransferBytes, "transfer-size", "", cfg.TransferBytes, "file moved through the controller and compared with copy + fsync, and with S3: bytes, or with a unit (1GiB)")
	fs.StringVar(&cfg.VersitygwPath, "versitygw", cfg.VersitygwPath, "versitygw binary for the S3 transfer (default: on PATH or in GOPATH/bin; without it that part is skipped)")
	pgClients := fs.String("pgbench-clients", ints(cfg.PgbenchClients), "pgbench client counts to try; the best is the ceiling")
	o.Duration(&cfg.PgbenchDuration, "pgbench-duration", "", cfg.PgbenchDuration, "pgbench -T of each run")
	fs.StringVar(&cfg.PgbenchMode, "pgbench-mode", cfg.PgbenchMode, "pgbench -M: simple, extended or prepared (the controller's driver prepares)")
	fs.StringVar(&cfg.PgbenchPath, "pgbench", cfg.PgbenchPath, "pgbench binary (default: next to the PostgreSQL server binaries)")
	fs.StringVar(&cfg.ControllerBin, "controller-bin", cfg.ControllerBin, "a built freeagent-controller (default: go build it)")
	fs.StringVar(&cfg.BaselineBin, "baseline-bin", "", "another freeagent-controller (an older build, same schema) the fleet phase measures too, alternately with this one, for before/after figures from one run")
	fs.IntVar(&cfg.FleetRounds, "fleet-rounds", cfg.FleetRounds, "with --baseline-bin: windows per worker count against each controller")
	fs.StringVar(&cfg.ControllerTags, "controller-tags", "", "build tags for the controller it builds (freeagent_noaudit: without the audit log, to measure its cost)")
	fs.StringVar(&cfg.TempDir, "tmpdir", cfg.TempDir, "parent of the run's temporary directory (default: $TMPDIR or /tmp)")
	skip := fs.String("skip", "", "comma-separated phases not to run: "+strings.Join(bench.Phases(), ", "))
	if err := fs.Parse(args); err != nil {
		return cfg, false, nil, err
	}
	if fs.NArg() > 0 {
		return cfg, false, nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	var err error
	if cfg.Sweep, err = parseShapes(*sweep); err != nil {
		return cfg, false, nil, err
	}
	if cfg.PgbenchClients, err = parseInts(*pgClients); err != nil {
		return cfg, false, nil, fmt.Errorf("--pgbench-clients: %w", err)
	}
	if cfg.FleetWorkers, err = parseInts(*fleetWorkers); err != nil {
		return cfg, false, nil, fmt.Errorf("--fleet-workers: %w", err)
	}
	if *skip != "" {
		cfg.Skip = strings.Split(*skip, ",")
	}
	if !*quiet {
		cfg.Log = stderr
	}
	return cfg, *asJSON, fs, nil
}

func shapes(ss []bench.Shape) string {
	var parts []string
	for _, s := range ss {
		parts = append(parts, fmt.Sprintf("%dx%d", s.Workers, s.Submitters))
	}
	return strings.Join(parts, ",")
}

func parseShapes(s string) ([]bench.Shape, error) {
	var out []bench.Shape
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		w, sub, ok := strings.Cut(strings.ReplaceAll(part, "×", "x"), "x")
		wn, err1 := strconv.Atoi(w)
		sn, err2 := strconv.Atoi(sub)
		if !ok || err1 != nil || err2 != nil {
			return nil, fmt.Errorf("--sweep: %q is not WxS (workers x submitters)", part)
		}
		out = append(out, bench.Shape{Workers: wn, Submitters: sn})
	}
	return out, nil
}

func ints(ns []int) string {
	var parts []string
	for _, n := range ns {
		parts = append(parts, strconv.Itoa(n))
	}
	return strings.Join(parts, ",")
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil {
			return nil, fmt.Errorf("%q is not a number", part)
		}
		out = append(out, n)
	}
	return out, nil
}
