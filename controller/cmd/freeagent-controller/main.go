// Command freeagent-controller runs the Free Agent controller: the build
// queue, the worker protocol and the developers' API.
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
	"text/tabwriter"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/freeagent-build/freeagent/controller/serve"
	"github.com/freeagent-build/freeagent/controller/store"
)

const usage = `freeagent-controller — the Free Agent build controller

Usage:
  freeagent-controller serve   [flags]   run the controller (HTTP API, queue, reaper)
  freeagent-controller migrate [flags]   apply database migrations and exit
  freeagent-controller keys create --name NAME --role admin|developer|worker [--project P]... [--pool P]... [--max-capacity N] [--json]
  freeagent-controller keys list [--json]
  freeagent-controller keys revoke ID
  freeagent-controller keys bind|unbind ID [--project P]... [--pool P]...
                                       a developer key's projects, a worker key's pools
  freeagent-controller pools list [--json]
  freeagent-controller pools set NAME [--trusted] [--allow-local]
                                       trusted: runs builds with credentials or secrets
  freeagent-controller pools delete NAME
  freeagent-controller projects pools PROJECT [POOL...|any]
                                       the pools a project's builds may use (any: every pool)
  freeagent-controller projects cache-domain PROJECT [one|split]
                                       one: all its builds share dependency caches; split (default):
                                       apart by environment, and builds with secrets from those without
  freeagent-controller events verify [--json]         check the audit log's hash chain
  freeagent-controller events replay --check [--json] rebuild states from the log, compare with the tables
  freeagent-controller backup --to DIR              the database and every build file (with SHA-256) into DIR
  freeagent-controller restore --from DIR           a backup into an empty database and blob store
  freeagent-controller health [--url URL]            exit 0 when the local controller is ready (a container HEALTHCHECK)

With no DATABASE_URL the controller runs its own PostgreSQL cluster under the
data directory (PostgreSQL server binaries must be installed). Every flag can
also be set by the environment variable shown in its help; a flag wins over
the environment, which wins over the default.

Run "freeagent-controller COMMAND -h" for a command's flags.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stderr, usage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch args[0] {
	case "serve":
		err = cmdServe(ctx, args[1:], stderr)
	case "migrate":
		err = cmdMigrate(ctx, args[1:], stdout, stderr)
	case "keys":
		err = cmdKeys(ctx, args[1:], stdout, stderr)
	case "events":
		err = cmdEvents(ctx, args[1:], stdout, stderr)
	case "pools":
		err = cmdPools(ctx, args[1:], stdout, stderr)
	case "projects":
		err = cmdProjects(ctx, args[1:], stdout, stderr)
	case "backup":
		err = cmdBackup(ctx, args[1:], stdout, stderr)
	case "restore":
		err = cmdRestore(ctx, args[1:], stdout, stderr)
	case "health":
		err = cmdHealth(ctx, args[1:], stdout, stderr)
	default:
		fmt.Fprintf(stderr, "freeagent-controller: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	var ue usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(stderr, "freeagent-controller: %v\n", err)
		return 2
	}
	if errors.Is(err, errCheckFailed) {
		return 1 // the findings are already printed
	}
	if err != nil {
		fmt.Fprintf(stderr, "freeagent-controller: %v\n", err)
		return 1
	}
	return 0
}

type usageError struct{ error }

func newLogger(cfg *Config, w io.Writer) (*logrus.Logger, error) {
	log := logrus.New()
	log.SetOutput(w)
	lvl, err := logrus.ParseLevel(cfg.LogLevel)
	if err != nil {
		return nil, usageError{fmt.Errorf("log level %q: use debug, info, warn or error", cfg.LogLevel)}
	}
	log.SetLevel(lvl)
	if cfg.LogFormat == "json" {
		log.SetFormatter(&logrus.JSONFormatter{})
	} else {
		log.SetFormatter(&logrus.TextFormatter{FullTimestamp: true})
	}
	return log, nil
}

func cmdServe(ctx context.Context, args []string, stderr io.Writer) error {
	cfg, _, err := parseConfig("serve", args, stderr, true)
	if err != nil {
		return err
	}
	log, err := newLogger(cfg, stderr)
	if err != nil {
		return err
	}
	c, err := serve.Start(ctx, cfg.Serve, log)
	if err != nil {
		return err
	}
	// Scripts wait for this exact line.
	log.Infof("listening on %s", c.URL)
	select {
	case <-ctx.Done():
	case err := <-c.Done():
		log.WithError(err).Error("HTTP server stopped")
	}
	log.Info("shutting down: answering long polls, waiting for uploads in flight (up to 30 s)")
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return c.Shutdown(sctx)
}

// openStore opens (and migrates) the configured database for one-shot commands.
func openStore(ctx context.Context, cfg *Config, stderr io.Writer) (*store.Store, func(), error) {
	log, err := newLogger(cfg, stderr)
	if err != nil {
		return nil, nil, err
	}
	log.SetLevel(logrus.WarnLevel)
	dsn, cluster, err := serve.OpenDatabase(ctx, cfg.Serve, log)
	if err != nil {
		return nil, nil, err
	}
	closeAll := func() {
		if cluster != nil {
			cluster.Stop() //nolint:errcheck
		}
	}
	st, err := store.Open(ctx, dsn, cfg.Serve.Store)
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	if _, err := st.Migrate(ctx); err != nil {
		st.Close()
		closeAll()
		return nil, nil, err
	}
	return st, func() { st.Close(); closeAll() }, nil
}

func cmdMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, _, err := parseConfig("migrate", args, stderr, false)
	if err != nil {
		return err
	}
	st, done, err := openStore(ctx, cfg, stderr)
	if err != nil {
		return err
	}
	defer done()
	v, err := st.SchemaVersion(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "database schema at version %d\n", v)
	return nil
}

func cmdKeys(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usageError{errors.New("keys needs a subcommand: create, list or revoke")}
	}
	sub, args := args[0], args[1:]
	var name, role string
	var maxCapacity int
	var asJSON bool
	var projects, pools stringList
	cfg, fs, err := parseConfigWith("keys "+sub, args, stderr, false, func(fs *flag.FlagSet) {
		if sub == "create" {
			fs.StringVar(&name, "name", "", "a name for the key (who or what uses it)")
			fs.StringVar(&role, "role", "", "admin, developer or worker")
			fs.IntVar(&maxCapacity, "max-capacity", 0, "for a worker key: the most builds its workers may hold at once (0: no cap)")
		}
		if sub == "create" || sub == "bind" || sub == "unbind" {
			fs.Var(&projects, "project", "for a developer key: a project `NAME` it may use (repeat for several); see README \"Projects and pools\"")
			fs.Var(&pools, "pool", "for a worker key: a pool `NAME` its workers may register in (repeat for several)")
		}
		fs.BoolVar(&asJSON, "json", false, "print JSON")
	})
	if err != nil {
		return err
	}
	switch sub {
	case "create":
		if name == "" || !store.ValidRole(role) {
			return usageError{errors.New("keys create needs --name NAME and --role admin|developer|worker")}
		}
		if maxCapacity < 0 {
			return usageError{errors.New("--max-capacity must be a positive number of builds (or 0 for no cap)")}
		}
		if len(projects) > 0 && role != "developer" || len(pools) > 0 && role != "worker" {
			return usageError{errors.New("--project binds developer keys, --pool worker keys")}
		}
	case "list":
	case "revoke":
		if fs.NArg() != 1 {
			return usageError{errors.New("keys revoke needs the key's ID (see keys list)")}
		}
	case "bind", "unbind":
		if fs.NArg() != 1 || len(projects)+len(pools) == 0 {
			return usageError{fmt.Errorf("keys %s needs the key's ID (see keys list) and at least one --project or --pool", sub)}
		}
	default:
		return usageError{fmt.Errorf("unknown keys subcommand %q: use create, list, revoke, bind or unbind", sub)}
	}
	st, done, err := openStore(ctx, cfg, stderr)
	if err != nil {
		return err
	}
	defer done()
	switch sub {
	case "create":
		// One transaction: a refused binding leaves no orphan key.
		k, secret, err := st.CreateBoundKey(ctx, store.NewKey{Name: name, Role: role, Projects: projects, Pools: pools, MaxCapacity: maxCapacity})
		if err != nil {
			return err
		}
		if asJSON {
			out := map[string]any{"id": k.ID, "name": k.Name, "role": k.Role, "key": secret}
			if k.MaxCapacity != nil {
				out["max_capacity"] = *k.MaxCapacity
			}
			if len(k.Projects) > 0 {
				out["projects"] = k.Projects
			}
			if len(k.Pools) > 0 {
				out["pools"] = k.Pools
			}
			return json.NewEncoder(stdout).Encode(out)
		}
		fmt.Fprintln(stdout, secret)
		fmt.Fprintf(stderr, "created %s key %q (id %s); it is shown only this once\n", k.Role, k.Name, k.ID)
	case "list":
		keys, err := st.ListKeys(ctx)
		if err != nil {
			return err
		}
		if asJSON {
			if keys == nil {
				keys = []store.APIKey{}
			}
			return json.NewEncoder(stdout).Encode(keys)
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tNAME\tROLE\tMAX CAPACITY\tCREATED\tREVOKED\tPROJECTS/POOLS")
		for _, k := range keys {
			revoked, capacity, bound := "-", "-", strings.Join(append(k.Projects, k.Pools...), ",")
			if bound == "" {
				bound = "-"
			}
			if k.RevokedAt != nil {
				revoked = k.RevokedAt.UTC().Format(time.RFC3339)
			}
			if k.MaxCapacity != nil {
				capacity = strconv.Itoa(*k.MaxCapacity)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", k.ID, k.Name, k.Role, capacity, k.CreatedAt.UTC().Format(time.RFC3339), revoked, bound)
		}
		return tw.Flush()
	case "revoke":
		if err := st.RevokeKey(ctx, fs.Arg(0)); err != nil {
			return err
		}
		if asJSON {
			return json.NewEncoder(stdout).Encode(map[string]any{"id": fs.Arg(0), "revoked": true})
		}
		fmt.Fprintf(stdout, "revoked key %s\n", fs.Arg(0))
	case "bind", "unbind":
		change := st.BindKey
		if sub == "unbind" {
			change = st.UnbindKey
		}
		if err := change(ctx, fs.Arg(0), projects, pools); err != nil {
			return err
		}
		if asJSON {
			return json.NewEncoder(stdout).Encode(map[string]any{"id": fs.Arg(0), sub: true, "projects": projects, "pools": pools})
		}
		fmt.Fprintf(stdout, "%s key %s: projects %v, pools %v\n", map[string]string{"bind": "bound", "unbind": "unbound"}[sub], fs.Arg(0), []string(projects), []string(pools))
	}
	return nil
}
