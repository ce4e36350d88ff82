package vmbootstrap

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/freeagent-build/freeagent/internal/vmshare"
)

// DefaultSharedDir is where a macOS guest sees the host's build-config share
// (`tart run --dir build-config:<dir>`).
const DefaultSharedDir = "/Volumes/My Shared Files/build-config"

// DefaultBuildUserWorkDir is the work directory when there is a build user
// and --work-dir is not given: outside the bootstrap's private $TMPDIR.
const DefaultBuildUserWorkDir = "/tmp/freeagent-build"

// DefaultCacheShare is where a macOS guest sees the host's read-only share
// of dependency caches (`tart run --dir caches:<dir>:ro`).
const DefaultCacheShare = "/Volumes/My Shared Files/caches"

// Config is everything freeagent-vm can be told. Each field comes from its
// flag, else its environment variable, else the default.
type Config struct {
	SharedDir    string        // --shared-dir, FREEAGENT_SHARED_DIR
	CacheShare   string        // --cache-share, FREEAGENT_CACHE_SHARE: the read-only dependency caches vmshare.BuildConfig.Caches names
	WaitTimeout  time.Duration // --wait-timeout, FREEAGENT_WAIT_TIMEOUT: how long to wait for the share and its config
	BuildTimeout time.Duration // --build-timeout, FREEAGENT_BUILD_TIMEOUT: the whole build (the host enforces the real one)
	KillGrace    time.Duration // --kill-grace, FREEAGENT_KILL_GRACE: SIGTERM → SIGKILL delay for build steps
	WorkDir      string        // --work-dir, FREEAGENT_WORK_DIR: the source is extracted under it
	HomeDir      string        // --home, FREEAGENT_HOME: provisioning profiles are installed under it (default $HOME; with a build user, its home)
	BuildUser    string        // --build-user, FREEAGENT_BUILD_USER: the unprivileged account build commands run as ("": this process's user)
	SecurityTool string        // --security, FREEAGENT_SECURITY: the macOS `security` program
	LogLevel     string        // --log-level, FREEAGENT_LOG_LEVEL: this program's own diagnostics on stderr
	Limits       ExtractLimits // --max-source-bytes, --max-source-files, --max-file-bytes (FREEAGENT_MAX_…)

	// Not settable from the command line: tests tune them.
	PollInterval time.Duration // how often the shared dir is checked while waiting
	AuthRetryFor time.Duration // how long network errors of the OTP exchange are retried
	RetryFor     time.Duration // same for source download and artifact upload
	FinalFlush   time.Duration // how long the last log bytes may take to reach the controller
	LogStream    LogStreamConfig
}

// DefaultConfig returns the built-in defaults.
func DefaultConfig() Config {
	home, _ := os.UserHomeDir()
	return Config{
		SharedDir:    DefaultSharedDir,
		CacheShare:   DefaultCacheShare,
		WaitTimeout:  5 * time.Minute,
		BuildTimeout: 2 * time.Hour,
		KillGrace:    10 * time.Second,
		WorkDir:      filepath.Join(os.TempDir(), "freeagent-build"),
		HomeDir:      home,
		SecurityTool: "/usr/bin/security",
		LogLevel:     "info",
		Limits:       DefaultExtractLimits(),
		PollInterval: 250 * time.Millisecond,
		AuthRetryFor: 3 * time.Minute,
		RetryFor:     2 * time.Minute,
		FinalFlush:   time.Minute,
		LogStream:    DefaultLogStreamConfig(),
	}
}

// ErrHelp is returned by ParseConfig for -h/--help (usage already printed).
var ErrHelp = flag.ErrHelp

// ParseConfig builds the configuration from the defaults, then the
// environment (getenv), then the command-line arguments.
func ParseConfig(args []string, getenv func(string) string, usage io.Writer) (Config, error) {
	cfg := DefaultConfig()
	fs := flag.NewFlagSet("freeagent-vm", flag.ContinueOnError)
	fs.SetOutput(usage)
	type option struct {
		flag, env, help string
		set             func(string) error
	}
	str := func(p *string) func(string) error {
		return func(v string) error { *p = v; return nil }
	}
	dur := func(p *time.Duration) func(string) error {
		return func(v string) error {
			d, err := parseDuration(v)
			if err == nil {
				*p = d
			}
			return err
		}
	}
	size := func(p *int64) func(string) error {
		return func(v string) error {
			n, err := parseSize(v)
			if err == nil {
				*p = n
			}
			return err
		}
	}
	opts := []option{
		{"shared-dir", "FREEAGENT_SHARED_DIR", "shared folder holding " + vmshare.BuildConfigFile + " (default " + DefaultSharedDir + ")", str(&cfg.SharedDir)},
		{"cache-share", "FREEAGENT_CACHE_SHARE", "read-only folder of the dependency caches the host shares (default " + DefaultCacheShare + ")", str(&cfg.CacheShare)},
		{"wait-timeout", "FREEAGENT_WAIT_TIMEOUT", "how long to wait for the shared folder and its config (default 5m)", dur(&cfg.WaitTimeout)},
		{"build-timeout", "FREEAGENT_BUILD_TIMEOUT", "time limit of the whole build (default 2h)", dur(&cfg.BuildTimeout)},
		{"kill-grace", "FREEAGENT_KILL_GRACE", "time between SIGTERM and SIGKILL of a build step (default 10s)", dur(&cfg.KillGrace)},
		{"work-dir", "FREEAGENT_WORK_DIR", "directory the source is extracted under (default $TMPDIR/freeagent-build)", str(&cfg.WorkDir)},
		{"home", "FREEAGENT_HOME", "home directory provisioning profiles are installed under (default $HOME; with --build-user, the build user's)", str(&cfg.HomeDir)},
		{"build-user", "FREEAGENT_BUILD_USER", "unprivileged user build commands run as, through sudo -n -u (default: this program's user)", str(&cfg.BuildUser)},
		{"security", "FREEAGENT_SECURITY", "path of the macOS security tool (default /usr/bin/security)", str(&cfg.SecurityTool)},
		{"log-level", "FREEAGENT_LOG_LEVEL", "diagnostics level on stderr: debug, info, warn, error (default info)", str(&cfg.LogLevel)},
		{"max-source-bytes", "FREEAGENT_MAX_SOURCE_BYTES", "limit on the extracted source's total size (default 10GiB)", size(&cfg.Limits.MaxBytes)},
		{"max-file-bytes", "FREEAGENT_MAX_FILE_BYTES", "limit on one extracted file's size (default 4GiB)", size(&cfg.Limits.MaxFileBytes)},
		{"max-source-files", "FREEAGENT_MAX_SOURCE_FILES", "limit on the number of entries in the source archive (default 500000)", func(v string) error {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil || n <= 0 {
				return fmt.Errorf("%q is not a positive number", v)
			}
			cfg.Limits.MaxFiles = n
			return nil
		}},
	}
	given := map[string]bool{} // options set by the environment or a flag
	for _, o := range opts {
		if v := getenv(o.env); v != "" {
			if err := o.set(v); err != nil {
				return cfg, fmt.Errorf("environment variable %s: %w", o.env, err)
			}
			given[o.flag] = true
		}
		fs.Func(o.flag, o.help+"; env "+o.env, func(v string) error { given[o.flag] = true; return o.set(v) })
	}
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected argument %q (freeagent-vm takes only flags)", fs.Arg(0))
	}
	if cfg.BuildUser != "" {
		// This user's home and temporary directory (private on macOS)
		// are no place for what the build user reads and writes.
		if !given["home"] {
			cfg.HomeDir = "" // the build user's home
		}
		if !given["work-dir"] {
			cfg.WorkDir = DefaultBuildUserWorkDir
		}
	}
	return cfg, cfg.validate()
}

func (c Config) validate() error {
	var errs []error
	if c.SharedDir == "" {
		errs = append(errs, errors.New("the shared folder (--shared-dir) is empty"))
	}
	if c.WorkDir == "" {
		errs = append(errs, errors.New("the work directory (--work-dir) is empty"))
	}
	for name, d := range map[string]time.Duration{"--wait-timeout": c.WaitTimeout, "--build-timeout": c.BuildTimeout, "--kill-grace": c.KillGrace} {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive", name))
		}
	}
	if c.Limits.MaxBytes <= 0 || c.Limits.MaxFileBytes <= 0 || c.Limits.MaxFiles <= 0 {
		errs = append(errs, errors.New("source limits must be positive"))
	}
	return errors.Join(errs...)
}

// parseDuration accepts a Go duration ("90s", "2h") or a number of seconds.
func parseDuration(v string) (time.Duration, error) {
	v = strings.TrimSpace(v)
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		return time.Duration(n) * time.Second, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("%q is neither a duration (90s, 2h) nor a number of seconds", v)
	}
	return d, nil
}

// parseSize accepts a byte count with an optional binary suffix: 512, 64KiB,
// 10GiB (K, M, G, KB, MB, GB are read as binary too).
func parseSize(v string) (int64, error) {
	s := strings.ToUpper(strings.TrimSpace(v))
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KIB", 1 << 10}, {"MIB", 1 << 20}, {"GIB", 1 << 30}, {"KB", 1 << 10}, {"MB", 1 << 20}, {"GB", 1 << 30}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}} {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("%q is not a positive size (bytes, or with KiB/MiB/GiB)", v)
	}
	return n * mult, nil
}
