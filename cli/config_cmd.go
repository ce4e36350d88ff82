package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/freeagent-build/freeagent/api"
)

const configHelp = `Shows or changes the CLI's configuration: the controller URL and the API key, kept with
the build tokens of your submits in a file only you can read (mode 0600):
<user config dir>/expo-build/config.json, or EXPO_BUILD_CONFIG.

  expo-build config --controller-url https://builds.example.com
  expo-build config --api-key-stdin        paste the key (hidden on a terminal), or pipe it in
  expo-build config --check                check the controller and the key

EXPO_CONTROLLER_URL and EXPO_CONTROLLER_API_KEY override the file. Secrets are never
printed: the key shows as "set".`

func (a *App) cmdConfig(ctx context.Context, inv *invocation, args []string) error {
	fs := inv.flags()
	keyStdin := fs.Bool("api-key-stdin", false, "read the API key from standard input and store it")
	clearKey := fs.Bool("clear-api-key", false, "remove the stored API key")
	forget := fs.Bool("forget-builds", false, "remove the stored build tokens")
	check := fs.Bool("check", false, "check that the controller answers and accepts the key")
	if _, err := inv.parse(fs, args, 0, 0); err != nil {
		return err
	}
	s, err := inv.session()
	if err != nil {
		return err
	}
	changed := false
	if inv.controllerURL != "" || *keyStdin || *clearKey || *forget {
		var key string
		if *keyStdin {
			if key, err = a.readAPIKey(); err != nil {
				return err
			}
			inv.ui.secrets = append(inv.ui.secrets, key)
			if err := a.vetNewKey(ctx, s, key); err != nil {
				return err
			}
		}
		_, err := updateConfig(s.cfgPath, func(c *Config) error {
			if inv.controllerURL != "" {
				c.ControllerURL = s.baseURL // normalized
			}
			if *keyStdin {
				c.APIKey = key
			}
			if *clearKey {
				c.APIKey = ""
			}
			if *forget {
				c.Builds = nil
				c.PendingSubmits = nil
			}
			return nil
		})
		if err != nil {
			return err
		}
		changed = true
		// Show the new state (what was saved, unless the environment
		// overrides it).
		if s, err = a.newSession(inv.ui, "", inv.insecure); err != nil {
			return err
		}
		if *keyStdin && s.apiKeySource == "EXPO_CONTROLLER_API_KEY" {
			inv.ui.warn("EXPO_CONTROLLER_API_KEY is set and overrides the stored key")
		}
	}
	view := map[string]any{
		"config_file":           s.cfgPath,
		"controller_url":        s.baseURL,
		"controller_url_source": s.baseURLSource,
		"api_key_set":           s.apiKey != "",
		"api_key_source":        s.apiKeySource,
		"build_tokens":          len(s.cfg.Builds),
	}
	var checks map[string]string
	if *check {
		checks = a.checkSetup(ctx, s)
		view["check"] = checks
	}
	if inv.json {
		return inv.ui.emit(view)
	}
	if changed {
		inv.ui.printf("%s Saved %s\n", inv.ui.o(cGreen, "✔"), s.cfgPath)
	}
	orNone := func(v, src string) string {
		if v == "" {
			return inv.ui.o(cYellow, "not set")
		}
		return fmt.Sprintf("%s (from %s)", v, src)
	}
	key := ""
	if s.apiKey != "" {
		key = "set"
	}
	inv.ui.printf("Controller URL  %s\n", orNone(s.baseURL, s.baseURLSource))
	inv.ui.printf("API key         %s\n", orNone(key, s.apiKeySource))
	inv.ui.printf("Config file     %s (%d build tokens)\n", s.cfgPath, len(s.cfg.Builds))
	if checks != nil {
		inv.ui.printf("Controller      %s\n", checks["controller"])
		inv.ui.printf("Key             %s\n", checks["api_key"])
	}
	if s.baseURL == "" {
		inv.ui.info("Set the controller: expo-build config --controller-url https://your-controller")
	} else if s.apiKey == "" {
		inv.ui.info("Store a key: expo-build config --api-key-stdin")
	}
	if checks != nil && checks["ok"] != "true" {
		return &cliError{code: ExitFailed, msg: "the check failed", hint: "see above"}
	}
	return nil
}

// readAPIKey reads the key: a hidden prompt on a terminal, else standard
// input.
func (a *App) readAPIKey() (string, error) {
	var key string
	if a.StdinTTY {
		k, err := a.readPassword("API key: ")
		if err != nil {
			return "", usageErr("read the API key: %v", err)
		}
		key = k
	} else {
		b, err := io.ReadAll(io.LimitReader(a.Stdin, 64<<10))
		if err != nil {
			return "", usageErr("read the API key from standard input: %v", err)
		}
		key = string(b)
	}
	key = strings.TrimSpace(key)
	if key == "" {
		return "", usageErr("no API key on standard input: pipe it in (e.g. `pbpaste | expo-build config --api-key-stdin`) or paste it at the prompt")
	}
	if strings.ContainsAny(key, " \t\r\n") || len(key) > 1024 {
		return "", usageErr("that does not look like one API key (it holds spaces or lines); paste the key alone")
	}
	return key, nil
}

// vetNewKey refuses a key the controller rejects outright (401); an
// unreachable controller only warns.
func (a *App) vetNewKey(ctx context.Context, s *session, key string) error {
	if s.baseURL == "" {
		return nil
	}
	c := s.client(key, "")
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	_, err := c.ListBuilds(cctx, api.ListOptions{Limit: 1})
	switch st := api.StatusOf(err); {
	case err == nil:
	case st == http.StatusUnauthorized:
		return &cliError{code: ExitAuth, msg: "API key rejected (401) by " + s.baseURL, hint: "check that you pasted the whole key and that it was not revoked; nothing was saved"}
	case st == http.StatusForbidden:
		s.ui.warn("the controller accepts this key but its role cannot submit or list builds (a worker key?); saving it anyway")
	default:
		s.ui.warn("could not check the key with %s (%v); saving it anyway", s.baseURL, err)
	}
	return nil
}

// checkSetup tests the controller and the key.
func (a *App) checkSetup(ctx context.Context, s *session) map[string]string {
	out := map[string]string{"ok": "false"}
	if s.baseURL == "" {
		out["controller"] = "not configured"
		out["api_key"] = "not checked"
		return out
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	c := s.client("", "")
	resp, err := rawRequest(ctx, c, http.MethodGet, "/health", nil, nil)
	if err != nil {
		out["controller"] = fmt.Sprintf("unreachable: %v", err)
		out["api_key"] = "not checked"
		return out
	}
	var h api.Health
	json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&h) //nolint:errcheck
	resp.Body.Close()
	out["controller"] = "reachable (" + h.Status + ")"
	if s.apiKey == "" {
		out["api_key"] = "not set"
		return out
	}
	kc := s.client(s.apiKey, "")
	_, err = kc.ListBuilds(ctx, api.ListOptions{Limit: 1})
	switch st := api.StatusOf(err); {
	case err == nil:
		out["ok"] = "true"
		if _, err := kc.ListWorkers(ctx); err == nil {
			out["api_key"] = "accepted (admin)"
		} else {
			out["api_key"] = "accepted (developer)"
		}
	case st == http.StatusUnauthorized:
		out["api_key"] = "rejected (401): " + authHint(st)
	case st == http.StatusForbidden:
		out["api_key"] = "valid, but its role cannot submit or list builds (403): use a developer or admin key"
	default:
		out["api_key"] = fmt.Sprintf("not checked: %v", err)
	}
	return out
}
