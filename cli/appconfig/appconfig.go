// Package appconfig reads the identity of an Expo app (name, slug,
// version, Android package, iOS bundle identifier, ...) from its app
// config: app.json (or app.config.json) directly, or, for a dynamic
// app.config.js/ts, from the project's own Expo CLI (`expo config --json
// --type public`), run with the build profile's environment so that the
// config sees the variables it will see on the build machine, as EAS does.
package appconfig

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/internal/boundedfile"
)

// Sources of api.App.ConfigSource.
const (
	SourceAppJSON    = "app.json"
	SourceExpoConfig = "expo config"
)

const (
	// maxConfigSize bounds app.json and the output of expo config.
	maxConfigSize = 4 << 20
	// maxStderr is how much of expo config's stderr an error quotes.
	maxStderr = 16 << 10
	// expoConfigTimeout bounds one run of expo config (it loads the
	// config's plugins, which can take a while on a cold cache).
	expoConfigTimeout = 2 * time.Minute
)

// dynamicConfigs are the config files that only JavaScript can evaluate,
// in the order Expo looks for them.
var dynamicConfigs = []string{"app.config.ts", "app.config.js", "app.config.mjs", "app.config.cjs"}

// staticConfigs are the JSON configs, in Expo's order.
var staticConfigs = []string{"app.config.json", "app.json"}

// Read returns the app's identity. env is the environment expo config
// runs with, as exec.Cmd.Env (nil: this process's environment); pass the
// build profile's env on top of the process environment so that
// app.config.js reads what the build will.
func Read(ctx context.Context, appDir string, env []string) (api.App, error) {
	app, err := readConfig(ctx, appDir, env)
	if err != nil {
		return app, err
	}
	// What eas-cli sends as the build's metadata: @expo/config's
	// sdkVersion (the installed expo's major when the config states none)
	// and the installed react-native's version. The VM's frozen-install
	// rule reads them.
	if app.SDKVersion == "" {
		if v := installedVersion(appDir, "expo"); v != "" {
			major, _, _ := strings.Cut(v, ".")
			app.SDKVersion = major + ".0.0"
		}
	}
	app.ReactNativeVersion = installedVersion(appDir, "react-native")
	return app, nil
}

// installedVersion is the version in node_modules/<name>/package.json as
// Node resolves it from appDir (the nearest node_modules up the tree);
// "" when it is not installed or has no version.
func installedVersion(appDir, name string) string {
	dir, err := filepath.Abs(appDir)
	if err != nil {
		return ""
	}
	for {
		data, err := boundedfile.Read(filepath.Join(dir, "node_modules", name, "package.json"), maxConfigSize)
		if err == nil {
			var pkg struct {
				Version string `json:"version"`
			}
			if json.Unmarshal(data, &pkg) != nil {
				return ""
			}
			return pkg.Version
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

func readConfig(ctx context.Context, appDir string, env []string) (api.App, error) {
	for _, name := range dynamicConfigs {
		if _, err := os.Stat(filepath.Join(appDir, name)); err == nil {
			return readDynamic(ctx, appDir, name, env)
		}
	}
	for _, name := range staticConfigs {
		path := filepath.Join(appDir, name)
		data, err := readFile(path)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return api.App{}, err
		}
		return readStatic(appDir, name, data)
	}
	return api.App{}, fmt.Errorf("%s has no app.json or app.config.(ts|js|mjs|cjs|json): is it an Expo project? (run expo-build from the app's directory)", appDir)
}

func readFile(path string) ([]byte, error) {
	data, err := boundedfile.Read(path, maxConfigSize)
	var tooLarge *boundedfile.TooLargeError
	if errors.As(err, &tooLarge) {
		return nil, fmt.Errorf("%s is larger than %d bytes: that is not an app config", path, maxConfigSize)
	}
	return data, err
}

// readStatic reads app.json: Expo's {"expo": {...}}, or the config at
// the root.
func readStatic(appDir, name string, data []byte) (api.App, error) {
	var root map[string]any
	if err := decode(data, &root); err != nil {
		return api.App{}, fmt.Errorf("%s: %w", name, describeJSONError(data, err))
	}
	if root == nil {
		return api.App{}, fmt.Errorf("%s must hold a JSON object ({\"expo\": {...}})", name)
	}
	config, prefix := root, ""
	if expo, ok := root["expo"]; ok {
		m, isObject := expo.(map[string]any)
		if !isObject {
			return api.App{}, fmt.Errorf("%s: expo must be an object", name)
		}
		config, prefix = m, "expo."
	}
	pkg := readPackageJSON(appDir)
	// Expo's defaults (@expo/config ensureConfigHasDefaultValues).
	if _, ok := config["name"]; !ok {
		config["name"] = pkg.name(appDir)
	}
	if _, ok := config["version"]; !ok {
		config["version"] = pkg.version()
	}
	app, err := fromConfig(config, name, prefix)
	if err != nil {
		return api.App{}, err
	}
	app.ConfigSource = SourceAppJSON
	return app, nil
}

type packageJSON struct {
	Name    any `json:"name"`
	Version any `json:"version"`
}

// readPackageJSON reads the app's package.json for Expo's defaults; a
// missing or broken one gives none (expo config would fail on it, and
// the install will).
func readPackageJSON(appDir string) packageJSON {
	var pkg packageJSON
	if data, err := readFile(filepath.Join(appDir, "package.json")); err == nil {
		_ = json.Unmarshal(data, &pkg)
	}
	return pkg
}

func (p packageJSON) name(appDir string) string {
	if s, ok := p.Name.(string); ok {
		return s
	}
	abs, err := filepath.Abs(appDir)
	if err != nil {
		return filepath.Base(appDir)
	}
	return filepath.Base(abs)
}

func (p packageJSON) version() string {
	if s, ok := p.Version.(string); ok {
		return s
	}
	return "1.0.0"
}

func decode(data []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	if err := d.Decode(v); err != nil {
		return err
	}
	if _, err := d.Token(); err != io.EOF {
		return &json.SyntaxError{Offset: d.InputOffset()}
	}
	return nil
}

// describeJSONError adds the line and column to a JSON error.
func describeJSONError(data []byte, err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	var offset int64
	switch {
	case errors.As(err, &se):
		offset = se.Offset
		if se.Error() == "" {
			return fmt.Errorf("invalid JSON at %s: unexpected data after the object", lineCol(data, offset))
		}
	case errors.As(err, &te):
		return fmt.Errorf("must hold a JSON object ({\"expo\": {...}}), not %s", te.Value)
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("invalid JSON: the file ends early (is an } missing?)")
	default:
		return fmt.Errorf("invalid JSON: %w", err)
	}
	return fmt.Errorf("invalid JSON at %s: %s (app.json is plain JSON: no comments or trailing commas)", lineCol(data, offset), se.Error())
}

// lineCol is "line:column" (1-based, characters) of the byte before offset,
// where encoding/json stopped.
func lineCol(data []byte, offset int64) string {
	at := max(0, min(int(offset)-1, len(data)))
	line := bytes.Count(data[:at], []byte("\n")) + 1
	start := bytes.LastIndexByte(data[:at], '\n') + 1
	col := len([]rune(string(data[start:at]))) + 1
	return fmt.Sprintf("line %d, column %d", line, col)
}

// readDynamic evaluates app.config.* with the project's own Expo CLI.
func readDynamic(ctx context.Context, appDir, name string, env []string) (api.App, error) {
	bin, err := findExpoCLI(appDir)
	if err != nil {
		return api.App{}, fmt.Errorf("%s is evaluated by the project's Expo CLI: run npm install (or your package manager) first: %w", name, err)
	}
	ctx, cancel := context.WithTimeout(ctx, expoConfigTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "config", "--json", "--type", "public")
	cmd.Dir = appDir
	cmd.Env = env
	stdout := &capped{limit: maxConfigSize}
	stderr := &tail{limit: maxStderr}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// A config that leaves a process holding the pipes must not hang us.
	cmd.WaitDelay = 5 * time.Second
	runErr := cmd.Run()
	switch {
	case stdout.over:
		return api.App{}, fmt.Errorf("evaluate %s: expo config printed more than %d bytes", name, maxConfigSize)
	case ctx.Err() != nil && runErr != nil:
		return api.App{}, fmt.Errorf("evaluate %s: expo config did not finish within %s: %w", name, expoConfigTimeout, ctx.Err())
	case runErr != nil:
		return api.App{}, fmt.Errorf("evaluate %s with %s config --json --type public: %w%s", name, bin, runErr, stderr.quote())
	}
	config, err := parseConfigOutput(stdout.buf.Bytes())
	if err != nil {
		return api.App{}, fmt.Errorf("evaluate %s: expo config printed no config: %w%s", name, err, stderr.quote())
	}
	app, err := fromConfig(config, name+" (evaluated by expo config)", "")
	if err != nil {
		return api.App{}, err
	}
	app.ConfigSource = SourceExpoConfig
	return app, nil
}

// parseConfigOutput reads the JSON object expo config prints; a line of
// warnings printed before it is skipped.
func parseConfigOutput(out []byte) (map[string]any, error) {
	start := bytes.IndexByte(out, '{')
	if start < 0 {
		return nil, errors.New("no JSON object in its output")
	}
	var config map[string]any
	if err := decode(out[start:], &config); err != nil {
		return nil, describeJSONError(out[start:], err)
	}
	return config, nil
}

// findExpoCLI looks for node_modules/.bin/expo in appDir and its parents
// (a monorepo hoists it to the workspace root).
func findExpoCLI(appDir string) (string, error) {
	dir, err := filepath.Abs(appDir)
	if err != nil {
		return "", fmt.Errorf("find the Expo CLI: %w", err)
	}
	for {
		bin := filepath.Join(dir, "node_modules", ".bin", "expo")
		if st, err := os.Stat(bin); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return bin, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no node_modules/.bin/expo in %s or any directory above it", appDir)
		}
		dir = parent
	}
}

// fromConfig takes the identity out of an Expo config object. where names
// the file for errors; prefix is the path of the object in it ("expo.").
func fromConfig(config map[string]any, where, prefix string) (api.App, error) {
	var problems []string
	str := func(obj map[string]any, path, key string, required bool) string {
		v, ok := obj[key]
		if !ok || v == nil {
			if required {
				problems = append(problems, fmt.Sprintf("%s%s is missing: add it", path, key))
			}
			return ""
		}
		s, ok := v.(string)
		if !ok {
			problems = append(problems, fmt.Sprintf("%s%s must be a string, not %s", path, key, jsonType(v)))
			return ""
		}
		if required && strings.TrimSpace(s) == "" {
			problems = append(problems, fmt.Sprintf("%s%s is empty: give it a value", path, key))
		}
		return s
	}
	section := func(key string) map[string]any {
		v, ok := config[key]
		if !ok || v == nil {
			return nil
		}
		m, ok := v.(map[string]any)
		if !ok {
			problems = append(problems, fmt.Sprintf("%s%s must be an object, not %s", prefix, key, jsonType(v)))
		}
		return m
	}
	app := api.App{
		Name:       str(config, prefix, "name", true),
		Slug:       str(config, prefix, "slug", true),
		Version:    str(config, prefix, "version", false),
		Owner:      str(config, prefix, "owner", false),
		SDKVersion: str(config, prefix, "sdkVersion", false),
	}
	if android := section("android"); android != nil {
		path := prefix + "android."
		app.AndroidPackage = str(android, path, "package", false)
		if v, ok := android["versionCode"]; ok && v != nil {
			n, isNumber := v.(json.Number)
			code, err := n.Int64()
			if !isNumber || err != nil || code < 1 || code > math.MaxInt32 {
				problems = append(problems, fmt.Sprintf("%sversionCode must be a whole number from 1 to 2100000000, not %v", path, v))
			} else {
				app.AndroidVersionCode = int(code)
			}
		}
	}
	if ios := section("ios"); ios != nil {
		path := prefix + "ios."
		app.IOSBundleID = str(ios, path, "bundleIdentifier", false)
		app.IOSBuildNumber = str(ios, path, "buildNumber", false)
	}
	app.IOSAppExtensions = appExtensions(config, prefix, &problems)
	if len(problems) > 0 {
		return api.App{}, fmt.Errorf("%s: %s", where, strings.Join(problems, "; "))
	}
	return app, nil
}

// appExtensions reads extra.eas.build.experimental.ios.appExtensions, the
// app extensions of a managed project, validated as eas-cli does: each
// needs targetName and bundleIdentifier, may have parentBundleIdentifier
// and entitlements, and nothing else.
func appExtensions(config map[string]any, prefix string, problems *[]string) []api.IOSTarget {
	var v any = config
	at := strings.TrimSuffix(prefix, ".")
	for _, key := range []string{"extra", "eas", "build", "experimental", "ios", "appExtensions"} {
		m, ok := v.(map[string]any)
		if !ok {
			if v != nil {
				*problems = append(*problems, fmt.Sprintf("%s must be an object, not %s", at, jsonType(v)))
			}
			return nil
		}
		if v, ok = m[key]; !ok || v == nil {
			return nil
		}
		at = strings.TrimPrefix(at+"."+key, ".")
	}
	list, ok := v.([]any)
	if !ok {
		*problems = append(*problems, fmt.Sprintf("%s must be an array of {targetName, bundleIdentifier}, not %s", at, jsonType(v)))
		return nil
	}
	var out []api.IOSTarget
	for i, item := range list {
		where := fmt.Sprintf("%s[%d]", at, i)
		m, ok := item.(map[string]any)
		if !ok {
			*problems = append(*problems, fmt.Sprintf("%s must be an object with targetName and bundleIdentifier, not %s", where, jsonType(item)))
			continue
		}
		var t api.IOSTarget
		for key, val := range m {
			switch key {
			case "targetName", "bundleIdentifier", "parentBundleIdentifier":
				s, ok := val.(string)
				if !ok {
					*problems = append(*problems, fmt.Sprintf("%s.%s must be a string, not %s", where, key, jsonType(val)))
				}
				switch key {
				case "targetName":
					t.Name = s
				case "bundleIdentifier":
					t.BundleID = s
				}
			case "entitlements":
				if _, ok := val.(map[string]any); !ok {
					*problems = append(*problems, fmt.Sprintf("%s.entitlements must be an object, not %s", where, jsonType(val)))
				}
			default:
				*problems = append(*problems, fmt.Sprintf("%s.%s is not allowed (allowed: targetName, bundleIdentifier, parentBundleIdentifier, entitlements)", where, key))
			}
		}
		if t.Name == "" || t.BundleID == "" {
			*problems = append(*problems, fmt.Sprintf("%s needs targetName and bundleIdentifier", where))
			continue
		}
		out = append(out, t)
	}
	return out
}

func jsonType(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return "null"
}

// capped keeps at most limit bytes and fails the write beyond them, which
// stops the copy from the child (it then gets EPIPE).
type capped struct {
	buf   bytes.Buffer
	limit int
	over  bool
}

func (c *capped) Write(p []byte) (int, error) {
	if c.buf.Len()+len(p) > c.limit {
		c.over = true
		return 0, errors.New("output too large")
	}
	return c.buf.Write(p)
}

// tail keeps the last limit bytes written to it.
type tail struct {
	buf   []byte
	limit int
}

func (t *tail) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.limit {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.limit:]...)
	}
	return len(p), nil
}

// quote is the captured stderr, for an error message.
func (t *tail) quote() string {
	s := strings.TrimSpace(string(t.buf))
	if s == "" {
		return ""
	}
	return "\n" + s
}
