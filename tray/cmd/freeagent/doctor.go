package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

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
	results := hostcheck.Run(context.Background(), cfg.hostChecks(store))
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
