package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/freeagent-build/freeagent/api"
)

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

func (l *stringList) Set(v string) error {
	*l = append(*l, v)
	return nil
}

// cmdPools says which pools are trusted with credentialed builds and which
// may run them on local-driver workers.
func cmdPools(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usageError{errors.New("pools needs a subcommand: list, set or delete")}
	}
	sub, args := args[0], args[1:]
	var trusted, allowLocal, asJSON bool
	cfg, fs, err := parseConfigWith("pools "+sub, args, stderr, false, func(fs *flag.FlagSet) {
		if sub == "set" {
			fs.BoolVar(&trusted, "trusted", false, "the pool's workers may run builds carrying signing credentials or sensitive/secret variables")
			fs.BoolVar(&allowLocal, "allow-local", false, "those builds may also run on the pool's local-driver workers (no VM between the build and the host)")
		}
		fs.BoolVar(&asJSON, "json", false, "print JSON")
	})
	if err != nil {
		return err
	}
	switch sub {
	case "list":
	case "set", "delete":
		if fs.NArg() != 1 {
			return usageError{fmt.Errorf("pools %s needs the pool's NAME", sub)}
		}
		if allowLocal && !trusted {
			return usageError{errors.New("--allow-local needs --trusted: only a trusted pool runs credentialed builds")}
		}
	default:
		return usageError{fmt.Errorf("unknown pools subcommand %q: use list, set or delete", sub)}
	}
	st, done, err := openStore(ctx, cfg, stderr)
	if err != nil {
		return err
	}
	defer done()
	switch sub {
	case "list":
		pools, err := st.ListPools(ctx)
		if err != nil {
			return err
		}
		if asJSON {
			return json.NewEncoder(stdout).Encode(api.PoolList{Pools: pools})
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "POOL\tTRUSTED\tALLOW LOCAL\tONLINE WORKERS")
		for _, p := range pools {
			fmt.Fprintf(tw, "%s\t%t\t%t\t%d\n", p.Name, p.Trusted, p.AllowLocal, p.OnlineWorkers)
		}
		return tw.Flush()
	case "set":
		p := api.Pool{Name: fs.Arg(0), Trusted: trusted, AllowLocal: allowLocal}
		if err := st.SetPool(ctx, p); err != nil {
			return err
		}
		if p.Workers, err = st.PoolWorkers(ctx, p.Name); err != nil {
			return err
		}
		if asJSON {
			return json.NewEncoder(stdout).Encode(p)
		}
		fmt.Fprintf(stdout, "pool %s: trusted %t, credentialed builds on local-driver workers %t\n", p.Name, p.Trusted, p.AllowLocal)
		printPoolWorkers(stdout, p)
	case "delete":
		if err := st.DeletePool(ctx, fs.Arg(0)); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "pool %s is no longer trusted\n", fs.Arg(0))
	}
	return nil
}

// printPoolWorkers shows an admin who trusts pool p which of its workers
// the trust reaches: those whose key may place them there. The others are
// named with the command that admits them.
func printPoolWorkers(w io.Writer, p api.Pool) {
	if !p.Trusted {
		return
	}
	if len(p.Workers) == 0 {
		fmt.Fprintf(w, "no worker is registered in pool %s yet; a worker key bound to it registers there (freeagent-controller keys bind KEY --pool %s)\n", p.Name, p.Name)
		return
	}
	fmt.Fprintf(w, "workers registered in pool %s:\n", p.Name)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  WORKER\tID\tKEY\tSTATUS\tCREDENTIALED BUILDS")
	for _, wk := range p.Workers {
		verdict := "yes"
		if !wk.PoolAdmitted {
			verdict = fmt.Sprintf("no: its key is not bound to the pool; admit it with `freeagent-controller keys bind %s --pool %s`", wk.KeyID, p.Name)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", wk.Name, wk.ID, wk.KeyID, wk.Status, verdict)
	}
	tw.Flush()
}

// cmdProjects sets the pools a project's builds may use, or its cache
// domain.
func cmdProjects(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "cache-domain" {
		return cmdProjectCacheDomain(ctx, args[1:], stdout, stderr)
	}
	if len(args) == 0 || args[0] != "pools" {
		return usageError{errors.New("projects needs a subcommand: pools PROJECT [POOL]..., or cache-domain PROJECT [one|split]")}
	}
	var asJSON bool
	cfg, fs, err := parseConfigWith("projects pools", args[1:], stderr, false, func(fs *flag.FlagSet) {
		fs.BoolVar(&asJSON, "json", false, "print JSON")
	})
	if err != nil {
		return err
	}
	if fs.NArg() < 1 {
		return usageError{errors.New("projects pools needs the PROJECT, then its pools (none: print them; --any: any pool)")}
	}
	st, done, err := openStore(ctx, cfg, stderr)
	if err != nil {
		return err
	}
	defer done()
	project, pools := fs.Arg(0), fs.Args()[1:]
	if len(pools) == 1 && pools[0] == "any" {
		pools = []string{}
	}
	if len(pools) > 0 || fs.NArg() == 2 {
		if err := st.SetProjectPools(ctx, project, pools); err != nil {
			return err
		}
	}
	got, err := st.ProjectPools(ctx, project)
	if err != nil {
		return err
	}
	if asJSON {
		return json.NewEncoder(stdout).Encode(api.ProjectPools{Project: project, Pools: got})
	}
	if len(got) == 0 {
		fmt.Fprintf(stdout, "project %s may use any pool\n", project)
		return nil
	}
	fmt.Fprintf(stdout, "project %s may use pools %s\n", project, strings.Join(got, ", "))
	return nil
}

// cmdProjectCacheDomain prints or sets whether a project's builds are one
// cache domain: "one" lets a build with secrets restore the caches a
// build without them saved; "split" (the default) keeps them apart.
func cmdProjectCacheDomain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, fs, err := parseConfigWith("projects cache-domain", args, stderr, false, func(*flag.FlagSet) {})
	if err != nil {
		return err
	}
	if fs.NArg() < 1 || fs.NArg() > 2 || fs.NArg() == 2 && fs.Arg(1) != "one" && fs.Arg(1) != "split" {
		return usageError{errors.New("projects cache-domain needs the PROJECT, then one (all its builds share caches) or split (builds with secrets never restore what builds without them saved); none: print it")}
	}
	st, done, err := openStore(ctx, cfg, stderr)
	if err != nil {
		return err
	}
	defer done()
	project := fs.Arg(0)
	if fs.NArg() == 2 {
		if err := st.SetProjectOneCacheDomain(ctx, project, fs.Arg(1) == "one"); err != nil {
			return err
		}
	}
	one, err := st.ProjectOneCacheDomain(ctx, project)
	if err != nil {
		return err
	}
	if one {
		fmt.Fprintf(stdout, "project %s: one cache domain (every build restores what any build of the project saved)\n", project)
	} else {
		fmt.Fprintf(stdout, "project %s: caches split by environment and secrets (a build with secrets never restores what one without them saved)\n", project)
	}
	return nil
}
