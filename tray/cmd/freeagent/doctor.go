package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/freeagent-build/freeagent/agent/cache"
	"github.com/freeagent-build/freeagent/agent/hostcheck"
	"github.com/freeagent-build/freeagent/agent/secrets"
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
