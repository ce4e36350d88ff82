package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/freeagent-build/freeagent/agent/cache"
	"github.com/freeagent-build/freeagent/agent/hostcheck"
	"github.com/freeagent-build/freeagent/agent/secrets"
	"github.com/freeagent-build/freeagent/launchd"
)

// errChecksFailed makes `freeagent doctor` exit 1 once its report is printed.
var errChecksFailed = errors.New("some checks failed; see the fixes above")

// cmdDoctor runs the host checks the menu bar's "needs attention" uses and
// prints each with its fix, as text or JSON.
func cmdDoctor(args []string, stdout, stderr io.Writer) error {
	cfg, err := loadConfig("doctor", args, stderr)
	if err != nil {
		return err
	}
	if cfg.asLaunchAgent {
		return doctorAsLaunchAgent(context.Background(), withoutFlag(args, "launchd"), stdout)
	}
	store := secrets.Open(cfg.DataDir)
	if err := cfg.resolveKey(store); err != nil {
		return err
	}
	results := append(hostcheck.Run(context.Background(), cfg.hostChecks(store)), cfg.cacheCheck())
	if cfg.jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		if err := enc.Encode(map[string]any{"ok": len(hostcheck.Failed(results)) == 0, "checks": results}); err != nil {
			return fmt.Errorf("write the report: %w", err)
		}
	} else {
		hostcheck.WriteText(stdout, results)
	}
	if len(hostcheck.Failed(results)) > 0 {
		if cfg.jsonOut {
			return quietError{errChecksFailed}
		}
		return errChecksFailed
	}
	return nil
}

// cacheCheck reports the dependency caches (read from their directory,
// which the running agent may be writing): their size against the cap and
// how often builds found them warm.
func (c *Config) cacheCheck() hostcheck.Result {
	r := hostcheck.Result{ID: "caches", Severity: hostcheck.OK}
	if c.CacheGB <= 0 {
		r.Message = "dependency caches are off (cache-gb 0): every build installs from scratch"
		return r
	}
	r.Message = "dependency caches: " + cache.Summary(cache.Inspect(c.cacheDir()), int64(c.CacheGB)<<30)
	return r
}

// doctorAsLaunchAgent runs `freeagent doctor args` as a one-shot
// LaunchAgent of this executable in the login item's context
// (launchd.HostAgent.OneShot), prints what it printed and ends as it did.
func doctorAsLaunchAgent(ctx context.Context, args []string, stdout io.Writer) error {
	agent, err := launchd.CurrentApp()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "freeagent-doctor-")
	if err != nil {
		return fmt.Errorf("doctor --launchd: %w", err)
	}
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, "doctor.out")
	job, err := agent.OneShot(fmt.Sprintf("%s.doctor.%d", launchd.HostLabel, os.Getpid()), append([]string{"doctor"}, args...), out)
	if err != nil {
		return fmt.Errorf("doctor --launchd: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	code, err := launchd.RunOnce(ctx, job, dir)
	if err != nil {
		return fmt.Errorf("doctor --launchd: %w", err)
	}
	f, err := os.Open(out)
	if err != nil {
		return fmt.Errorf("doctor --launchd: read what the checks printed: %w", err)
	}
	defer f.Close()
	fmt.Fprintf(stdout, "(checked by launchd's job %s, as the login item %s runs)\n", job.Label, agent.Executable)
	if _, err := io.Copy(stdout, io.LimitReader(f, 1<<20)); err != nil {
		return fmt.Errorf("doctor --launchd: %w", err)
	}
	if code != 0 {
		return quietError{fmt.Errorf("%w (exit status %d)", errChecksFailed, code)}
	}
	return nil
}

// withoutFlag is args without the boolean flag name, in any form the flag
// package accepts (-name, --name, --name=value).
func withoutFlag(args []string, name string) []string {
	var out []string
	for _, a := range args {
		bare := strings.TrimLeft(a, "-")
		if strings.HasPrefix(a, "-") && (bare == name || strings.HasPrefix(bare, name+"=")) {
			continue
		}
		out = append(out, a)
	}
	return out
}
