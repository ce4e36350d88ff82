package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/freeagent-build/freeagent/controller/blobs"
	"github.com/freeagent-build/freeagent/controller/gc"
	"github.com/freeagent-build/freeagent/controller/httpapi"
	"github.com/freeagent-build/freeagent/controller/install"
	"github.com/freeagent-build/freeagent/controller/serve"
	"github.com/freeagent-build/freeagent/controller/store"
	"github.com/freeagent-build/freeagent/controller/webhooks"
)

// Config is the controller binary's whole configuration. Each field comes
// from its flag, else its environment variable, else the default.
type Config struct {
	Serve     serve.Config
	LogLevel  string
	LogFormat string
	// webhookAllow is --webhook-allow as given; parsed into Serve.Webhooks.Allow.
	webhookAllow string
	// minFreeDisk is --min-free-disk as given; parsed into Serve.MinFreeDisk.
	minFreeDisk string
}

func parseConfig(cmd string, args []string, stderr io.Writer, serving bool) (*Config, *flag.FlagSet, error) {
	return parseConfigWith(cmd, args, stderr, serving, nil)
}

// parseConfigWith parses the shared flags plus those extra adds.
func parseConfigWith(cmd string, args []string, stderr io.Writer, serving bool, extra func(*flag.FlagSet)) (*Config, *flag.FlagSet, error) {
	cfg := &Config{Serve: serve.Config{Store: store.DefaultConfig(), Limits: httpapi.DefaultLimits()}}
	fs := flag.NewFlagSet("freeagent-controller "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	e := envFlags{fs: fs}
	e.str(&cfg.Serve.DataDir, "data-dir", "FREEAGENT_DATA_DIR", defaultDataDir(), "directory for files, the certificate key and the built-in database")
	e.str(&cfg.Serve.DatabaseURL, "database-url", "DATABASE_URL", "", "PostgreSQL URL; empty runs a built-in cluster under the data directory")
	e.str(&cfg.LogLevel, "log-level", "FREEAGENT_LOG_LEVEL", "info", "debug, info, warn or error")
	e.str(&cfg.LogFormat, "log-format", "FREEAGENT_LOG_FORMAT", "text", "text or json")
	if serving {
		e.str(&cfg.Serve.BlobStore, "blob-store", "FREEAGENT_BLOB_STORE", "", "where build files live: file:///DIR, or s3://BUCKET/PREFIX?endpoint=URL&region=R shared by every replica (credentials from AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or ~/.aws/credentials); empty: the data directory's files/")
		e.str(&cfg.Serve.Listen, "listen", "FREEAGENT_LISTEN", "127.0.0.1:8080", "address to serve HTTP on (host:port)")
		e.str(&cfg.Serve.TLSCert, "tls-cert", "FREEAGENT_TLS_CERT", "", "PEM certificate chain (leaf first): with --tls-key, serve HTTPS instead of HTTP")
		e.str(&cfg.Serve.TLSKey, "tls-key", "FREEAGENT_TLS_KEY", "", "PEM private key of --tls-cert")
		e.dur(&cfg.Serve.Store.LeaseTTL, "lease-ttl", "FREEAGENT_LEASE_TTL", cfg.Serve.Store.LeaseTTL, "a build lease not renewed for this long expires and the build is requeued")
		e.dur(&cfg.Serve.Store.TokenTTL, "token-ttl", "FREEAGENT_TOKEN_TTL", cfg.Serve.Store.TokenTTL, "worker token lifetime")
		e.dur(&cfg.Serve.Store.TokenRotateAfter, "token-rotate-after", "FREEAGENT_TOKEN_ROTATE_AFTER", cfg.Serve.Store.TokenRotateAfter, "a worker token older than this is replaced on its next use")
		e.dur(&cfg.Serve.Store.WorkerOfflineAfter, "worker-offline-after", "FREEAGENT_WORKER_OFFLINE_AFTER", cfg.Serve.Store.WorkerOfflineAfter, "a worker silent for this long is offline and its builds are requeued")
		e.dur(&cfg.Serve.Store.DefaultTimeout, "build-timeout", "FREEAGENT_BUILD_TIMEOUT", cfg.Serve.Store.DefaultTimeout, "default per-build timeout")
		e.dur(&cfg.Serve.Store.BuildTokenTTL, "build-token-ttl", "FREEAGENT_BUILD_TOKEN_TTL", cfg.Serve.Store.BuildTokenTTL, "a build token (the one a submit returns) stops working this long after the submit, or when the key that submitted the build is revoked")
		e.dur(&cfg.Serve.Store.WarmPlacementWait, "warm-placement-wait", "FREEAGENT_WARM_PLACEMENT_WAIT", cfg.Serve.Store.WarmPlacementWait, "a polling worker prefers a queued build whose dependency caches it holds over older ones of the same priority, until the oldest has waited this long")
		e.intv(&cfg.Serve.Store.MaxAttempts, "max-attempts", "FREEAGENT_MAX_ATTEMPTS", cfg.Serve.Store.MaxAttempts, "attempts before a build is dead-lettered (failed, code max_attempts)")
		e.retention(&cfg.Serve.Store.RetainArtifacts, "retain-artifacts", "FREEAGENT_RETAIN_ARTIFACTS", cfg.Serve.Store.RetainArtifacts, "how long after a build ends its artifacts are kept (then deleted; the build stays and says they expired); 0 keeps them forever")
		e.retention(&cfg.Serve.Store.RetainSources, "retain-sources", "FREEAGENT_RETAIN_SOURCES", cfg.Serve.Store.RetainSources, "how long after a build ends its uploaded source is kept: the window in which a retry can re-use it; 0 keeps sources forever")
		e.retention(&cfg.Serve.Store.RetainLogs, "retain-logs", "FREEAGENT_RETAIN_LOGS", cfg.Serve.Store.RetainLogs, "how long after a build ends its log is kept; 0 keeps logs forever")
		e.str(&cfg.minFreeDisk, "min-free-disk", "FREEAGENT_MIN_FREE_DISK", "5GiB", "with the file store, the free space to keep on its disk (a size such as 5GiB, or a share such as 5%); below it submits answer 507 Insufficient Storage; 0 turns the floor off")
		e.dur(&cfg.Serve.GC.Interval, "gc-interval", "FREEAGENT_GC_INTERVAL", gc.DefaultConfig().Interval, "how often expired and orphaned files are deleted (one replica at a time)")
		e.dur(&cfg.Serve.ReaperInterval, "reaper-interval", "FREEAGENT_REAPER_INTERVAL", 5*time.Second, "how often expired leases and silent workers are swept")
		e.str(&cfg.Serve.Name, "name", "FREEAGENT_CONTROLLER_NAME", "", "this replica's name in the controller registry (default: the host name)")
		e.str(&cfg.Serve.AdvertiseURL, "advertise-url", "FREEAGENT_ADVERTISE_URL", "", "URL other replicas and people reach this replica at (default: the listen address)")
		e.dur(&cfg.Serve.ControllerTTL, "controller-ttl", "FREEAGENT_CONTROLLER_TTL", 5*time.Minute, "a replica that stops refreshing its registration expires after this long")
		e.dur(&cfg.Serve.Limits.PollMaxWait, "poll-max-wait", "FREEAGENT_POLL_MAX_WAIT", cfg.Serve.Limits.PollMaxWait, "longest a worker's long poll is held")
		e.int64v(&cfg.Serve.Limits.Source, "max-source-bytes", "FREEAGENT_MAX_SOURCE_BYTES", cfg.Serve.Limits.Source, "largest accepted project, in bytes: both the archive as sent and the total of the files it expands to (a tar.gz of zeros is measured by what it holds)")
		e.int64v(&cfg.Serve.Limits.Artifact, "max-artifact-bytes", "FREEAGENT_MAX_ARTIFACT_BYTES", cfg.Serve.Limits.Artifact, "largest accepted artifact")
		e.intv(&cfg.Serve.Limits.ArtifactsPerBuild, "max-artifacts-per-build", "FREEAGENT_MAX_ARTIFACTS_PER_BUILD", cfg.Serve.Limits.ArtifactsPerBuild, "most artifacts one attempt of a build may upload; 0: no limit")
		e.int64v(&cfg.Serve.Limits.LogTotal, "max-log-bytes", "FREEAGENT_MAX_LOG_BYTES", cfg.Serve.Limits.LogTotal, "largest build log")
		e.rate(&cfg.Serve.Limits.RatePerKey, "rate-per-key", "FREEAGENT_RATE_PER_KEY", cfg.Serve.Limits.RatePerKey, "requests per second one API key may make (bursts of 4 s worth), answered 429 with Retry-After beyond; 0: no limit")
		e.rate(&cfg.Serve.Limits.AuthFailuresPerIP, "auth-failures-per-ip", "FREEAGENT_AUTH_FAILURES_PER_IP", cfg.Serve.Limits.AuthFailuresPerIP, "failed authentications per second a client address may make (after a burst of 20) before it is refused with 429; 0: no limit")
		e.boolv(&cfg.Serve.MetricsPublic, "metrics-public", "FREEAGENT_METRICS_PUBLIC", false, "serve /metrics without an API key (otherwise an admin key: X-API-Key or Authorization: Bearer)")
		e.str(&cfg.Serve.PublicURL, "public-url", "FREEAGENT_PUBLIC_URL", "", "URL phones and browsers reach this controller at, used in install links and QR codes; empty uses each request's host")
		e.dur(&cfg.Serve.LinkTTL, "link-ttl", "FREEAGENT_LINK_TTL", install.DefaultTTL, "how long an install link (and its QR code) works")
		e.str(&cfg.webhookAllow, "webhook-allow", "FREEAGENT_WEBHOOK_ALLOW", "", "comma-separated addresses or CIDR prefixes of non-public webhook targets to allow (loopback, private and link-local addresses are refused otherwise), e.g. 10.1.2.0/24")
		cfg.Serve.CertsKey = os.Getenv("FREEAGENT_CERTS_KEY") // a secret: environment only, never argv
		cfg.Serve.LinkKey = os.Getenv("FREEAGENT_LINK_KEY")
	}
	if extra != nil {
		extra(fs)
	}
	if e.err != nil {
		return nil, nil, usageError{e.err}
	}
	if err := parseInterspersed(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, nil, err
		}
		return nil, nil, usageError{err}
	}
	if u := cfg.Serve.PublicURL; u != "" {
		if p, err := url.Parse(u); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" || p.RawQuery != "" {
			return nil, nil, usageError{fmt.Errorf("--public-url %q: want an absolute http(s) URL such as https://builds.example.com", u)}
		}
	}
	if serving {
		floor, err := blobs.ParseFloor(cfg.minFreeDisk)
		if err != nil {
			return nil, nil, usageError{fmt.Errorf("--min-free-disk %w", err)}
		}
		cfg.Serve.MinFreeDisk = floor
	}
	allow, err := webhooks.ParseAllow(cfg.webhookAllow)
	if err != nil {
		return nil, nil, usageError{fmt.Errorf("--webhook-allow: %w", err)}
	}
	cfg.Serve.Webhooks.Allow = allow
	// On the command line 0 turns a rate limit off; serve reads a zero as
	// "the default" and Off as off.
	for _, r := range []*float64{&cfg.Serve.Limits.RatePerKey, &cfg.Serve.Limits.AuthFailuresPerIP} {
		if *r == 0 {
			*r = httpapi.Off
		}
	}
	// A new worker token may ride on a long poll's answer: it is not taken
	// as lost (and displaced by the previous one) before that answer could arrive.
	cfg.Serve.Store.TokenDeliveryGrace = max(cfg.Serve.Store.TokenDeliveryGrace, cfg.Serve.Limits.PollMaxWait+15*time.Second)
	if (cfg.Serve.TLSCert == "") != (cfg.Serve.TLSKey == "") {
		return nil, nil, usageError{errors.New("--tls-cert and --tls-key (FREEAGENT_TLS_CERT, FREEAGENT_TLS_KEY) go together: give both to serve HTTPS, or neither")}
	}
	if cfg.Serve.DatabaseURL == "" && cfg.Serve.DataDir == "" {
		return nil, nil, usageError{errors.New("set --data-dir (or FREEAGENT_DATA_DIR) or --database-url (DATABASE_URL)")}
	}
	return cfg, fs, nil
}

// envFlags registers flags whose defaults come from environment variables,
// giving flag > environment > default.
type envFlags struct {
	fs  *flag.FlagSet
	err error
}

func (e *envFlags) str(p *string, name, env, def, help string) {
	if v, ok := os.LookupEnv(env); ok {
		def = v
	}
	e.fs.StringVar(p, name, def, help+" (env "+env+")")
}

func (e *envFlags) boolv(p *bool, name, env string, def bool, help string) {
	def = fromEnv(e, env, def, strconv.ParseBool, "true or false (1 or 0)")
	e.fs.BoolVar(p, name, def, help+" (env "+env+")")
}

func (e *envFlags) dur(p *time.Duration, name, env string, def time.Duration, help string) {
	def = fromEnv(e, env, def, func(v string) (time.Duration, error) {
		d, err := time.ParseDuration(v)
		return d, errors.Join(err, positive(d > 0))
	}, "a positive duration such as 90s or 5m")
	e.fs.DurationVar(p, name, def, help+" (env "+env+")")
}

// retention registers a lifetime: a Go duration (720h) or whole days
// (30d); 0 means forever.
func (e *envFlags) retention(p *time.Duration, name, env string, def time.Duration, help string) {
	def = fromEnv(e, env, def, parseRetention, "a duration such as 30d or 720h, or 0 for forever")
	*p = def
	e.fs.Func(name, fmt.Sprintf("%s (default %s) (env %s)", help, formatRetention(def), env), func(v string) error {
		d, err := parseRetention(v)
		if err != nil {
			return fmt.Errorf("want a duration such as 30d or 720h, or 0 for forever")
		}
		*p = d
		return nil
	})
}

func parseRetention(v string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(v, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("%q is not a whole number of days", v)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%q is not a duration", v)
	}
	return d, nil
}

func formatRetention(d time.Duration) string {
	if d == 0 {
		return "0 (forever)"
	}
	if d%(24*time.Hour) == 0 {
		return strconv.Itoa(int(d/(24*time.Hour))) + "d"
	}
	return d.String()
}

func (e *envFlags) rate(p *float64, name, env string, def float64, help string) {
	def = fromEnv(e, env, def, func(v string) (float64, error) {
		n, err := strconv.ParseFloat(v, 64)
		return n, errors.Join(err, positive(n >= 0))
	}, "a number of requests per second, 0 for no limit")
	e.fs.Float64Var(p, name, def, help+" (env "+env+")")
}

func (e *envFlags) intv(p *int, name, env string, def int, help string) {
	def = fromEnv(e, env, def, func(v string) (int, error) {
		n, err := strconv.Atoi(v)
		return n, errors.Join(err, positive(n > 0))
	}, "a positive whole number")
	e.fs.IntVar(p, name, def, help+" (env "+env+")")
}

func (e *envFlags) int64v(p *int64, name, env string, def int64, help string) {
	def = fromEnv(e, env, def, func(v string) (int64, error) {
		n, err := strconv.ParseInt(v, 10, 64)
		return n, errors.Join(err, positive(n > 0))
	}, "a positive number of bytes")
	e.fs.Int64Var(p, name, def, help+" (env "+env+")")
}

// fromEnv returns env's parsed value, or def when it is unset; a bad value
// is recorded in e.err, naming the variable and what it should be.
func fromEnv[T any](e *envFlags, env string, def T, parse func(string) (T, error), want string) T {
	v, ok := os.LookupEnv(env)
	if !ok {
		return def
	}
	t, err := parse(v)
	if err != nil {
		e.err = errors.Join(e.err, fmt.Errorf("%s=%q: want %s", env, v, want))
		return def
	}
	return t
}

func positive(ok bool) error {
	if ok {
		return nil
	}
	return errors.New("not positive")
}

// defaultDataDir is $XDG_DATA_HOME/freeagent-controller, or its usual place.
func defaultDataDir() string {
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "freeagent-controller")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(home, ".local", "share", "freeagent-controller")
}

// parseInterspersed parses flags wherever they stand among the arguments,
// as the usage writes them ("keys bind ID --project P", "pools set NAME
// --trusted"): the flag package alone stops at the first argument and
// would silently leave the flags after it unset. After "--" everything is
// an argument.
func parseInterspersed(fs *flag.FlagSet, args []string) error {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			positional = append(positional, rest...)
			break
		}
		positional, args = append(positional, rest[0]), rest[1:]
	}
	return fs.Parse(append([]string{"--"}, positional...))
}
