package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const (
	automountTag    = "com.apple.virtio-fs.automount"
	sharedFilesName = "My Shared Files"
	// launchdPath is the PATH launchd gives the jobs it starts.
	launchdPath = "/usr/bin:/bin:/usr/sbin:/sbin"
)

func runSpec() *cmdSpec {
	return &cmdSpec{
		name: "run", abstract: "Run a VM",
		args: []argSpec{{name: "name", help: "VM name"}},
		opts: []optSpec{
			{long: "no-graphics", kind: flagOpt, help: "Don't open a UI window."},
			{long: "serial", kind: flagOpt, help: "Open serial console in /dev/ttySXX"},
			{long: "serial-path", kind: valueOpt, help: "Attach an externally created serial console"},
			{long: "graphics", kind: flagOpt, hidden: true, help: "Force open a UI window, even when VNC is enabled."},
			{long: "no-audio", kind: flagOpt, help: "Disable audio pass-through to host."},
			{long: "no-clipboard", kind: flagOpt, help: "Disable clipboard sharing between host and guest."},
			{long: "recovery", kind: flagOpt, help: "Boot into recovery mode"},
			{long: "vnc", kind: flagOpt, help: "Use screen sharing instead of the built-in UI."},
			{long: "vnc-experimental", kind: flagOpt, help: "Use Virtualization.Framework's VNC server instead of the built-in UI."},
			{long: "disk", kind: valueOpt, repeat: true, valueName: "path[:options]", help: "Additional disk attachments with an optional read-only and synchronization options"},
			{long: "rosetta", kind: valueOpt, valueName: "tag", help: "Attaches a Rosetta share to the guest Linux VM with a specific tag"},
			{long: "dir", kind: valueOpt, repeat: true, valueName: "[name:]path[:options]", help: "Additional directory shares with an optional read-only and mount tag options"},
			{long: "nested", kind: flagOpt, help: "Enable nested virtualization if possible"},
			{long: "net-bridged", kind: valueOpt, repeat: true, valueName: "interface name", help: "Use bridged networking instead of the default shared (NAT) networking"},
			{long: "net-softnet", kind: flagOpt, help: "Use software networking instead of the default shared (NAT) networking"},
			{long: "net-softnet-allow", kind: valueOpt, valueName: "comma-separated CIDRs", help: "Comma-separated list of CIDRs to allow the traffic to when using Softnet isolation"},
			{long: "net-softnet-block", kind: valueOpt, valueName: "comma-separated CIDRs", help: "Comma-separated list of CIDRs to block the traffic to when using Softnet isolation"},
			{long: "net-softnet-expose", kind: valueOpt, valueName: "comma-separated port specifications", help: "Comma-separated list of TCP ports to expose (e.g. --net-softnet-expose 2222:22,8080:80)"},
			{long: "net-host", kind: flagOpt, help: "Restrict network access to the host-only network"},
			{long: "root-disk-opts", kind: valueOpt, valueName: "options", help: "Set the root disk options (e.g. --root-disk-opts=\"ro\" or --root-disk-opts=\"caching=cached,sync=none\")"},
			{long: "suspendable", kind: flagOpt, help: "Disables audio and entropy devices and switches to only Mac-specific input devices."},
			{long: "capture-system-keys", kind: flagOpt, help: "Whether system hot keys should be sent to the guest instead of the host"},
			{long: "no-trackpad", kind: flagOpt, help: "Don't add trackpad as a pointing device on macOS VMs"},
			{long: "no-pointer", kind: flagOpt, help: "Disable the pointer"},
			{long: "no-keyboard", kind: flagOpt, help: "Disable the keyboard"},
		},
		validate: validateRun,
		run:      runRun,
	}
}

// validateRun is Run.validate(): flag conflicts are usage errors (64), a
// missing VM is "Error: the specified VM … does not exist" with exit 1.
func validateRun(a *app, p *parsed) error {
	c := p.cmd
	if p.flag["vnc"] && p.flag["vnc-experimental"] {
		return usageErr(c, "--vnc and --vnc-experimental are mutually exclusive", "")
	}
	netFlags := 0
	if len(p.vals["net-bridged"]) > 0 {
		netFlags++
	}
	if p.flag["net-softnet"] || p.has("net-softnet-allow") || p.has("net-softnet-block") || p.has("net-softnet-expose") {
		netFlags++
	}
	if p.flag["net-host"] {
		netFlags++
	}
	if netFlags > 1 {
		return usageErr(c, "--net-bridged, --net-softnet and --net-host are mutually exclusive", "")
	}
	if p.flag["graphics"] && p.flag["no-graphics"] {
		return usageErr(c, "--graphics and --no-graphics are mutually exclusive", "")
	}
	if (p.flag["no-graphics"] || p.flag["vnc"] || p.flag["vnc-experimental"]) && p.flag["capture-system-keys"] {
		return usageErr(c, "--captures-system-keys can only be used with the default VM view", "")
	}
	vm, err := a.home.openLocal(p.pos[0])
	if err != nil {
		return err
	}
	suspendable := p.flag["suspendable"] || vm.state() == "suspended"
	if suspendable || p.flag["no-trackpad"] {
		cfg, err := readConfig(vm.config())
		if err != nil {
			return err
		}
		if suspendable {
			if cfg.OS != "darwin" {
				return usageErr(c, "You can only suspend macOS VMs", "")
			}
			for _, f := range []string{"no-trackpad", "no-keyboard", "no-pointer"} {
				if p.flag[f] {
					return usageErr(c, "--"+f+" cannot be used with --suspendable", "")
				}
			}
		}
		if p.flag["no-trackpad"] && cfg.OS != "darwin" {
			return usageErr(c, "--no-trackpad can only be used with macOS VMs", "")
		}
	}
	for _, d := range p.vals["disk"] {
		if strings.HasSuffix(d, "-amd64.iso") {
			return usageErr(c, "Seems you have a disk targeting x86 architecture (hence amd64 in the name). Please use an 'arm64' version of the disk.", "")
		}
	}
	return nil
}

// checkRootDiskOpts is DiskOptions(parseFrom:) and the mode initialisers
// VM(…)'s arguments call (Run.swift): unknown options are ignored, an
// unknown sync= or caching= mode is a RuntimeError.VMConfigurationError
// (no prefix, exit 1), found after the shares are parsed and before the
// configuration is validated.
func checkRootDiskOpts(opts string) error {
	syncMode, caching := "", ""
	for _, o := range splitNonEmpty(opts, ",") {
		switch {
		case strings.HasPrefix(o, "sync="):
			syncMode = strings.TrimPrefix(o, "sync=")
		case strings.HasPrefix(o, "caching="):
			caching = strings.TrimPrefix(o, "caching=")
		}
	}
	switch syncMode {
	case "", "none", "fsync", "full":
	default:
		return runtimeErr(1, "unsupported disk image synchronization mode: \"%s\"", syncMode)
	}
	switch caching {
	case "", "automatic", "cached", "uncached":
	default:
		return runtimeErr(1, "unsupported disk image caching mode: \"%s\"", caching)
	}
	return nil
}

// ---- --dir ---------------------------------------------------------------

type dirShare struct {
	name     string // "" for an unnamed share
	path     string // absolute host path
	readOnly bool
	tag      string
	raw      string
}

func splitNonEmpty(s, sep string) []string {
	var out []string
	for _, p := range strings.Split(s, sep) {
		if p != "" {
			out = append(out, p)
		}
	}
	return out
}

// parseDirShare is DirectoryShare(parseFrom:): options only in the last
// colon-separated segment, the name is what precedes the first colon.
func parseDirShare(raw string) (dirShare, error) {
	d := dirShare{tag: automountTag, raw: raw}
	args := splitNonEmpty(raw, ":")
	if len(args) == 0 {
		return d, genericErr("invalid --dir syntax: %q", raw)
	}
	found := false
	for _, opt := range splitNonEmpty(args[len(args)-1], ",") {
		switch {
		case opt == "ro":
			d.readOnly, found = true, true
		case strings.HasPrefix(opt, "tag="):
			d.tag, found = opt[4:], true
		}
	}
	if found {
		args = args[:len(args)-1]
	}
	rest := strings.Join(args, ":")
	if strings.HasPrefix(rest, "http:") || strings.HasPrefix(rest, "https:") {
		return d, genericErr("faketart: remote --dir archives are not supported (%s)", rest)
	}
	var path string
	if name, p, ok := strings.Cut(rest, ":"); ok && name != "" {
		d.name, path = name, p
	} else {
		path = strings.TrimPrefix(rest, ":")
	}
	path = expandTilde(path)
	abs, err := filepath.Abs(path)
	if err != nil {
		return d, genericErr("%v", err)
	}
	d.path = abs
	return d, nil
}

func expandTilde(p string) string {
	if p == "~" || strings.HasPrefix(p, "~/") {
		if h, err := os.UserHomeDir(); err == nil {
			return h + p[1:]
		}
	}
	return p
}

// shareGroups groups shares by mount tag and enforces tart's naming rule.
func shareGroups(shares []dirShare) (map[string][]dirShare, error) {
	groups := map[string][]dirShare{}
	for _, s := range shares {
		groups[s.tag] = append(groups[s.tag], s)
	}
	for _, g := range groups {
		if len(g) == 1 && g[0].name == "" {
			continue
		}
		for _, s := range g {
			if s.name == "" {
				// Thrown from run(), hence the root command's usage.
				return nil, usageErr(nil, "invalid --dir syntax: for multiple directory shares each one of them should be named", "")
			}
		}
	}
	return groups, nil
}

// roMount is a read-only share: the guest sees host path src at dst, a
// bind mount made read-only in the guest's own mount namespace (see
// roWrap), so a write fails there as it does through Tart's virtio-fs.
type roMount struct{ src, dst string }

// buildGuestShares lays out the guest's view of the shares:
// <guest>/Volumes/My Shared Files for the automount tag (macOS automounts it)
// and <guest>/tags/<tag> for custom tags (not automounted on real macOS).
// A writable share is a symbolic link to its host path; a read-only one an
// empty directory, returned to be mounted over in the guest's namespace.
func buildGuestShares(guestRoot string, groups map[string][]dirShare) ([]roMount, error) {
	var ro []roMount
	place := func(s dirShare, at string) error {
		if s.readOnly {
			ro = append(ro, roMount{src: s.path, dst: at})
			return os.MkdirAll(at, 0o755)
		}
		return os.Symlink(s.path, at)
	}
	for _, d := range []string{"Volumes", "tags"} {
		if err := os.RemoveAll(filepath.Join(guestRoot, d)); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(filepath.Join(guestRoot, "Volumes"), 0o755); err != nil {
		return nil, err
	}
	for tag, g := range groups {
		var mount string
		if tag == automountTag {
			mount = filepath.Join(guestRoot, "Volumes", sharedFilesName)
		} else {
			mount = filepath.Join(guestRoot, "tags", strings.ReplaceAll(tag, "/", "_"))
		}
		if err := os.MkdirAll(filepath.Dir(mount), 0o755); err != nil {
			return nil, err
		}
		if len(g) == 1 && g[0].name == "" {
			if err := place(g[0], mount); err != nil {
				return nil, err
			}
			continue
		}
		if err := os.MkdirAll(mount, 0o755); err != nil {
			return nil, err
		}
		for _, s := range g {
			link := filepath.Join(mount, s.name)
			_ = os.Remove(link)
			if err := place(s, link); err != nil {
				return nil, err
			}
		}
	}
	return ro, nil
}

// ---- run -----------------------------------------------------------------

type guestSpec struct {
	Argv []string          `json:"argv"`
	Env  map[string]string `json:"env"`
}

// Files that must stay open for the life of the process. Keeping them in
// package variables also keeps the garbage collector from finalizing (and
// thereby closing) them: closing the config.json fd would drop the lock.
var (
	heldConfigLock *os.File
	heldSlot       *os.File
	heldReaperPipe *os.File
)

type runState struct {
	a        *app
	vm       vmDir
	fdir     string // vms/<n>/.faketart
	guest    *guestProc
	slotPath string
	net      *vmnetLease // FAKETART_NET=vmnet: the VM's address
	ro       []roMount   // read-only shares, mounted in the guest's namespace
}

func runRun(a *app, p *parsed) error {
	// tart handles SIGINT itself (cancels the run task); SIGUSR1/2 likewise.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGUSR1, syscall.SIGUSR2)

	name := p.pos[0]
	vm, err := a.home.openLocal(name)
	if err != nil {
		return err
	}
	// Read the configuration before taking the lock and never open
	// config.json again in this process (see PIDLock's "stupid semantics").
	cfg, err := readConfig(vm.config())
	if err != nil {
		return genericErr("%v", err)
	}

	global, err := a.home.globalLock()
	if err != nil {
		return genericErr("%v", err)
	}
	// MAC collision with another running VM.
	for _, other := range a.home.listLocal() {
		if other.name == name || !other.running() {
			continue
		}
		if oc, err := readConfig(other.config()); err == nil && oc.MACAddress == cfg.MACAddress {
			a.println("There is already a running VM with the same MAC address!")
			a.println("Resetting VM to assign a new MAC address...")
			cfg.MACAddress = randomMAC()
			_ = os.Remove(vm.file(stateFile))
			if err := cfg.save(vm.config()); err != nil {
				global.Close()
				return genericErr("%v", err)
			}
			break
		}
	}

	// Softnet (--net-softnet, implied by --net-softnet-allow/-block/-expose,
	// and --net-host) is a separate program Tart looks up on its own PATH
	// when it configures the VM's network, before the shares.
	useSoftnet := p.flag["net-softnet"] || p.flag["net-host"] || p.has("net-softnet-allow") || p.has("net-softnet-block") || p.has("net-softnet-expose")
	if useSoftnet && !onPath("softnet") {
		global.Close()
		return genericErr(`InitializationFailed(why: "softnet not found in PATH")`)
	}

	// Directory shares (VM configuration happens before locking in tart).
	var shares []dirShare
	for _, raw := range p.vals["dir"] {
		s, err := parseDirShare(raw)
		if err != nil {
			global.Close()
			return err
		}
		shares = append(shares, s)
	}
	groups, err := shareGroups(shares)
	if err != nil {
		global.Close()
		return err
	}
	if err := checkRootDiskOpts(p.strDefault("root-disk-opts", "")); err != nil {
		global.Close()
		return err
	}
	for _, s := range shares {
		st, err := os.Stat(s.path)
		if err != nil || !st.IsDir() {
			global.Close()
			return genericErr("Invalid virtual machine configuration. The directory share path %q does not exist or is not a directory.", s.path)
		}
	}

	// Lock the VM.
	lockFile, err := os.OpenFile(vm.config(), os.O_RDWR, 0)
	if err != nil {
		global.Close()
		return runtimeErr(1, "failed to open lock file %s: %v", vm.config(), err)
	}
	ok, err := tryLock(lockFile)
	if err != nil {
		global.Close()
		return runtimeErr(1, "failed to lock %s: %v", vm.config(), err)
	}
	if !ok {
		lockFile.Close()
		global.Close()
		return runtimeErr(2, "VM %q is already running!", name)
	}
	heldConfigLock = lockFile

	rs := &runState{a: a, vm: vm, fdir: filepath.Join(vm.path, fakeDir)}

	// The macOS VM limit (Virtualization.framework refuses a third VM).
	if cfg.OS == "darwin" {
		if err := rs.acquireSlot(); err != nil {
			global.Close()
			return err
		}
	}
	global.Close()

	// softnet itself refuses a bad list (Tart passes it on unread) once
	// the VM starts: after the lock and the VM limit.
	var softnet *softnetPolicy
	if useSoftnet {
		if softnet, err = parseSoftnet(softnetArgs{
			allow:  p.optional("net-softnet-allow"),
			block:  p.optional("net-softnet-block"),
			expose: p.optional("net-softnet-expose"),
			host:   p.flag["net-host"],
		}); err != nil {
			return rs.exit(err)
		}
		if err := softnetBecomesRoot(); err != nil {
			return rs.exit(err)
		}
	}

	if vmnetEnabled() {
		lease, err := acquireVMNet(name)
		if err != nil {
			return rs.exit(genericErr("%v", err))
		}
		rs.net = lease
		removeSoftnet(lease.n) // what a killed run with this lease left
		if softnet != nil {
			if err := applySoftnet(lease, softnet); err != nil {
				return rs.exit(genericErr("%v", err))
			}
			lease.softnet = true
		}
	}

	// Prepare the guest filesystem view.
	guestRoot := filepath.Join(rs.fdir, "guest")
	home := filepath.Join(guestRoot, "Users", "admin")
	for _, d := range []string{home, filepath.Join(guestRoot, "tmp")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return rs.exit(genericErr("%v", err))
		}
	}
	if rs.ro, err = buildGuestShares(guestRoot, groups); err != nil {
		return rs.exit(genericErr("%v", err))
	}
	poweroff := filepath.Join(rs.fdir, "poweroff")
	booted := filepath.Join(rs.fdir, "booted")
	_ = os.Remove(poweroff)
	_ = os.Remove(booted)
	_ = os.Remove(filepath.Join(rs.fdir, ipFile))

	// A suspended VM resumes from its snapshot instead of booting (Tart
	// checks for the state file once the VM is locked, then removes it).
	suspendable := p.flag["suspendable"]
	bootDelay := delayEnv("FAKETART_BOOT_DELAY", 200*time.Millisecond) + delayEnv("FAKETART_LOGIN_DELAY", 0)
	if _, err := os.Stat(vm.file(stateFile)); err == nil {
		suspendable = true
		a.println("restoring VM state from a snapshot...")
		if err := os.Remove(vm.file(stateFile)); err != nil {
			return rs.exit(genericErr("%v", err))
		}
		a.println("resuming VM...")
		bootDelay = delayEnv("FAKETART_RESUME_DELAY", 200*time.Millisecond)
	}
	bootTimer := time.NewTimer(bootDelay)

	var failTimer <-chan time.Time
	var failMsg string
	if spec := os.Getenv("FAKETART_RUN_FAIL"); spec != "" {
		delay := time.Duration(0)
		failMsg = spec
		if i := strings.IndexByte(spec, ':'); i >= 0 {
			if d, ok := parseDelay(spec[:i]); ok {
				delay, failMsg = d, spec[i+1:]
			}
		}
		if failMsg == "" {
			failMsg = `Error Domain=VZErrorDomain Code=1 "The virtual machine failed to start." UserInfo={NSLocalizedFailure=The virtual machine failed to start.}`
		}
		if delay == 0 {
			return rs.exit(runtimeErr(1, "%s", failMsg))
		}
		failTimer = time.After(delay)
	}

	shutdownOnGuestExit := os.Getenv("FAKETART_GUEST_EXIT") == "shutdown"
	var poweroffTick <-chan time.Time
	var guestDone <-chan struct{}
	requestedStop := false

	for {
		select {
		case sig := <-sigs:
			switch sig {
			case syscall.SIGINT:
				a.println("Stopping VM...")
				return rs.exit(nil)
			case syscall.SIGUSR2:
				a.println("Requesting guest OS to stop...")
				if rs.guest == nil || rs.guest.exited() {
					a.println("guest has stopped the virtual machine")
					return rs.exit(nil)
				}
				requestedStop = true
				rs.guest.signalGroup(syscall.SIGTERM)
			case syscall.SIGUSR1:
				// Virtualization.framework saves only a configuration built
				// for it (--suspendable), on macOS 14 or newer; Tart prints
				// the failure and exits, which powers the VM off.
				why := os.Getenv("FAKETART_SUSPEND_FAIL")
				if why == "" && !suspendable {
					why = saveRestoreUnsupported
				}
				if why != "" {
					a.println("Failed to suspend the VM: %s", why)
					return rs.exit(&exitError{code: 1})
				}
				a.println("pausing VM to take a snapshot...")
				a.println("creating a snapshot...")
				if err := os.WriteFile(vm.file(stateFile), []byte("faketart snapshot\n"), 0o644); err != nil {
					return rs.exit(genericErr("%v", err))
				}
				a.println("snapshot created successfully! shutting down the VM...")
				return rs.exit(nil)
			}
		case <-bootTimer.C:
			cpu := strconv.Itoa(cfg.CPUCount)
			mem := strconv.FormatUint(cfg.MemorySize/1024/1024, 10)
			g, err := rs.bootGuest(guestRoot, home, poweroff, cpu, mem)
			if err != nil {
				return rs.exit(genericErr("%v", err))
			}
			rs.guest = g
			if g != nil {
				guestDone = g.done
				a.extra = map[string]any{"guest_pid": g.pid}
			}
			_ = os.WriteFile(booted, []byte(strconv.Itoa(os.Getpid())), 0o644)
			a.writeLog("boot", nil)
			a.extra = nil
			t := time.NewTicker(100 * time.Millisecond)
			defer t.Stop()
			poweroffTick = t.C
		case <-guestDone:
			guestDone = nil
			if shutdownOnGuestExit || requestedStop {
				a.println("guest has stopped the virtual machine")
				return rs.exit(nil)
			}
			// A macOS guest does not power off when a launchd job ends.
		case <-poweroffTick:
			if _, err := os.Stat(poweroff); err == nil {
				a.println("guest has stopped the virtual machine")
				return rs.exit(nil)
			}
		case <-failTimer:
			return rs.exit(runtimeErr(1, "%s", failMsg))
		}
	}
}

// saveRestoreUnsupported is how the fake words Virtualization.framework's
// refusal to save a VM configured without --suspendable (audio input, an
// entropy device, a trackpad); the real text is the framework's own.
const saveRestoreUnsupported = "The virtual machine configuration does not support saving and restoring its state."

// delayEnv is the duration in the variable k, def when it is unset or
// unreadable.
func delayEnv(k string, def time.Duration) time.Duration {
	if d, ok := parseDelay(envOr(k, "")); ok && os.Getenv(k) != "" {
		return d
	}
	return def
}

// onPath is Tart's resolveBinaryPath: a file of that name in a directory
// of $PATH (existence only, as Tart checks).
func onPath(name string) bool {
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		if dir == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			return true
		}
	}
	return false
}

// exit powers the VM off (SIGKILL to the guest's process group, waiting until
// no member is left) and returns err. The config.json lock is released by the
// kernel when the process exits.
func (rs *runState) exit(err error) error {
	if rs.guest != nil {
		rs.guest.powerOff()
	}
	if rs.net != nil && rs.net.softnet {
		removeSoftnet(rs.net.n)
	}
	_ = os.Remove(filepath.Join(rs.fdir, "booted"))
	_ = os.Remove(filepath.Join(rs.fdir, ipFile))
	if rs.slotPath != "" {
		_ = os.Remove(rs.slotPath)
	}
	if err == nil {
		return nil
	}
	var ee *exitError
	if errors.As(err, &ee) && ee.msg == "" {
		// Exit code only (message already printed on stdout).
		return ee
	}
	return err
}

// acquireSlot enforces FAKETART_MAX_MACOS_VMS (default 2) running darwin
// VMs: in this TART_HOME by probing the other VMs' config.json locks, or
// host-wide across homes through lock-held slot files in FAKETART_SLOTS_DIR.
// Called with the $TART_HOME flock held (and the slots dir flock), so two
// starting VMs cannot both take the last slot.
func (rs *runState) acquireSlot() error {
	max := 2
	if s := os.Getenv("FAKETART_MAX_MACOS_VMS"); s != "" {
		if n, err := strconv.Atoi(s); err == nil {
			max = n
		}
	}
	slots := os.Getenv("FAKETART_SLOTS_DIR")
	if slots == "" {
		darwin := 0
		for _, v := range rs.a.home.listLocal() {
			if v.name == rs.vm.name || !v.running() {
				continue
			}
			if c, err := readConfig(v.config()); err == nil && c.OS == "darwin" {
				darwin++
			}
		}
		if darwin >= max {
			return rs.limitExceeded()
		}
		return nil
	}
	if err := os.MkdirAll(slots, 0o755); err != nil {
		return genericErr("%v", err)
	}
	l, _, err := flockPath(slots, true)
	if err != nil {
		return genericErr("%v", err)
	}
	defer l.Close()
	entries, _ := os.ReadDir(slots)
	held := 0
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".slot") {
			continue
		}
		p := filepath.Join(slots, e.Name())
		if lockHolder(p) == 0 {
			_ = os.Remove(p) // stale: its VM died
			continue
		}
		held++
	}
	if held >= max {
		return rs.limitExceeded()
	}
	p := filepath.Join(slots, fmt.Sprintf("%d-%s.slot", os.Getpid(), newUUID()))
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return genericErr("%v", err)
	}
	if _, err := f.WriteString(rs.vm.name + "\n"); err != nil {
		f.Close()
		return genericErr("%v", err)
	}
	if ok, err := tryLock(f); err != nil || !ok {
		f.Close()
		return genericErr("failed to lock slot file %s: %v", p, err)
	}
	heldSlot = f
	rs.slotPath = p
	return nil
}

// limitExceeded is Tart's RuntimeError.VirtualMachineLimitExceeded, thrown
// when Virtualization.framework refuses to start the VM (exit 1). Its hint
// names the running VMs of this TART_HOME only, whatever their OS, and is
// left out when there are none: VMs of other homes, users or apps count
// towards the host's limit but are not named.
func (rs *runState) limitExceeded() error {
	var running []string
	for _, v := range rs.a.home.listLocal() {
		if v.name != rs.vm.name && v.running() {
			running = append(running, v.name)
		}
	}
	hint := ""
	if len(running) > 0 {
		hint = " (other running VMs: " + strings.Join(running, ", ") + ")"
	}
	return runtimeErr(1, "The number of VMs exceeds the system limit%s", hint)
}

// bootGuest starts the guest program described by fake-guest.json (copied
// from the template by clone) or, failing that, $FAKETART_GUEST_CMD (run
// with /bin/sh -c). No program → a VM that boots and idles. A program that
// cannot be started is logged to guest.log, and the VM keeps running (like
// a broken launchd job in a real guest).
func (rs *runState) bootGuest(guestRoot, home, poweroff, cpu, mem string) (*guestProc, error) {
	var spec guestSpec
	data, err := os.ReadFile(rs.vm.file(guestFile))
	switch {
	case err == nil:
		if err := json.Unmarshal(data, &spec); err != nil {
			return nil, fmt.Errorf("faketart: invalid %s: %v", guestFile, err)
		}
	case os.Getenv("FAKETART_GUEST_CMD") != "":
		spec.Argv = []string{"/bin/sh", "-c", os.Getenv("FAKETART_GUEST_CMD")}
	}
	logPath := filepath.Join(rs.fdir, "guest.log")
	logFile, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	if len(spec.Argv) == 0 {
		// An idle VM still holds its lease, and `tart ip` shows it.
		if rs.net != nil {
			return nil, os.WriteFile(filepath.Join(rs.fdir, ipFile), []byte(rs.net.addr()), 0o644)
		}
		return nil, nil
	}

	// What launchd gives a LaunchAgent in the guest: its own PATH (not the
	// host's, nor a shell profile's) and the user's basics. The spec's env
	// plays the job's EnvironmentVariables and overrides these.
	env := []string{
		"PATH=" + launchdPath,
		"HOME=" + home,
		"USER=admin",
		"LOGNAME=admin",
		"SHELL=/bin/sh",
		"TMPDIR=" + filepath.Join(guestRoot, "tmp"),
	}
	for _, k := range splitNonEmpty(os.Getenv("FAKETART_GUEST_PASSENV"), ",") {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	keys := make([]string, 0, len(spec.Env))
	for k := range spec.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, k+"="+spec.Env[k])
	}
	env = append(env,
		"TART_FAKE_VM_NAME="+rs.vm.name,
		"TART_FAKE_GUEST_ROOT="+guestRoot,
		"TART_FAKE_SHARED_FILES="+filepath.Join(guestRoot, "Volumes", sharedFilesName),
		"TART_FAKE_CPU="+cpu,
		"TART_FAKE_MEMORY_MB="+mem,
		"TART_FAKE_POWEROFF="+poweroff,
	)

	cmd := exec.Command(spec.Argv[0], spec.Argv[1:]...)
	cmd.Env = env
	cmd.Dir = home
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	if cmd.Err != nil {
		fmt.Fprintf(logFile, "faketart: failed to start guest program %q: %v\n", spec.Argv[0], cmd.Err)
		return nil, nil
	}
	mountns := len(rs.ro) > 0
	if mountns {
		if cmd, err = roWrap(cmd, rs.ro); err != nil {
			return nil, err
		}
	}
	if rs.net == nil {
		g, err := startGuest(cmd, false, mountns)
		if err != nil {
			fmt.Fprintf(logFile, "faketart: failed to start guest program %q: %v\n", spec.Argv[0], err)
			return nil, nil
		}
		g.startReaper()
		return g, nil
	}
	wrapped, ready, err := rs.net.wrap(cmd)
	if err != nil {
		return nil, err
	}
	g, err := startGuest(wrapped, true, mountns)
	wrapped.ExtraFiles[0].Close()
	if err != nil {
		ready.Close()
		return nil, err
	}
	g.startReaper()
	if err := rs.net.attach(g.pid, ready); err != nil {
		g.powerOff()
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(rs.fdir, ipFile), []byte(rs.net.addr()), 0o644); err != nil {
		g.powerOff()
		return nil, err
	}
	return g, nil
}

// ---- the guest process ---------------------------------------------------

type guestProc struct {
	cmd  *exec.Cmd
	pid  int // also the process group id
	done chan struct{}
}

func (g *guestProc) exited() bool {
	select {
	case <-g.done:
		return true
	default:
		return false
	}
}

func (g *guestProc) signalGroup(sig syscall.Signal) {
	_ = syscall.Kill(-g.pid, sig)
}

// powerOff is VZVirtualMachine.stop(): kill everything the guest runs and
// wait until it is gone.
func (g *guestProc) powerOff() {
	killGuest(g.pid, syscall.SIGKILL)
	select {
	case <-g.done:
	case <-time.After(5 * time.Second):
	}
	deadline := time.Now().Add(2 * time.Second)
	for guestAlive(g.pid) && time.Now().Before(deadline) {
		killGuest(g.pid, syscall.SIGKILL)
		time.Sleep(10 * time.Millisecond)
	}
	if heldReaperPipe != nil {
		// Tell the reaper the VM was powered off cleanly.
		_, _ = heldReaperPipe.Write([]byte{'x'})
		heldReaperPipe.Close()
		heldReaperPipe = nil
	}
}

// startReaper starts `tart __fake reaper <pgid>` in its own process group,
// holding the read end of a pipe whose write end only this process has. If
// this process dies in any way (even SIGKILL) the reaper sees EOF and kills
// the guest's whole process group — Pdeathsig alone only reaches the guest's
// first process, not what it has spawned.
func (g *guestProc) startReaper() {
	self, err := selfExe()
	if err != nil {
		return
	}
	r, w, err := os.Pipe()
	if err != nil {
		return
	}
	cmd := exec.Command(self, "__fake", "reaper", strconv.Itoa(g.pid))
	cmd.Args[0] = os.Args[0]
	cmd.Stdin = r
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		return
	}
	r.Close()
	heldReaperPipe = w
	go func() { _ = cmd.Wait() }()
}

// ---- hidden helpers: tart __fake … ---------------------------------------

func fakeInternal(args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "usage: tart __fake reaper <pgid> | hold [--ignore-sigint] <name>")
		return 64
	}
	switch args[0] {
	case "reaper":
		return fakeReaper(args[1:])
	case "hold":
		return fakeHold(args[1:])
	case "vmnet-guest":
		return fakeVMNetGuest(args[1:])
	case "ro-guest":
		return fakeROGuest(args[1:])
	}
	fmt.Fprintf(os.Stderr, "faketart: unknown internal command %q\n", args[0])
	return 64
}

func fakeReaper(args []string) int {
	if len(args) != 1 {
		return 64
	}
	pgid, err := strconv.Atoi(args[0])
	if err != nil || pgid <= 1 {
		return 64
	}
	signal.Ignore(syscall.SIGINT, syscall.SIGHUP, syscall.SIGTERM)
	buf := make([]byte, 1)
	n, _ := os.Stdin.Read(buf)
	if n == 0 {
		// tart run died without powering the VM off.
		killGuest(pgid, syscall.SIGKILL)
	}
	return 0
}

// fakeHold makes a VM look running without booting anything: it holds the
// config.json lock until SIGINT (or forever with --ignore-sigint, to test
// `tart stop`'s SIGKILL escalation) or until killed.
func fakeHold(args []string) int {
	ignore := false
	var name string
	for _, a := range args {
		if a == "--ignore-sigint" {
			ignore = true
		} else {
			name = a
		}
	}
	home, err := openHome()
	if err != nil || name == "" {
		fmt.Fprintln(os.Stderr, "usage: tart __fake hold [--ignore-sigint] <name>")
		return 64
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT)
	f, err := os.OpenFile(home.localVM(name).config(), os.O_RDWR, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, vmDoesNotExist(name).msg)
		return 2
	}
	if ok, _ := tryLock(f); !ok {
		fmt.Fprintf(os.Stderr, "VM %q is already running!\n", name)
		return 2
	}
	heldConfigLock = f
	fmt.Println("holding")
	for range sigs {
		if !ignore {
			return 0
		}
	}
	return 0
}
