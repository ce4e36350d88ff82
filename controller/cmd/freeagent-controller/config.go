package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/freeagent-build/freeagent/controller/blobs"
	"github.com/freeagent-build/freeagent/controller/gc"
	"github.com/freeagent-build/freeagent/controller/httpapi"
	"github.com/freeagent-build/freeagent/controller/install"
	"github.com/freeagent-build/freeagent/controller/serve"
	"github.com/freeagent-build/freeagent/controller/store"
	"github.com/freeagent-build/freeagent/internal/config"
)

// defaultListen is where serve listens without --listen (FREEAGENT_LISTEN),
// and so where health asks by default.
const defaultListen = "127.0.0.1:8080"

// Config is the controller binary's whole configuration. Each field comes
// from its flag, else its environment variable, else the default
// (package internal/config: one syntax for durations and sizes).
type Config struct {
	Serve     serve.Config
	LogLevel  string
	LogFormat string
	// webhookAllow is --webhook-allow as given; parsed into Serve.Webhooks.Allow.
	webhookAllow string
	// trustedProxies is --trusted-proxies as given; parsed into Serve.TrustedProxies.
	trustedProxies string
}

func parseConfig(cmd string, args []string, stderr io.Writer, serving bool) (*Config, *flag.FlagSet, error) {
	return parseConfigWith(cmd, args, stderr, serving, nil)
}

// parseConfigWith parses the shared flags plus those extra adds.
func parseConfigWith(cmd string, args []string, stderr io.Writer, serving bool, extra func(*flag.FlagSet)) (*Config, *flag.FlagSet, error) {
	return parseConfigEnv(cmd, args, os.LookupEnv, stderr, serving, extra)
}

// parseConfigEnv is parseConfigWith reading the environment through lookupEnv.
func parseConfigEnv(cmd string, args []string, lookupEnv func(string) (string, bool), stderr io.Writer, serving bool, extra func(*flag.FlagSet)) (*Config, *flag.FlagSet, error) {
	cfg := &Config{Serve: serve.Config{Store: store.DefaultConfig(), Limits: httpapi.DefaultLimits()}}
	fs := flag.NewFlagSet("freeagent-controller "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	e := config.New(fs, lookupEnv, config.File{})
	e.String(&cfg.Serve.DataDir, "data-dir", "FREEAGENT_DATA_DIR", defaultDataDir(lookupEnv), "directory for files, the certificate key and the built-in database")
	e.String(&cfg.Serve.DatabaseURL, "database-url", "DATABASE_URL", "", "PostgreSQL URL; empty runs a built-in cluster under the data directory")
	e.String(&cfg.LogLevel, "log-level", "FREEAGENT_LOG_LEVEL", "info", "debug, info, warn or error")
	e.String(&cfg.LogFormat, "log-format", "FREEAGENT_LOG_FORMAT", "text", "text or json")
	if serving {
		st, lim := &cfg.Serve.Store, &cfg.Serve.Limits
		e.String(&cfg.Serve.BlobStore, "blob-store", "FREEAGENT_BLOB_STORE", "", "where build files live: file:///DIR, or s3://BUCKET/PREFIX?endpoint=URL&region=R shared by every replica (credentials from AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or ~/.aws/credentials); empty: the data directory's files/")
		e.String(&cfg.Serve.Listen, "listen", "FREEAGENT_LISTEN", defaultListen, "address to serve HTTP on (host:port)")
		e.String(&cfg.Serve.TLSCert, "tls-cert", "FREEAGENT_TLS_CERT", "", "PEM certificate chain (leaf first): with --tls-key, serve HTTPS instead of HTTP")
		e.String(&cfg.Serve.TLSKey, "tls-key", "FREEAGENT_TLS_KEY", "", "PEM private key of --tls-cert")
		e.Duration(&st.LeaseTTL, "lease-ttl", "FREEAGENT_LEASE_TTL", st.LeaseTTL, "a build lease not renewed for this long expires and the build is requeued")
		e.Duration(&st.TokenTTL, "token-ttl", "FREEAGENT_TOKEN_TTL", st.TokenTTL, "worker token lifetime")
		e.Duration(&st.TokenRotateAfter, "token-rotate-after", "FREEAGENT_TOKEN_ROTATE_AFTER", st.TokenRotateAfter, "a worker token older than this is replaced on its next use")
		e.Duration(&st.WorkerOfflineAfter, "worker-offline-after", "FREEAGENT_WORKER_OFFLINE_AFTER", st.WorkerOfflineAfter, "a worker silent for this long is offline and its builds are requeued")
		e.Duration(&st.DefaultTimeout, "build-timeout", "FREEAGENT_BUILD_TIMEOUT", st.DefaultTimeout, "default per-build timeout")
		e.Duration(&st.BuildTokenTTL, "build-token-ttl", "FREEAGENT_BUILD_TOKEN_TTL", st.BuildTokenTTL, "a build token (the one a submit returns) stops working this long after the submit, or when the key that submitted the build is revoked or loses the build's project")
		e.Duration(&st.WarmPlacementWait, "warm-placement-wait", "FREEAGENT_WARM_PLACEMENT_WAIT", st.WarmPlacementWait, "a polling worker prefers a queued build whose dependency caches it holds over older ones of the same priority, until the oldest has waited this long")
		e.Int(&st.MaxAttempts, "max-attempts", "FREEAGENT_MAX_ATTEMPTS", st.MaxAttempts, 1, "attempts before a build is dead-lettered (failed, code max_attempts)")
		e.DurationOrZero(&st.RetainArtifacts, "retain-artifacts", "FREEAGENT_RETAIN_ARTIFACTS", st.RetainArtifacts, "how long after a build ends its artifacts are kept (then deleted; the build stays and says they expired); 0 keeps them forever")
		e.DurationOrZero(&st.RetainSources, "retain-sources", "FREEAGENT_RETAIN_SOURCES", st.RetainSources, "how long after a build ends its uploaded source is kept: the window in which a retry can re-use it; 0 keeps sources forever")
		e.DurationOrZero(&st.RetainLogs, "retain-logs", "FREEAGENT_RETAIN_LOGS", st.RetainLogs, "how long after a build ends its log is kept; 0 keeps logs forever")
		cfg.Serve.MinFreeDisk = blobs.Floor{Bytes: 5 << 30}
		e.Var((*floorValue)(&cfg.Serve.MinFreeDisk), "min-free-disk", "FREEAGENT_MIN_FREE_DISK", "with the file store, the free space to keep on its disk (a `floor`: a size such as 5GiB, or a share such as 5%); below it submits answer 507 Insufficient Storage; 0 turns the floor off")
		e.Duration(&cfg.Serve.GC.Interval, "gc-interval", "FREEAGENT_GC_INTERVAL", gc.DefaultConfig().Interval, "how often expired and orphaned files are deleted (one replica at a time)")
		e.Duration(&cfg.Serve.ReaperInterval, "reaper-interval", "FREEAGENT_REAPER_INTERVAL", 5*time.Second, "how often expired leases and silent workers are swept")
		e.String(&cfg.Serve.Name, "name", "FREEAGENT_CONTROLLER_NAME", "", "this replica's name in the controller registry (default: the host name)")
		e.String(&cfg.Serve.AdvertiseURL, "advertise-url", "FREEAGENT_ADVERTISE_URL", "", "URL other replicas and people reach this replica at (default: the listen address)")
		e.Duration(&cfg.Serve.ControllerTTL, "controller-ttl", "FREEAGENT_CONTROLLER_TTL", 5*time.Minute, "a replica that stops refreshing its registration expires after this long")
		e.Duration(&lim.PollMaxWait, "poll-max-wait", "FREEAGENT_POLL_MAX_WAIT", lim.PollMaxWait, "longest a worker's long poll is held")
		e.Size(&lim.Source, "max-source-bytes", "FREEAGENT_MAX_SOURCE_BYTES", lim.Source, "largest accepted project: both the archive as sent and the total of the files it expands to (a tar.gz of zeros is measured by what it holds)")
		e.Size(&lim.Artifact, "max-artifact-bytes", "FREEAGENT_MAX_ARTIFACT_BYTES", lim.Artifact, "largest accepted artifact")
		e.Int(&lim.ArtifactsPerBuild, "max-artifacts-per-build", "FREEAGENT_MAX_ARTIFACTS_PER_BUILD", lim.ArtifactsPerBuild, 0, "most artifacts one attempt of a build may upload; 0: no limit")
		e.Int(&lim.DirectUploadsPerAttempt, "max-direct-uploads-per-attempt", "FREEAGENT_MAX_DIRECT_UPLOADS_PER_ATTEMPT", lim.DirectUploadsPerAttempt, 0, "with the S3 store, most direct uploads (signed URLs to the bucket) one attempt of a build may open, fresh starts included; beyond, 413 naming this setting; 0: no limit")
		e.Size(&lim.LogTotal, "max-log-bytes", "FREEAGENT_MAX_LOG_BYTES", lim.LogTotal, "largest build log")
		e.Float(&lim.RatePerWorker, "rate-per-worker", "FREEAGENT_RATE_PER_WORKER", lim.RatePerWorker, "worker-protocol requests per second one worker may make (bursts of 4 s worth), whatever key its fleet shares, answered 429 with Retry-After beyond; a heartbeat or result for a lease the worker holds is served even then; 0: no limit")
		e.Float(&lim.RatePerKey, "rate-per-key", "FREEAGENT_RATE_PER_KEY", lim.RatePerKey, "requests per second one API key may make outside the worker protocol (bursts of 4 s worth; a worker's registration counts here), answered 429 with Retry-After beyond; 0: no limit")
		e.Float(&lim.AuthFailuresPerIP, "auth-failures-per-ip", "FREEAGENT_AUTH_FAILURES_PER_IP", lim.AuthFailuresPerIP, "failed authentications per second a client address may make (after a burst of 20) before it is refused with 429; 0: no limit")
		e.Bool(&cfg.Serve.MetricsPublic, "metrics-public", "FREEAGENT_METRICS_PUBLIC", false, "serve /metrics without an API key (otherwise an admin key: X-API-Key or Authorization: Bearer)")
		e.String(&cfg.Serve.PublicURL, "public-url", "FREEAGENT_PUBLIC_URL", "", "URL phones and browsers reach this controller at, used in install links and QR codes; empty uses each request's host")
		e.Duration(&cfg.Serve.LinkTTL, "link-ttl", "FREEAGENT_LINK_TTL", install.DefaultTTL, "how long an install link (and its QR code) works")
		e.String(&cfg.webhookAllow, "webhook-allow", "FREEAGENT_WEBHOOK_ALLOW", "", "comma-separated addresses or CIDR prefixes of non-public webhook targets to allow (loopback, private and link-local addresses are refused otherwise), e.g. 10.1.2.0/24")
		e.String(&cfg.trustedProxies, "trusted-proxies", "FREEAGENT_TRUSTED_PROXIES", "", "comma-separated addresses or CIDR prefixes of the reverse proxies in front of the controller (e.g. 127.0.0.1 or 10.0.0.0/8): a request from one of them is charged to the client its X-Forwarded-For names (the right-most address not in this list); without it, the budget of failed authentications is kept per connection address, so behind a proxy every client shares the proxy's")
		cfg.Serve.CertsKey, _ = lookupEnv("FREEAGENT_CERTS_KEY") // a secret: environment only, never argv
		cfg.Serve.LinkKey, _ = lookupEnv("FREEAGENT_LINK_KEY")
	}
	if extra != nil {
		extra(fs)
	}
	if err := e.Err(); err != nil {
		return nil, nil, usageError{err}
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
	allow, err := config.ParsePrefixes(cfg.webhookAllow)
	if err != nil {
		return nil, nil, usageError{fmt.Errorf("--webhook-allow: %w", err)}
	}
	cfg.Serve.Webhooks.Allow = allow
	if cfg.Serve.TrustedProxies, err = config.ParsePrefixes(cfg.trustedProxies); err != nil {
		return nil, nil, usageError{fmt.Errorf("--trusted-proxies: %w", err)}
	}
	// On the command line 0 turns a rate limit or the artifact cap off;
	// serve reads a zero as "the default" and Off as off.
	for _, r := range []*float64{&cfg.Serve.Limits.RatePerWorker, &cfg.Serve.Limits.RatePerKey, &cfg.Serve.Limits.AuthFailuresPerIP} {
		if *r == 0 {
			*r = httpapi.Off
		}
	}
	for _, n := range []*int{&cfg.Serve.Limits.ArtifactsPerBuild, &cfg.Serve.Limits.DirectUploadsPerAttempt} {
		if *n == 0 {
			*n = httpapi.Off
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

// floorValue is --min-free-disk: a size (config.ParseSize) or a share of
// the disk.
type floorValue blobs.Floor

func (f *floorValue) Set(v string) error {
	floor, err := blobs.ParseFloor(v)
	if err != nil {
		return err
	}
	*f = floorValue(floor)
	return nil
}

func (f *floorValue) String() string {
	if f == nil {
		return ""
	}
	return blobs.Floor(*f).String()
}

// defaultDataDir is $XDG_DATA_HOME/freeagent-controller, or its usual place.
func defaultDataDir(lookupEnv func(string) (string, bool)) string {
	if d, _ := lookupEnv("XDG_DATA_HOME"); d != "" {
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
