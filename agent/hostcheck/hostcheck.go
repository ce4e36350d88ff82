// Package hostcheck inspects the worker's host: Tart, the VM template, free
// disk, the macOS VM limit, the VM network's DHCP lease time, the controller
// and the stored credentials. The menu bar shows the failures as "needs
// attention"; `freeagent doctor` prints them all. Every result says what is wrong and how to fix it.
package hostcheck

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/freeagent-build/freeagent/agent"
	"github.com/freeagent-build/freeagent/agent/hostsignals"
	"github.com/freeagent-build/freeagent/agent/secrets"
	"github.com/freeagent-build/freeagent/agent/tart"
	"github.com/freeagent-build/freeagent/api"
)

// Severity of a result.
type Severity string

const (
	OK   Severity = "ok"
	Warn Severity = "warn"
	Fail Severity = "fail"
)

// Check ids, stable for scripts reading `freeagent doctor --json`.
const (
	IDCredentials = "credentials"
	IDController  = "controller"
	IDTart        = "tart"
	IDTemplate    = "template"
	IDVMLimit     = "vm_limit"
	IDDisk        = "disk"
	IDDHCPLease   = "dhcp_lease"
	IDHostRules   = "host_rules"
)

// Result is one check's outcome.
type Result struct {
	ID       string   `json:"id"`
	Severity Severity `json:"severity"`
	Message  string   `json:"message"`
	Fix      string   `json:"fix,omitempty"`
}

// Config says what to check.
type Config struct {
	ControllerURL string
	APIKey        string        // the key in use (environment or store)
	KeyStore      secrets.Store // where the key is kept, named in messages
	// Tart is nil when builds do not run in Tart VMs (the local driver):
	// the Tart, template, VM-limit and DHCP lease checks are then left out.
	Tart *tart.Driver
	// Platforms is the owner's choice of what to build (empty: none made),
	// checked against the template (see Platforms) or, with Local, against
	// this host's tools (see LocalPlatforms).
	Platforms []string
	// Local is the host's toolchain when builds run on it (the local
	// driver); nil with Tart.
	Local   *Toolchain
	DataDir string // the disk that holds build scratch space
	MinFree uint64 // bytes; less free space fails the disk check
	HTTP    *http.Client
	Timeout time.Duration // per network check
	// Insecure: the owner allowed a plain-http controller on another
	// machine (--insecure); otherwise such a URL fails the controller check.
	Insecure bool

	// Host applies the owner's rules for taking builds (nil: not checked).
	Host *hostsignals.Gate

	// InternetSharingPlist holds the DHCP lease time of Tart's VM network
	// (checked with Tart); empty: the system's, InternetSharingPlist.
	InternetSharingPlist string
}

// DefaultMinFree is the free space a build needs: the clone of a template is
// copy-on-write, but Xcode's derived data and the artifacts are not.
const DefaultMinFree = 30 << 30

// Run runs every check that applies, in a fixed order.
func Run(ctx context.Context, cfg Config) []Result {
	rs := []Result{Credentials(cfg), Controller(ctx, cfg)}
	if cfg.Tart != nil {
		rs = append(rs, Tart(ctx, cfg.Tart))
		if rs[len(rs)-1].Severity != Fail {
			_, platforms := Platforms(cfg.Tart, cfg.Platforms)
			rs = append(rs, Template(ctx, cfg.Tart), platforms, VMLimit(ctx, cfg.Tart))
		}
		plistPath := cfg.InternetSharingPlist
		if plistPath == "" {
			plistPath = InternetSharingPlist
		}
		rs = append(rs, Softnet(ctx, cfg.Tart), DHCPLease(plistPath))
	}
	if cfg.Local != nil {
		_, platforms := LocalPlatforms(cfg.Platforms, *cfg.Local)
		rs = append(rs, platforms)
	}
	rs = append(rs, Disk(cfg.DataDir, cfg.MinFree))
	if cfg.Host != nil {
		rs = append(rs, HostRules(ctx, cfg.Host))
	}
	return rs
}

// HostRules says whether the owner's rules let a build start now, and
// what the host reads. Held back is a warning, not a failure: the worker
// waits by itself and resumes when the condition clears.
func HostRules(ctx context.Context, g *hostsignals.Gate) Result {
	v := g.Check(ctx)
	r := Result{ID: IDHostRules, Severity: OK, Message: "builds may start (" + describe(v.Signals) + ")"}
	if len(v.Reasons) > 0 {
		r.Severity = Warn
		r.Message = "builds wait: " + strings.Join(v.Reasons, "; ") + " (" + describe(v.Signals) + ")"
		r.Fix = "nothing to do: builds start by themselves when this clears; the rules are in Preferences… (agent.conf: build-on-battery, idle-minutes, pause-thermal, schedule, min-free-gb)"
	}
	if v.Err != nil {
		r.Message += "; some readings failed and count as unknown: " + v.Err.Error()
	}
	return r
}

// describe is one line of host readings.
func describe(s hostsignals.Signals) string {
	var parts []string
	switch {
	case s.OnBattery && s.BatteryPercent != nil:
		parts = append(parts, fmt.Sprintf("on battery at %d%%", *s.BatteryPercent))
	case s.OnBattery:
		parts = append(parts, "on battery")
	default:
		parts = append(parts, "on mains power")
	}
	if s.IdleSeconds != nil {
		parts = append(parts, fmt.Sprintf("last input %s ago", (time.Duration(*s.IdleSeconds)*time.Second).String()))
	} else {
		parts = append(parts, "idle time unknown")
	}
	if s.Thermal != "" {
		parts = append(parts, "thermal "+string(s.Thermal))
	}
	if s.MemoryPressure != "" {
		parts = append(parts, "memory pressure "+s.MemoryPressure)
	}
	if s.FreeDiskBytes != nil {
		parts = append(parts, gb(*s.FreeDiskBytes)+" free")
	}
	return strings.Join(parts, ", ")
}

// Failed returns the results that are not OK and fail.
func Failed(rs []Result) []Result {
	var out []Result
	for _, r := range rs {
		if r.Severity == Fail {
			out = append(out, r)
		}
	}
	return out
}

// Credentials checks that an API key is set.
func Credentials(cfg Config) Result {
	r := Result{ID: IDCredentials}
	switch {
	case cfg.APIKey != "":
		r.Severity, r.Message = OK, "API key present"
		if cfg.KeyStore != nil {
			r.Message += " (" + cfg.KeyStore.Where() + ")"
		}
	default:
		r.Severity, r.Message = Fail, "no API key stored"
		r.Fix = "enter a worker API key in Preferences…, or run `freeagent setup --api-key-stdin < key.txt`"
	}
	return r
}

// Controller checks that the controller answers GET /health and accepts the
// API key as a worker key. The key is tested with a registration whose body
// is malformed: the key is checked first (401 unknown, 403 wrong role), and
// a known key then gets 400 without anything being registered.
func Controller(ctx context.Context, cfg Config) Result {
	r := Result{ID: IDController, Severity: Fail}
	if cfg.ControllerURL == "" {
		r.Message = "no controller URL set"
		r.Fix = "enter it in Preferences…, or run `freeagent setup --controller-url URL`"
		return r
	}
	if err := api.CheckTransport(cfg.ControllerURL); err != nil && !cfg.Insecure {
		r.Message = err.Error()
		r.Fix = "enter the controller's https:// URL; to go on unencrypted anyway set insecure = true in agent.conf (or FREEAGENT_INSECURE=1, --insecure)"
		return r
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c := &api.Client{BaseURL: strings.TrimRight(cfg.ControllerURL, "/"), APIKey: cfg.APIKey, HTTP: cfg.HTTP, UserAgent: "freeagent-doctor"}
	req, err := c.NewRequest(ctx, http.MethodGet, "/health", nil, nil)
	if err != nil {
		r.Message = fmt.Sprintf("controller URL %q is not usable: %v", cfg.ControllerURL, err)
		r.Fix = "set a URL such as https://builds.example.com in Preferences…"
		return r
	}
	resp, err := httpClient(cfg).Do(req)
	if err != nil {
		r.Message = fmt.Sprintf("controller %s unreachable: %v", cfg.ControllerURL, err)
		r.Fix = "check the URL in Preferences…, this Mac's network, and that the controller is running"
		return r
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		r.Message = fmt.Sprintf("controller %s answered /health with %s", cfg.ControllerURL, resp.Status)
		r.Fix = "check that the URL points at a Free Agent controller and that it is healthy"
		if loc := resp.Header.Get("Location"); loc != "" {
			r.Fix = fmt.Sprintf("the URL redirects to %s: set the controller URL to where it leads (the worker key is never sent on a redirect)", loc)
		}
		return r
	}
	if cfg.APIKey == "" {
		r.Severity, r.Message = Warn, fmt.Sprintf("controller %s reachable; no API key to test", cfg.ControllerURL)
		r.Fix = "enter a worker API key in Preferences…"
		return r
	}
	req, err = c.NewRequest(ctx, http.MethodPost, "/api/workers/register", strings.NewReader("[]"), map[string]string{"Content-Type": "application/json"})
	if err != nil {
		r.Message = err.Error()
		return r
	}
	resp, err = httpClient(cfg).Do(req)
	if err != nil {
		r.Message = fmt.Sprintf("controller %s unreachable: %v", cfg.ControllerURL, err)
		r.Fix = "check this Mac's network and that the controller is running"
		return r
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusBadRequest, http.StatusUnprocessableEntity:
		r.Severity, r.Message = OK, fmt.Sprintf("controller %s reachable; API key accepted", cfg.ControllerURL)
	case http.StatusUnauthorized:
		r.Message = "the controller does not know this API key (revoked or mistyped)"
		r.Fix = "create one with `freeagent-controller keys create --role worker` and enter it in Preferences…"
	case http.StatusForbidden:
		r.Message = "this API key is not a worker key"
		r.Fix = "use a key created with `--role worker` (or admin)"
	default:
		r.Message = fmt.Sprintf("controller %s answered the key check with %s", cfg.ControllerURL, resp.Status)
		r.Fix = "check the controller's logs"
	}
	return r
}

// httpClient follows no redirect: the key check sends the worker key,
// which must not go wherever a redirect points, and a controller URL that
// redirects is itself the finding.
func httpClient(cfg Config) *http.Client {
	hc := *http.DefaultClient
	if cfg.HTTP != nil {
		hc = *cfg.HTTP
	}
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &hc
}

// Tart checks that the tart binary runs.
func Tart(ctx context.Context, d *tart.Driver) Result {
	v, err := d.Version(ctx)
	switch {
	case errors.Is(err, tart.ErrNotInstalled):
		return Result{ID: IDTart, Severity: Fail, Message: "Tart is not installed", Fix: "brew install cirruslabs/cli/tart"}
	case err != nil:
		return Result{ID: IDTart, Severity: Fail, Message: fmt.Sprintf("Tart does not run: %v", err), Fix: "reinstall it: brew reinstall cirruslabs/cli/tart"}
	}
	// Which tart: the worker may find one PATH would not (Homebrew's bin).
	return Result{ID: IDTart, Severity: OK, Message: fmt.Sprintf("Tart %s (%s)", v, d.Tart)}
}

// Template checks that the VM template exists locally. A remote image not
// yet pulled is a warning: the first build pulls it.
func Template(ctx context.Context, d *tart.Driver) Result {
	r := Result{ID: IDTemplate}
	present, err := d.TemplatePresent(ctx)
	if err != nil {
		r.Severity, r.Message, r.Fix = Fail, fmt.Sprintf("cannot list Tart VMs: %v", err), "run `tart list` to see what is wrong"
		return r
	}
	if present {
		r.Severity, r.Message = OK, fmt.Sprintf("template %q present", d.Template)
		return r
	}
	if tart.IsRemote(d.Template) {
		r.Severity, r.Message = Warn, fmt.Sprintf("template image %q not pulled yet; the first build will pull it (tens of GB)", d.Template)
		r.Fix = "pull it now: tart pull " + d.Template
		return r
	}
	r.Severity, r.Message = Fail, fmt.Sprintf("template VM %q is missing", d.Template)
	r.Fix = "build it with scripts/build-vm-template.sh, or set the template to an image (e.g. ghcr.io/…) in Preferences…"
	return r
}

// VMLimit checks that running VMs this worker does not own leave room under
// macOS's limit of two VMs per host. Free Agent's own VMs (fa-*) come and go
// with builds and are not counted.
func VMLimit(ctx context.Context, d *tart.Driver) Result {
	r := Result{ID: IDVMLimit}
	vms, err := d.List(ctx)
	if err != nil {
		r.Severity, r.Message, r.Fix = Fail, fmt.Sprintf("cannot list Tart VMs: %v", err), "run `tart list` to see what is wrong"
		return r
	}
	var others []string
	for _, vm := range vms {
		if (vm.Running || vm.State == "running") && !strings.HasPrefix(vm.Name, tart.VMPrefix) {
			others = append(others, vm.Name)
		}
	}
	stop := "stop them with `tart stop NAME` (" + strings.Join(others, ", ") + ")"
	switch {
	case len(others) >= agent.MaxMacOSVMs:
		r.Severity, r.Message, r.Fix = Fail, fmt.Sprintf("%d other VMs are running; macOS allows %d, so no build can start", len(others), agent.MaxMacOSVMs), stop
	case len(others) > 0:
		r.Severity, r.Message, r.Fix = Warn, fmt.Sprintf("%d other VM running; only %d build VM can start", len(others), agent.MaxMacOSVMs-len(others)), stop
	default:
		r.Severity, r.Message = OK, fmt.Sprintf("no other VMs running (macOS allows %d)", agent.MaxMacOSVMs)
	}
	return r
}

// Disk checks the free space where builds are stored.
func Disk(dir string, minFree uint64) Result {
	r := Result{ID: IDDisk}
	free, err := hostsignals.FreeBytes(dir)
	if err != nil {
		r.Severity, r.Message, r.Fix = Warn, fmt.Sprintf("cannot read free space of %s: %v", dir, err), "check that the data folder exists"
		return r
	}
	if free < minFree {
		r.Severity = Fail
		r.Message = fmt.Sprintf("low disk space: %s free on %s, builds need %s", gb(free), dir, gb(minFree))
		r.Fix = "free space (old Xcode simulators, `tart prune --entries caches`), or lower the threshold"
		return r
	}
	r.Severity, r.Message = OK, fmt.Sprintf("%s free on %s", gb(free), dir)
	return r
}

func gb(n uint64) string { return fmt.Sprintf("%.1f GB", float64(n)/(1<<30)) }

// WriteText prints one line per check, and the fix under each problem.
func WriteText(w io.Writer, results []Result) {
	marks := map[Severity]string{OK: "✓", Warn: "!", Fail: "✗"}
	for _, r := range results {
		fmt.Fprintf(w, "%s %-11s %s\n", marks[r.Severity], r.ID, r.Message)
		if r.Severity != OK && r.Fix != "" {
			fmt.Fprintf(w, "  %-11s fix: %s\n", "", r.Fix)
		}
	}
}
