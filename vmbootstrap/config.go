package vmbootstrap

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/freeagent-build/freeagent/internal/config"
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
	Launchctl    string        // --launchctl, FREEAGENT_LAUNCHCTL: starts the build user's commands in its own launchd session ("": no launchd)
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
		Launchctl:    defaultLaunchctl,
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
// environment (getenv; an empty variable is unset), then the command-line
// arguments. Durations and sizes take the syntax every Free Agent binary
// shares (internal/config).
func ParseConfig(args []string, getenv func(string) string, usage io.Writer) (Config, error) {
	cfg, _, err := parseConfig(args, getenv, usage)
	return cfg, err
}

// parseConfig is ParseConfig returning the flag set too, for tests to
// list the settings.
func parseConfig(args []string, getenv func(string) string, usage io.Writer) (Config, *flag.FlagSet, error) {
	cfg := DefaultConfig()
	fs := flag.NewFlagSet("freeagent-vm", flag.ContinueOnError)
	fs.SetOutput(usage)
	o := config.New(fs, config.NonEmptyEnv(getenv), config.File{})
	o.String(&cfg.SharedDir, "shared-dir", "FREEAGENT_SHARED_DIR", cfg.SharedDir, "shared folder holding "+vmshare.BuildConfigFile)
	o.String(&cfg.CacheShare, "cache-share", "FREEAGENT_CACHE_SHARE", cfg.CacheShare, "read-only folder of the dependency caches the host shares")
	o.Duration(&cfg.WaitTimeout, "wait-timeout", "FREEAGENT_WAIT_TIMEOUT", cfg.WaitTimeout, "how long to wait for the shared folder and its config")
	o.Duration(&cfg.BuildTimeout, "build-timeout", "FREEAGENT_BUILD_TIMEOUT", cfg.BuildTimeout, "time limit of the whole build")
	o.Duration(&cfg.KillGrace, "kill-grace", "FREEAGENT_KILL_GRACE", cfg.KillGrace, "time between SIGTERM and SIGKILL of a build step")
	o.String(&cfg.WorkDir, "work-dir", "FREEAGENT_WORK_DIR", cfg.WorkDir, "directory the source is extracted under (with --build-user: "+DefaultBuildUserWorkDir+")")
	o.String(&cfg.HomeDir, "home", "FREEAGENT_HOME", cfg.HomeDir, "home directory provisioning profiles are installed under (with --build-user: the build user's)")
	o.String(&cfg.BuildUser, "build-user", "FREEAGENT_BUILD_USER", "", "unprivileged user build commands run as, through sudo -n -u (default: this program's user)")
	o.String(&cfg.SecurityTool, "security", "FREEAGENT_SECURITY", cfg.SecurityTool, "path of the macOS security tool")
	o.String(&cfg.Launchctl, "launchctl", "FREEAGENT_LAUNCHCTL", cfg.Launchctl, "launchctl that starts the build user's commands in its own launchd session (empty: leave them in this program's)")
	o.String(&cfg.LogLevel, "log-level", "FREEAGENT_LOG_LEVEL", cfg.LogLevel, "diagnostics level on stderr: debug, info, warn, error")
	o.Size(&cfg.Limits.MaxBytes, "max-source-bytes", "FREEAGENT_MAX_SOURCE_BYTES", cfg.Limits.MaxBytes, "limit on the extracted source's total size")
	o.Size(&cfg.Limits.MaxFileBytes, "max-file-bytes", "FREEAGENT_MAX_FILE_BYTES", cfg.Limits.MaxFileBytes, "limit on one extracted file's size")
	o.Int(&cfg.Limits.MaxFiles, "max-source-files", "FREEAGENT_MAX_SOURCE_FILES", cfg.Limits.MaxFiles, 1, "limit on the number of entries in the source archive")
	if err := o.Err(); err != nil {
		return cfg, nil, err
	}
	if err := fs.Parse(args); err != nil {
		return cfg, nil, err
	}
	if fs.NArg() > 0 {
		return cfg, nil, fmt.Errorf("unexpected argument %q (freeagent-vm takes only flags)", fs.Arg(0))
	}
	if cfg.BuildUser != "" {
		// This user's home and temporary directory (private on macOS)
		// are no place for what the build user reads and writes.
		if !o.Given("home") {
			cfg.HomeDir = "" // the build user's home
		}
		if !o.Given("work-dir") {
			cfg.WorkDir = DefaultBuildUserWorkDir
		}
	}
	return cfg, fs, cfg.validate()
}

// validate checks what the syntax cannot: the folders are named. (The
// durations and limits are positive by their syntax.)
func (c Config) validate() error {
	var errs []error
	if c.SharedDir == "" {
		errs = append(errs, errors.New("the shared folder (--shared-dir) is empty"))
	}
	if c.WorkDir == "" {
		errs = append(errs, errors.New("the work directory (--work-dir) is empty"))
	}
	return errors.Join(errs...)
}
