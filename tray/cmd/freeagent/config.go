package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/freeagent-build/freeagent/agent"
	"github.com/freeagent-build/freeagent/agent/hostcheck"
	"github.com/freeagent-build/freeagent/agent/hostsignals"
	"github.com/freeagent-build/freeagent/agent/secrets"
	"github.com/freeagent-build/freeagent/agent/tart"
	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/internal/config"
	"github.com/freeagent-build/freeagent/internal/toolchain"
	"github.com/freeagent-build/freeagent/launchd/homebrew"
	"github.com/freeagent-build/freeagent/tray/conffile"
	"github.com/freeagent-build/freeagent/tray/solo"
)

const confName = conffile.Name

// Defaults the Preferences page shows too.
const (
	defaultTemplate     = "freeagent-template"
	defaultMaxBuilds    = 1
	defaultBuildTimeout = 2 * time.Hour
	defaultCacheGB      = 20
)

// Config is the worker binary's whole configuration. Each field comes from
// its flag, else its environment variable, else DATA_DIR/agent.conf, else
// the default.
type Config struct {
	DataDir       string
	ControllerURL string
	APIKey        string // environment only (FREEAGENT_API_KEY), else the secret store
	VMDriver      string
	Tart          string
	Template      string
	VMNetwork     string // softnet or shared (tart.ParseNetwork)
	Softnet       string
	SoftnetAllow  string // comma-separated IPv4 CIDRs (tart.ParseAllow)
	TartAutoPrune bool   // let Tart delete cached images to make room (tart.Driver.AutoPrune)
	HostAddress   string
	Bootstrap     string
	Name          string
	Platforms     string
	Pool          string
	MaxBuilds     int
	CPU           int
	MemoryMB      int
	CacheGB       int // the dependency caches' cap (agent/cache); 0: none
	PollWait      time.Duration
	BootTimeout   time.Duration
	// Warm spares (agent/spare.go): kept, suspended, and how long a
	// spare's bootstrap may take to answer a claim.
	WarmSpare          bool
	SuspendSpare       bool
	SpareAnswerTimeout time.Duration
	BackoffMin         time.Duration
	LogLevel           string
	BuildTimeout       time.Duration
	MinFreeGB          int
	// The owner's rules for taking builds (hostRules; docs/polite-guest.md).
	HostSignals       string // a JSON file that replaces the system's readings
	BuildOnBattery    bool
	MinBatteryPercent int
	IdleMinutes       string // minutes, or "auto": 10 on a laptop, off on a desktop
	PauseThermal      string // serious, critical or off
	Schedule          string
	HostCheck         time.Duration
	OpenCommand       string
	Solo              bool
	SoloListen        string
	SoloVMNetwork     string
	// Insecure allows a plain http:// controller on another machine
	// (--insecure, FREEAGENT_INSECURE=1); refused otherwise.
	Insecure bool
	// OnSIGTERM is what `run` does with its first SIGTERM: onTermDrain or
	// onTermHandBack.
	OnSIGTERM string

	apiKeyStdin   bool
	jsonOut       bool
	asLaunchAgent bool // doctor --launchd
}

func loadConfig(cmd string, args []string, stderr io.Writer) (*Config, error) {
	cfg, _, err := loadConfigEnv(cmd, args, os.LookupEnv, stderr)
	return cfg, err
}

// loadConfigEnv is loadConfig reading the environment through lookupEnv;
// it returns the flag set too, for tests to list the settings.
func loadConfigEnv(cmd string, args []string, lookupEnv func(string) (string, bool), stderr io.Writer) (*Config, *flag.FlagSet, error) {
	cfg := &Config{}
	cfg.APIKey, _ = lookupEnv("FREEAGENT_API_KEY")
	dataDir := flagValue(args, "data-dir")
	if dataDir == "" {
		dataDir, _ = lookupEnv("FREEAGENT_DATA_DIR")
	}
	if dataDir == "" {
		dataDir = defaultDataDir()
	}
	file, err := conffile.Load(filepath.Join(dataDir, confName))
	if err != nil {
		return nil, nil, err
	}
	fs := flag.NewFlagSet("freeagent "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := config.New(fs, lookupEnv, file)
	o.String(&cfg.DataDir, "data-dir", "FREEAGENT_DATA_DIR", defaultDataDir(), "credentials (off macOS), logs and build scratch space")
	o.String(&cfg.ControllerURL, "controller-url", "FREEAGENT_CONTROLLER_URL", "", "the controller, e.g. https://builds.example.com")
	o.Bool(&cfg.Insecure, "insecure", "FREEAGENT_INSECURE", false, "allow a plain http:// controller on another machine: the worker key, tokens and signing credentials then cross the network unencrypted")
	if cmd == "setup" {
		fs.BoolVar(&cfg.apiKeyStdin, "api-key-stdin", false, "read the API key from standard input and store it")
	} else {
		o.String(&cfg.VMDriver, "vm-driver", "FREEAGENT_VM_DRIVER", defaultDriver, "tart (a fresh macOS VM per build) or local (no isolation: a plain process on this host)")
		o.String(&cfg.Tart, "tart", "FREEAGENT_TART", "tart", "the tart binary: a path, or a name looked up on PATH and then in Homebrew's bin ($HOMEBREW_PREFIX, /opt/homebrew, /usr/local)")
		o.String(&cfg.Template, "template", "FREEAGENT_TEMPLATE", defaultTemplate, "Tart VM or image that build VMs are cloned from")
		o.String(&cfg.VMNetwork, "vm-network", "FREEAGENT_VM_NETWORK", tart.NetworkSoftnet, "the VMs' network with tart: softnet (isolated: the internet, the controller and --softnet-allow only; needs softnet) or shared (Tart's NAT: this Mac's LAN too)")
		o.String(&cfg.Softnet, "softnet", "FREEAGENT_SOFTNET", "softnet", "the softnet binary: a path, or a name looked up on PATH and then in Homebrew's bin")
		o.String(&cfg.SoftnetAllow, "softnet-allow", "FREEAGENT_SOFTNET_ALLOW", "", "extra IPv4 CIDRs softnet VMs may reach, comma-separated, e.g. a registry on the LAN (10.0.0.5/32); the controller is always allowed")
		o.Bool(&cfg.TartAutoPrune, "tart-auto-prune", "FREEAGENT_TART_AUTO_PRUNE", false, "let Tart delete cached VM images and IPSWs, least recently used first, when a clone or pull finds the disk short of space; it may delete the template's own base image")
		o.String(&cfg.HostAddress, "host-address", "FREEAGENT_HOST_ADDRESS", "192.168.64.1", "this host's address on Tart's network (replaces a loopback controller URL inside VMs)")
		o.String(&cfg.Bootstrap, "bootstrap", "FREEAGENT_BOOTSTRAP", defaultBootstrap(), "the freeagent-vm binary copied into every build")
		o.String(&cfg.Name, "name", "FREEAGENT_WORKER_NAME", "", "worker name shown on the controller (default: host name)")
		o.String(&cfg.Platforms, "platforms", "FREEAGENT_PLATFORMS", "", "platforms this worker builds, e.g. ios,android (default: what the VM template was built for, else ios,android; with the local driver, what this host has the tools for: Xcode for ios, a JDK and ANDROID_HOME for android)")
		o.String(&cfg.Pool, "pool", "FREEAGENT_POOL", api.DefaultPool, "the worker pool this worker joins; an admin decides which pools are trusted with signing credentials and which projects use them")
		o.Int(&cfg.MaxBuilds, "max-builds", "FREEAGENT_MAX_BUILDS", defaultMaxBuilds, 0, "concurrent builds (at most 2 with tart: Apple's licence)")
		o.Int(&cfg.CPU, "cpu", "FREEAGENT_CPU", 0, 0, "CPU cores per VM (0: the template's)")
		o.Int(&cfg.MemoryMB, "memory-mb", "FREEAGENT_MEMORY_MB", 0, 0, "memory per VM in MB (0: the template's)")
		o.Int(&cfg.CacheGB, "cache-gb", "FREEAGENT_CACHE_GB", defaultCacheGB, 0, "total size of the dependency caches kept for repeat builds, in GB (least recently used go first; 0: none)")
		o.Duration(&cfg.PollWait, "poll-wait", "FREEAGENT_POLL_WAIT", 25*time.Second, "long-poll hold")
		o.Duration(&cfg.BootTimeout, "boot-timeout", "FREEAGENT_BOOT_TIMEOUT", 5*time.Minute, "how long a VM may take to signal ready")
		o.Bool(&cfg.WarmSpare, "warm-spare", "FREEAGENT_WARM_SPARE", true, "with tart, boot the next build's VM before the build comes, while a VM slot is free and builds are allowed (it holds that slot while it waits)")
		o.Bool(&cfg.SuspendSpare, "suspend-spare", "FREEAGENT_SUSPEND_SPARE", false, "suspend a warm spare while it waits (tart suspend: macOS 14 or newer), so it costs no CPU and no VM slot; a Mac that cannot is detected and its spares stay running")
		o.Duration(&cfg.SpareAnswerTimeout, "spare-answer-timeout", "FREEAGENT_SPARE_ANSWER_TIMEOUT", 30*time.Second, "how long a warm spare's bootstrap may take to answer a claimed build before the spare is destroyed and the build boots a fresh VM")
		o.Duration(&cfg.BackoffMin, "backoff-min", "FREEAGENT_BACKOFF_MIN", 5*time.Second, "first retry delay after a network error (doubles up to 2m)")
		o.String(&cfg.LogLevel, "log-level", "FREEAGENT_LOG_LEVEL", "info", "debug, info, warn or error")
		o.Duration(&cfg.BuildTimeout, "build-timeout", "FREEAGENT_BUILD_TIMEOUT", defaultBuildTimeout, "longest a build may run on this worker (a build's own shorter timeout wins)")
		o.Int(&cfg.MinFreeGB, "min-free-gb", "FREEAGENT_MIN_FREE_GB", hostcheck.DefaultMinFree>>30, 0, "free disk space below which the host needs attention and no build starts")
		o.String(&cfg.HostSignals, "host-signals", "FREEAGENT_HOST_SIGNALS", "", "a JSON file read instead of this Mac's power, idle, thermal and disk readings, at every check (on_battery, has_battery, battery_percent, idle_seconds, thermal, free_disk_bytes, memory_pressure)")
		o.Bool(&cfg.BuildOnBattery, "build-on-battery", "FREEAGENT_BUILD_ON_BATTERY", false, "start builds while the Mac runs on battery (above --min-battery-percent)")
		o.Int(&cfg.MinBatteryPercent, "min-battery-percent", "FREEAGENT_MIN_BATTERY_PERCENT", hostsignals.DefaultMinBatteryPercent, 0, "with --build-on-battery, the charge below which no build starts")
		o.String(&cfg.IdleMinutes, "idle-minutes", "FREEAGENT_IDLE_MINUTES", "auto", "start builds only when nobody has used this Mac for this many minutes (0: any time; auto: 10 on a laptop, 0 on a desktop)")
		o.String(&cfg.PauseThermal, "pause-thermal", "FREEAGENT_PAUSE_THERMAL", string(hostsignals.ThermalSerious), "start no build at this thermal state or worse: serious, critical or off")
		o.String(&cfg.Schedule, "schedule", "FREEAGENT_SCHEDULE", "", `start builds only in these weekly windows, local time, e.g. "Mon-Fri 22:00-07:00, Sat-Sun 00:00-24:00" (empty: any time)`)
		o.Duration(&cfg.HostCheck, "host-check-interval", "FREEAGENT_HOST_CHECK_INTERVAL", 5*time.Second, "how often the rules above are checked")
	}
	if cmd == "app" || cmd == "doctor" {
		// The app runs the solo controller; doctor checks it.
		o.Bool(&cfg.Solo, "solo", "FREEAGENT_SOLO", false, "run the controller on this Mac too (one Mac, no server); ignores --controller-url")
		o.String(&cfg.SoloListen, "solo-listen", "FREEAGENT_SOLO_LISTEN", solo.DefaultListen, "where the solo controller listens; a loopback address also binds --host-address (the VMs' way to this Mac) at the same port once Tart's network is up; it serves only this Mac and --solo-vm-network")
		o.String(&cfg.SoloVMNetwork, "solo-vm-network", "FREEAGENT_SOLO_VM_NETWORK", solo.DefaultVMNetwork, "the build VMs' network (CIDR): the only addresses beside this Mac the solo controller serves")
	}
	if cmd == "run" {
		o.String(&cfg.OnSIGTERM, "on-sigterm", "FREEAGENT_ON_SIGTERM", onTermDrain, "what the first SIGTERM does: drain (running builds finish, then the worker exits) or hand-back (running builds go back to the queue now: what launchd's logout, restart or shutdown leaves time for); the next signal hands back, a third exits")
	}
	if cmd == "app" {
		o.String(&cfg.OpenCommand, "open-command", "FREEAGENT_OPEN_COMMAND", defaultOpener, "command that shows the dashboard, logs and preferences")
	}
	if cmd == "doctor" {
		fs.BoolVar(&cfg.jsonOut, "json", false, "print the results as JSON")
		fs.BoolVar(&cfg.asLaunchAgent, "launchd", false, "run the checks as a one-shot LaunchAgent of this program, as launchd runs the login item (macOS grants the Local Network permission per app: a check run from Terminal tests Terminal's)")
	}
	if err := o.Err(); err != nil {
		return nil, nil, usageError{err}
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, nil, err
		}
		return nil, nil, usageError{err}
	}
	if cfg.DataDir, err = filepath.Abs(cfg.DataDir); err != nil {
		return nil, nil, err
	}
	if cfg.VMNetwork, err = tart.ParseNetwork(cfg.VMNetwork); err != nil {
		return nil, nil, usageError{fmt.Errorf("--vm-network: %w", err)}
	}
	if _, err := tart.ParseAllow(cfg.SoftnetAllow); err != nil {
		return nil, nil, usageError{fmt.Errorf("--softnet-allow: %w", err)}
	}
	if cmd != "setup" {
		if _, err := cfg.hostRules(); err != nil {
			return nil, nil, usageError{err}
		}
	}
	if cmd == "run" && cfg.OnSIGTERM != onTermDrain && cfg.OnSIGTERM != onTermHandBack {
		return nil, nil, usageError{fmt.Errorf("--on-sigterm %q: use %s or %s", cfg.OnSIGTERM, onTermDrain, onTermHandBack)}
	}
	if cmd == "run" && cfg.ControllerURL == "" {
		return nil, nil, usageError{errors.New("no controller: pass --controller-url, set FREEAGENT_CONTROLLER_URL, or run `freeagent setup --controller-url URL`")}
	}
	if err := cfg.checkTransport(); err != nil && cmd != "doctor" { // doctor reports it as a finding
		return nil, nil, usageError{err}
	}
	return cfg, fs, nil
}

// checkTransport refuses a plain-http controller on another machine unless
// Insecure. A loopback controller stays plain http, and so does the hop the
// VMs make to it through HostAddress on the host-only VM network (guestURL):
// neither leaves this Mac. Solo mode's controller is this Mac's.
func (c *Config) checkTransport() error {
	if c.Solo || c.Insecure || c.ControllerURL == "" {
		return nil
	}
	if err := api.CheckTransport(c.ControllerURL); err != nil {
		return fmt.Errorf("--controller-url: %w; to go on unencrypted anyway pass --insecure (or set FREEAGENT_INSECURE=1, or insecure = true in agent.conf)", err)
	}
	return nil
}

// insecureWarning is the loud warning for a plain-http controller the
// owner allowed with --insecure; empty when there is nothing to say.
func (c *Config) insecureWarning() string {
	if c.Solo || !c.Insecure || api.CheckTransport(c.ControllerURL) == nil {
		return ""
	}
	return api.InsecureWarning(c.ControllerURL, "--insecure / FREEAGENT_INSECURE=1")
}

// capabilities is what the worker advertises. With Tart, the platforms are
// limited to what the template builds (hostcheck.Platforms); with the local
// driver, to what this host builds (hostcheck.LocalPlatforms: no iOS
// without macOS and Xcode, no Android without a JDK and an Android SDK
// unless --platforms names it); log hears why when that differs from the
// setting.
func (c *Config) capabilities(log logrus.FieldLogger) api.Capabilities {
	caps := api.Capabilities{CPUCores: c.CPU, MemoryGB: c.MemoryMB / 1024, Labels: map[string]string{"vm_driver": c.VMDriver},
		Pool: c.Pool, VMDriver: c.VMDriver, MacOSVersion: macOSVersion()}
	ps := c.platforms()
	var r hostcheck.Result
	switch c.VMDriver {
	case "tart":
		d := c.tartDriver(log)
		ps, r = hostcheck.Platforms(d, ps)
		// The Xcode and tools that builds run with are the template's, as
		// its marker recorded them; an image without a marker leaves them
		// unknown.
		caps.Image = c.Template
		if info, err := d.TemplateInfo(); err == nil {
			caps.XcodeVersion, caps.Tools = info.XcodeVersion, info.Tools
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if v, err := d.Version(ctx); err == nil {
			caps.TartVersion = v
		}
		// A VM gets the template's size unless the worker sets its own.
		if cpu, mem, err := d.TemplateSize(ctx); err == nil {
			caps.CPUCores, caps.MemoryGB = cmp.Or(caps.CPUCores, cpu), cmp.Or(caps.MemoryGB, mem/1024)
		}
	case "local":
		ps, r = hostcheck.LocalPlatforms(ps, hostcheck.ThisHost())
		// Builds run on this host, with its tools.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		host := toolchain.ProbeHost(ctx, os.Environ())
		caps.Image, caps.XcodeVersion, caps.Tools = api.VMDriverLocal, host.Xcode, host.Tools
		caps.CPUCores, caps.MemoryGB = cmp.Or(caps.CPUCores, host.CPUCores), cmp.Or(caps.MemoryGB, host.MemoryGB)
	default:
		if len(ps) == 0 {
			ps = hostcheck.DefaultPlatforms
		}
		r.Severity = hostcheck.OK
	}
	if r.Severity != hostcheck.OK {
		log.WithField("fix", r.Fix).Warn(r.Message)
	}
	caps.Platforms = ps
	return caps
}

// platforms is the owner's --platforms as a list; empty: not set.
func (c *Config) platforms() []string {
	var ps []string
	for _, p := range strings.Split(c.Platforms, ",") {
		if p = strings.TrimSpace(p); p != "" {
			ps = append(ps, p)
		}
	}
	return ps
}

// tartDriver is the Tart driver for checks and questions about the template.
func (c *Config) tartDriver(log logrus.FieldLogger) *tart.Driver {
	path, _ := c.tartPath() // a missing tart is the Tart check's finding
	softnet, err := homebrew.LookPath(c.Softnet)
	if err != nil {
		softnet = c.Softnet // a missing softnet is the Softnet check's finding
	}
	return &tart.Driver{Tart: path, Template: c.Template, Log: log, Network: c.VMNetwork, Softnet: softnet, AutoPrune: c.TartAutoPrune}
}

// softnetAllow is what softnet VMs may reach beyond Softnet's defaults:
// the controller as the VMs see it (guestURL), then the owner's
// --softnet-allow.
func (c *Config) softnetAllow(lookup func(string) ([]net.IP, error)) ([]string, error) {
	extra, err := tart.ParseAllow(c.SoftnetAllow)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(c.guestURL())
	if err != nil {
		return nil, fmt.Errorf("the controller URL %q: %w", c.guestURL(), err)
	}
	allow, err := tart.ControllerAllow(u.Hostname(), lookup)
	if err != nil {
		return nil, err
	}
	return slices.Compact(append(allow, extra...)), nil
}

// guestURL is the controller URL as seen from inside a build VM.
func (c *Config) guestURL() string {
	if c.VMDriver != "tart" {
		return c.ControllerURL
	}
	return agent.GuestURL(c.ControllerURL, c.HostAddress)
}

// resolveKey fills APIKey from the secret store when the environment did
// not set it. In solo mode the controller is this Mac's and the key is the
// one solo mode created.
func (c *Config) resolveKey(store secrets.Store) error {
	if c.Solo {
		c.ControllerURL = soloURL(c.SoloListen)
		key, err := store.Get(solo.KeyWorker)
		if err != nil && !errors.Is(err, secrets.ErrNotFound) {
			return err
		}
		c.APIKey = key
		return nil
	}
	if c.APIKey != "" {
		return nil
	}
	key, err := store.Get(secrets.KeyAPIKey)
	if err != nil && !errors.Is(err, secrets.ErrNotFound) {
		return err
	}
	c.APIKey = key
	return nil
}

// soloURL is the solo controller's address on this Mac.
func soloURL(listen string) string {
	_, port, err := net.SplitHostPort(listen)
	if err != nil {
		return ""
	}
	return "http://" + net.JoinHostPort("127.0.0.1", port)
}

// hostRules are the owner's conditions for taking builds.
func (c *Config) hostRules() (hostsignals.Rules, error) {
	r := hostsignals.Rules{NoBuildsOnBattery: !c.BuildOnBattery, MinBatteryPercent: c.MinBatteryPercent,
		MinFreeBytes: uint64(c.MinFreeGB) << 30}
	if c.MinBatteryPercent > 100 {
		return r, fmt.Errorf("--min-battery-percent %d: want 0 to 100", c.MinBatteryPercent)
	}
	var err error
	if r.IdleMinutes, err = hostsignals.ParseIdleMinutes(c.IdleMinutes); err != nil {
		return r, fmt.Errorf("--idle-minutes: %w", err)
	}
	if r.PauseThermal, err = hostsignals.ParseThermalLimit(c.PauseThermal); err != nil {
		return r, fmt.Errorf("--pause-thermal: %w", err)
	}
	if r.Schedule, err = hostsignals.ParseSchedule(c.Schedule); err != nil {
		return r, fmt.Errorf("--schedule: %w", err)
	}
	return r, nil
}

// hostGate applies the owner's rules to this host's readings.
func (c *Config) hostGate(log logrus.FieldLogger) *hostsignals.Gate {
	rules, _ := c.hostRules() // checked by loadConfig
	return &hostsignals.Gate{Reader: hostsignals.ForHost(c.HostSignals, c.DataDir), Rules: rules, Log: log}
}

// workerGate is what holds the worker's builds back: the owner's rules, a
// host that refuses every VM until it restarts and, for VMs on Softnet, a
// softnet that cannot become root (every VM would stop at once, and every
// build fail and be retried).
func workerGate(c *Config, driver agent.Driver, log logrus.FieldLogger) agent.HostGate {
	gate := agent.Gates{c.hostGate(log)}
	if d, ok := driver.(*tart.Driver); ok {
		gate = append(gate, hostcheck.VMSlotGate{Driver: d})
		if d.Network != tart.NetworkShared {
			gate = append(gate, &hostcheck.SoftnetGate{Driver: d})
		}
	}
	return gate
}

// hostChecks is what `freeagent doctor` and the menu bar check on this host.
func (c *Config) hostChecks(store secrets.Store) hostcheck.Config {
	hc := hostcheck.Config{ControllerURL: c.ControllerURL, APIKey: c.APIKey, KeyStore: store,
		DataDir: c.DataDir, MinFree: uint64(c.MinFreeGB) << 30, Platforms: c.platforms(), Insecure: c.Insecure || c.Solo}
	switch c.VMDriver {
	case "tart":
		hc.Tart = c.tartDriver(logrus.New())
	case "local":
		host := hostcheck.ThisHost()
		hc.Local = &host
	}
	hc.Host = c.hostGate(logrus.New())
	return hc
}

// tartPath is the tart binary to run. A bare name (the default, "tart") is
// looked up on PATH and then in Homebrew's bin folders: an app opened from
// Finder or started by launchd has PATH=/usr/bin:/bin:/usr/sbin:/sbin,
// without /opt/homebrew/bin where `brew install cirruslabs/cli/tart` puts
// it. When there is none the name is kept, with the lookup's error:
// running it then reports that tart is not installed.
func (c *Config) tartPath() (string, error) {
	p, err := homebrew.LookPath(c.Tart)
	if err != nil {
		return c.Tart, err
	}
	return p, nil
}

// cacheDir holds the dependency caches (agent/cache).
func (c *Config) cacheDir() string { return filepath.Join(c.DataDir, "caches") }

// logPath is the agent's log file ("Open Logs" in the menu bar).
func (c *Config) logPath() string { return filepath.Join(c.DataDir, "logs", "agent.log") }

// defaultBootstrap is the freeagent-vm that goes with this executable.
func defaultBootstrap() string {
	exe, err := os.Executable()
	if err != nil {
		return "freeagent-vm"
	}
	return bootstrapNear(exe)
}

// bootstrapNear is freeagent-vm next to exe or, when exe is the app
// bundle's (FreeAgent.app/Contents/MacOS), in the bundle's Resources: the
// guest binary is data to the host app, not one of its executables.
// Symlinks in exe are resolved first, as launchd.CurrentApp does: the
// Homebrew cask links /opt/homebrew/bin/freeagent into the bundle, and
// os.Executable on macOS returns the link, next to which there is no
// freeagent-vm.
func bootstrapNear(exe string) string {
	if real, err := filepath.EvalSymlinks(exe); err == nil {
		exe = real
	}
	next := filepath.Join(filepath.Dir(exe), "freeagent-vm")
	if _, err := os.Stat(next); err != nil && filepath.Base(filepath.Dir(exe)) == "MacOS" {
		inBundle := filepath.Join(filepath.Dir(filepath.Dir(exe)), "Resources", "freeagent-vm")
		if _, err := os.Stat(inBundle); err == nil {
			return inBundle
		}
	}
	return next
}

// flagValue finds --name=value or --name value in args before parsing.
func flagValue(args []string, name string) string {
	for i, a := range args {
		a = strings.TrimLeft(a, "-")
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
		if a == name && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}
