package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

var commandOrder = []string{
	"create", "clone", "run", "set", "get", "list", "login", "logout", "ip", "exec",
	"pull", "push", "import", "export", "prune", "rename", "stop", "delete", "fqn", "suspend",
}

var commandTable map[string]*cmdSpec

func commands() map[string]*cmdSpec {
	if commandTable != nil {
		return commandTable
	}
	formatOpt := optSpec{long: "format", kind: valueOpt, help: "Output format: text or json"}
	commandTable = map[string]*cmdSpec{
		"create": {
			name: "create", abstract: "Create a VM",
			args: []argSpec{{name: "name", help: "VM name"}},
			opts: []optSpec{
				{long: "from-ipsw", kind: valueOpt, valueName: "path", help: `create a macOS VM using path to the IPSW file or URL (or "latest", to fetch the latest supported IPSW automatically)`},
				{long: "linux", kind: flagOpt, help: "create a Linux VM"},
				{long: "disk-size", kind: valueOpt, help: "Disk size in GB"},
				{long: "disk-format", kind: valueOpt, help: "Disk image format"},
			},
			validate: validateCreate, run: runCreate,
		},
		"clone": {
			name: "clone", abstract: "Clone a VM", noGC: true,
			args: []argSpec{{name: "source-name", help: "source VM name"}, {name: "new-name", help: "new VM name"}},
			opts: []optSpec{
				{long: "insecure", kind: flagOpt, help: "connect to the OCI registry via insecure HTTP protocol"},
				{long: "concurrency", kind: valueOpt, help: "network concurrency to use when pulling a remote VM from the OCI-compatible registry"},
				{long: "prune-limit", kind: valueOpt, valueName: "n", help: "limit automatic pruning to n gigabytes"},
				{long: "deduplicate", kind: flagOpt, help: "deduplicate disk layers"},
			},
			validate: validateClone, run: runClone,
		},
		"run": runSpec(),
		"set": {
			name: "set", abstract: "Modify VM's configuration",
			args: []argSpec{{name: "name", help: "VM name"}},
			opts: []optSpec{
				{long: "cpu", kind: valueOpt, help: "Number of VM CPUs"},
				{long: "memory", kind: valueOpt, help: "VM memory size in megabytes"},
				{long: "display", kind: valueOpt, help: "VM display resolution in a format of WIDTHxHEIGHT[pt|px]. For example, 1200x800, 1200x800pt or 1920x1080px. Units are treated as hints and default to \"pt\" (points) for macOS VMs and \"px\" (pixels) for Linux VMs when not specified."},
				{long: "display-refit", kind: flagOpt, inversion: true, help: "Whether to automatically reconfigure the VM's display to fit the window"},
				{long: "random-mac", kind: flagOpt, help: "Generate a new random MAC address for the VM."},
				{long: "random-serial", kind: flagOpt, help: "Generate a new random serial number for the macOS VM."},
				{long: "disk", kind: valueOpt, valueName: "path", help: "Replace the VM's disk contents with the disk contents at path."},
				{long: "disk-size", kind: valueOpt, help: "Resize the VMs disk to the specified size in GB (note that the disk size can only be increased to avoid losing data)"},
			},
			run: runSet,
		},
		"get": {
			name: "get", abstract: "Get a VM's configuration",
			args:     []argSpec{{name: "name", help: "VM name."}},
			opts:     []optSpec{formatOpt},
			validate: validateFormat, run: runGet,
		},
		"list": {
			name: "list", abstract: "List created VMs",
			opts: []optSpec{
				{long: "source", kind: valueOpt, help: "Only display VMs from the specified source (e.g. --source local, --source oci)."},
				formatOpt,
				{long: "quiet", short: 'q', kind: flagOpt, help: "Only display VM names."},
			},
			validate: validateList, run: runList,
		},
		"ip": {
			name: "ip", abstract: "Get VM's IP address",
			args: []argSpec{{name: "name", help: "VM name"}},
			opts: []optSpec{
				{long: "wait", kind: valueOpt, help: "Number of seconds to wait for a potential VM booting"},
				{long: "resolver", kind: valueOpt, help: "Strategy for resolving IP address: dhcp, arp or agent"},
			},
			run: runIP,
		},
		"exec": {
			name: "exec", abstract: "Execute a command in a running VM",
			args: []argSpec{{name: "name", help: "VM name"}, {name: "command", help: "Command to execute", repeat: true}},
			opts: []optSpec{
				{long: "interactive", short: 'i', kind: flagOpt, help: "Attach host's standard input to a remote command"},
				{long: "tty", short: 't', kind: flagOpt, help: "Allocate a remote pseudo-terminal (PTY)"},
			},
			run: runExec,
		},
		"pull": {
			name: "pull", abstract: "Pull a VM from a registry", noGC: true,
			args: []argSpec{{name: "remote-name", help: "remote VM name"}},
			opts: []optSpec{
				{long: "insecure", kind: flagOpt, help: "connect to the OCI registry via insecure HTTP protocol"},
				{long: "concurrency", kind: valueOpt, help: "network concurrency to use when pulling a remote VM from the OCI-compatible registry"},
				{long: "deduplicate", kind: flagOpt, help: "deduplicate disk layers"},
			},
			run: runPull,
		},
		"rename": {
			name: "rename", abstract: "Rename a local VM",
			args: []argSpec{{name: "name", help: "VM name"}, {name: "new-name", help: "new VM name"}},
			validate: func(a *app, p *parsed) error {
				if strings.Contains(p.pos[1], "/") {
					return usageErr(p.cmd, "<new-name> should be a local name", "")
				}
				return nil
			},
			run: runRename,
		},
		"stop": {
			name: "stop", abstract: "Stop a VM",
			args: []argSpec{{name: "name", help: "VM name"}},
			opts: []optSpec{{long: "timeout", short: 't', kind: valueOpt, help: "Seconds to wait for graceful termination before forcefully terminating the VM"}},
			run:  runStop,
		},
		"delete": {
			name: "delete", abstract: "Delete a VM",
			args: []argSpec{{name: "name", help: "VM name", repeat: true}},
			run:  runDelete,
		},
		"suspend": {
			name: "suspend", abstract: "Suspend a VM",
			args: []argSpec{{name: "name", help: "VM name"}},
			run:  runSuspend,
		},
	}
	for _, n := range []string{"login", "logout", "push", "import", "export", "prune", "fqn"} {
		n := n
		commandTable[n] = &cmdSpec{
			name: n, abstract: "(not implemented by faketart)",
			args: nil,
			opts: nil,
			run: func(a *app, p *parsed) error {
				return runtimeErr(1, "faketart: %q is not implemented", n)
			},
		}
		// Accept any arguments for the unimplemented commands.
		commandTable[n].args = []argSpec{{name: "args", repeat: true}}
	}
	return commandTable
}

// ---- create --------------------------------------------------------------

func validateCreate(a *app, p *parsed) error {
	// Values are converted while parsing, before Create.validate().
	if _, _, err := p.uint("disk-size", 16); err != nil {
		return err
	}
	if err := p.enum("disk-format", []string{"raw", "asif"}, true); err != nil {
		return err
	}
	if !p.has("from-ipsw") && !p.flag["linux"] {
		return usageErr(p.cmd, "Please specify either a --from-ipsw or --linux option!", "")
	}
	return nil
}

// runCreate makes a VM instantly: `--linux` like real tart's empty Linux VM,
// `--from-ipsw` a darwin VM without reading any IPSW.
func runCreate(a *app, p *parsed) error {
	name := p.pos[0]
	size, ok, _ := p.uint("disk-size", 16)
	if !ok {
		size = 50
	}
	tmp, lock, err := a.home.tempVMDir()
	if err != nil {
		return genericErr("%v", err)
	}
	defer lock.Close()
	osName := "darwin"
	if p.flag["linux"] {
		osName = "linux"
	}
	cfg := newConfig(osName)
	cfg.DiskFormat = strings.ToLower(p.strDefault("disk-format", "raw"))
	if err := writeVMFiles(tmp, cfg, int64(size)*1000*1000*1000); err != nil {
		return genericErr("%v", err)
	}
	if err := a.home.moveIntoVMs(name, tmp); err != nil {
		return genericErr("%v", err)
	}
	return nil
}

func newConfig(osName string) *vmConfig {
	c := &vmConfig{
		Version: 1, OS: osName, Arch: "arm64",
		CPUCountMin: 4, CPUCount: 4,
		MemorySizeMin: 4 << 30, MemorySize: 4 << 30,
		MACAddress: randomMAC(),
		Display:    displayConfig{Width: 1024, Height: 768},
		DiskFormat: "raw",
	}
	if osName == "darwin" {
		c.ECID = randomBase64(48)
		c.HardwareModel = randomBase64(60)
	}
	return c
}

func writeVMFiles(dir string, cfg *vmConfig, diskBytes int64) error {
	if err := cfg.save(filepath.Join(dir, configFile)); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, diskFile))
	if err != nil {
		return err
	}
	if err := f.Truncate(diskBytes); err != nil {
		f.Close()
		return err
	}
	f.Close()
	return os.WriteFile(filepath.Join(dir, nvramFile), make([]byte, 8192), 0o644)
}

// ---- clone ---------------------------------------------------------------

func validateClone(a *app, p *parsed) error {
	// Values are converted while parsing, before Clone.validate().
	for _, o := range []string{"concurrency", "prune-limit"} {
		if _, _, err := p.uint(o, 64); err != nil {
			return err
		}
	}
	if strings.Contains(p.pos[1], "/") {
		return usageErr(p.cmd, "<new-name> should be a local name", "")
	}
	if !validLocalName(p.pos[1]) {
		return usageErr(p.cmd, "<new-name> should be a local name", "")
	}
	if n, ok, _ := p.uint("concurrency", 64); ok && n < 1 {
		return usageErr(p.cmd, "network concurrency cannot be less than 1", "")
	}
	return nil
}

// openAny is VMStorageHelper.open: remote names from the OCI cache, other
// names from vms/.
func (a *app) openAny(name string) (vmDir, error) {
	if r, ok := parseRemoteName(name); ok {
		v := a.home.ociEntry(r)
		if !v.initialized() {
			return v, vmDoesNotExist(name)
		}
		return v, nil
	}
	return a.home.openLocal(name)
}

func runClone(a *app, p *parsed) error {
	src, dst := p.pos[0], p.pos[1]
	if r, ok := parseRemoteName(src); ok && !a.home.ociExists(r) {
		if err := a.pullImage(r); err != nil {
			return err
		}
	}
	srcVM, err := a.openAny(src)
	if err != nil {
		return err
	}
	if os.Getenv("FAKETART_CLONE_NO_OVERWRITE") == "1" {
		if _, err := os.Stat(a.home.localVM(dst).path); err == nil {
			return runtimeErr(1, "VM %q already exists", dst)
		}
	}
	srcCfg, err := readConfig(srcVM.config())
	if err != nil {
		return genericErr("%v", err)
	}
	tmp, tmpLock, err := a.home.tempVMDir()
	if err != nil {
		return genericErr("%v", err)
	}
	defer tmpLock.Close()
	global, err := a.home.globalLock()
	if err != nil {
		return genericErr("%v", err)
	}
	defer global.Close()

	generateMAC := false
	for _, v := range a.home.listLocal() {
		if c, err := readConfig(v.config()); err == nil && c.MACAddress == srcCfg.MACAddress {
			generateMAC = true
			break
		}
	}
	if srcVM.state() == "suspended" {
		generateMAC = false
	}
	if err := copyVMFiles(srcVM.path, tmp); err != nil {
		return genericErr("%v", err)
	}
	if generateMAC {
		c, err := readConfig(filepath.Join(tmp, configFile))
		if err != nil {
			return genericErr("%v", err)
		}
		c.MACAddress = randomMAC()
		_ = os.Remove(filepath.Join(tmp, stateFile))
		if err := c.save(filepath.Join(tmp, configFile)); err != nil {
			return genericErr("%v", err)
		}
	}
	if err := a.home.moveIntoVMs(dst, tmp); err != nil {
		return genericErr("%v", err)
	}
	global.Close()
	// The clone shares the source's blocks until the VM writes; Tart
	// reclaims what it may still claim, at most --prune-limit GB.
	apparent, allocated := srcVM.sizes()
	reclaim := uint64(max(apparent-allocated, 0))
	limit, ok, _ := p.uint("prune-limit", 64)
	if !ok {
		limit = 100
	}
	reclaim = min(reclaim, limit<<30)
	if reclaim > 0 {
		return a.reclaimIfNeeded(reclaim, srcVM.path)
	}
	return nil
}

// ---- pull ----------------------------------------------------------------

func runPull(a *app, p *parsed) error {
	name := p.pos[0]
	if validLocalName(name) && a.home.localVM(name).initialized() {
		a.println("%q is a local image, nothing to pull here!", name)
		return nil
	}
	r, ok := parseRemoteName(name)
	if !ok {
		return runtimeErr(1, "failed to parse remote name: %s", name)
	}
	a.println("pulling %s...", r)
	return a.pullImage(r)
}

// pullImage "pulls" r from $FAKETART_REGISTRY into cache/OCIs, printing
// tart's progress lines. With CI set the percentages are plain lines,
// otherwise each update rewrites the previous line with ANSI escapes, like
// tart's interactive logger. FAKETART_PULL_DELAY spreads over the progress.
func (a *app) pullImage(r remoteName) error {
	hostDir := filepath.Join(a.home.ociDir(), r.host)
	if err := os.MkdirAll(hostDir, 0o755); err != nil {
		return genericErr("%v", err)
	}
	hostLock, _, err := flockPath(hostDir, true)
	if err != nil {
		return genericErr("%v", err)
	}
	defer hostLock.Close()

	a.println("pulling manifest...")
	srcDir, digest, ok := registryLookup(r)
	if !ok {
		return genericErr(`UnexpectedHTTPStatusCode(when: "pulling manifest", code: 404, details: "{\"errors\":[{\"code\":\"MANIFEST_UNKNOWN\",\"message\":\"manifest unknown\",\"detail\":{\"name\":\"%s\",\"reference\":\"%s\"}}]}")`,
			r.namespace, r.reference())
	}
	repo := a.home.ociRepoDir(r)
	if err := os.MkdirAll(repo, 0o755); err != nil {
		return genericErr("%v", err)
	}
	digestDir := filepath.Join(repo, digest)
	if !(vmDir{path: digestDir}).initialized() {
		tmp, tmpLock, err := a.home.tempVMDir()
		if err != nil {
			return genericErr("%v", err)
		}
		defer tmpLock.Close()
		st, err := os.Stat(filepath.Join(srcDir, diskFile))
		if err != nil {
			return genericErr("%v", err)
		}
		// The manifest's uncompressed disk size plus 128 MiB for the other files.
		if err := a.reclaimIfNeeded(uint64(st.Size())+128<<20, ""); err != nil {
			return err
		}
		a.println("pulling disk (%.1f GB compressed)...", float64(st.Size())/1e9)
		delay, _ := parseDelay(os.Getenv("FAKETART_PULL_DELAY"))
		ci := os.Getenv("CI") != ""
		for pct := 0; pct <= 100; pct += 10 {
			if pct > 0 {
				time.Sleep(delay / 10)
			}
			if pct == 0 || ci {
				a.println("%d%%", pct)
			} else {
				a.println("\x1b[1A\x1b[J%d%%", pct)
			}
		}
		a.println("pulling NVRAM...")
		if err := copyVMFiles(srcDir, tmp); err != nil {
			return genericErr("%v", err)
		}
		_ = os.RemoveAll(digestDir)
		if err := os.Rename(tmp, digestDir); err != nil {
			return genericErr("%v", err)
		}
	}
	if r.tag != "" {
		link := filepath.Join(repo, r.tag)
		tmpLink := filepath.Join(repo, "."+r.tag+"."+newUUID())
		if err := os.Symlink(digest, tmpLink); err != nil {
			return genericErr("%v", err)
		}
		if err := os.Rename(tmpLink, link); err != nil {
			os.Remove(tmpLink)
			return genericErr("%v", err)
		}
	}
	return nil
}

// ---- set -----------------------------------------------------------------

const (
	minAllowedCPU    = 1
	minAllowedMemory = 128 << 20 // VZVirtualMachineConfiguration.minimumAllowedMemorySize
)

func runSet(a *app, p *parsed) error {
	cpu, hasCPU, err := p.uint("cpu", 16)
	if err != nil {
		return err
	}
	mem, hasMem, err := p.uint("memory", 64)
	if err != nil {
		return err
	}
	diskSize, hasDiskSize, err := p.uint("disk-size", 16)
	if err != nil {
		return err
	}
	vm, err := a.home.openLocal(p.pos[0])
	if err != nil {
		return err
	}
	cfg, err := readConfig(vm.config())
	if err != nil {
		return genericErr("%v", err)
	}
	if hasCPU {
		if cfg.OS == "darwin" && int(cpu) < cfg.CPUCountMin {
			return genericErr("LessThanMinimalResourcesError: VM should have %d CPU cores at minimum (requested %d)", cfg.CPUCountMin, cpu)
		}
		if cpu < minAllowedCPU {
			return genericErr("LessThanMinimalResourcesError: VM should have %d CPU cores at minimum (requested %d)", minAllowedCPU, cpu)
		}
		cfg.CPUCount = int(cpu)
	}
	if hasMem {
		if mem > math.MaxUint64/(1<<20) {
			mem = math.MaxUint64 / (1 << 20)
		}
		bytes := mem * 1024 * 1024
		if cfg.OS == "darwin" && bytes < cfg.MemorySizeMin {
			return genericErr("LessThanMinimalResourcesError: VM should have %d bytes of memory at minimum (requested %d)", cfg.MemorySizeMin, bytes)
		}
		if bytes < minAllowedMemory {
			return genericErr("LessThanMinimalResourcesError: VM should have %d bytes of memory at minimum (requested %d)", minAllowedMemory, bytes)
		}
		cfg.MemorySize = bytes
	}
	if d, ok := p.str("display"); ok {
		unit := ""
		for _, u := range []string{"pt", "px"} {
			if strings.HasSuffix(d, u) {
				unit, d = u, strings.TrimSuffix(d, u)
			}
		}
		parts := strings.Split(d, "x")
		w, _ := strconv.Atoi(parts[0])
		h := 0
		if len(parts) > 1 {
			h, _ = strconv.Atoi(parts[1])
		}
		if w > 0 {
			cfg.Display.Width = w
		}
		if h > 0 {
			cfg.Display.Height = h
		}
		if unit != "" {
			cfg.Display.Unit = unit
		}
	}
	if p.has("display-refit") {
		v := p.flag["display-refit"]
		cfg.DisplayRefit = &v
	}
	if p.flag["random-mac"] {
		cfg.MACAddress = randomMAC()
	}
	if p.flag["random-serial"] && cfg.OS == "darwin" {
		cfg.ECID = randomBase64(48)
	}
	if err := cfg.save(vm.config()); err != nil {
		return genericErr("%v", err)
	}
	if src, ok := p.str("disk"); ok {
		tmp := filepath.Join(a.home.tmpDir(), "set-disk-"+newUUID())
		if err := copyFile(src, tmp); err != nil {
			os.Remove(tmp)
			return genericErr("The file “%s” couldn’t be opened because there is no such file.", filepath.Base(src))
		}
		if err := os.Rename(tmp, vm.file(diskFile)); err != nil {
			return genericErr("%v", err)
		}
	}
	if hasDiskSize {
		path := vm.file(diskFile)
		st, err := os.Stat(path)
		if err != nil {
			return genericErr("%v", err)
		}
		want := int64(diskSize) * 1000 * 1000 * 1000
		if want < st.Size() {
			return runtimeErr(1, "new disk size of %s should be larger than the current disk size of %s", byteCount(want), byteCount(st.Size()))
		}
		if want > st.Size() {
			if err := os.Truncate(path, want); err != nil {
				return genericErr("%v", err)
			}
		}
	}
	return nil
}

// byteCount approximates Foundation's ByteCountFormatter (file style, 1000-based).
func byteCount(n int64) string {
	units := []string{"bytes", "KB", "MB", "GB", "TB", "PB"}
	f := float64(n)
	i := 0
	for f >= 1000 && i < len(units)-1 {
		f /= 1000
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%d bytes", n)
	}
	s := strconv.FormatFloat(f, 'f', 2, 64)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	return s + " " + units[i]
}

// ---- get / list ----------------------------------------------------------

func validateFormat(a *app, p *parsed) error {
	return p.enum("format", []string{"text", "json"}, false)
}

func validateList(a *app, p *parsed) error {
	if err := validateFormat(a, p); err != nil {
		return err
	}
	if s, ok := p.str("source"); ok && s != "local" && s != "oci" {
		return usageErr(p.cmd, fmt.Sprintf("'%s' is not a valid <source>", s), "")
	}
	return nil
}

func (a *app) jsonOptions() swiftJSONOptions {
	return swiftJSONOptions{compactEmpty: os.Getenv("FAKETART_EMPTY_JSON") == "compact"}
}

func runGet(a *app, p *parsed) error {
	vm, err := a.home.openLocal(p.pos[0])
	if err != nil {
		return err
	}
	cfg, err := readConfig(vm.config())
	if err != nil {
		return genericErr("%v", err)
	}
	apparent, allocated := vm.sizes()
	display := fmt.Sprintf("%dx%d%s", cfg.Display.Width, cfg.Display.Height, cfg.Display.Unit)
	state := vm.state()
	info := obj{
		{"OS", cfg.OS},
		{"CPU", cfg.CPUCount},
		{"Memory", cfg.MemorySize / 1024 / 1024},
		{"Disk", apparent / 1e9},
		{"DiskFormat", cfg.DiskFormat},
		{"Size", fmt.Sprintf("%.3f", float64(allocated)/1e9)},
		{"Display", display},
		{"Running", state == "running"},
		{"State", state},
	}
	if p.strDefault("format", "text") == "json" {
		a.println("%s", swiftJSON(info, a.jsonOptions()))
		return nil
	}
	a.println("%s", textTable([]obj{info}))
	return nil
}

func runList(a *app, p *parsed) error {
	source, _ := p.str("source")
	var rows []obj
	now := time.Now()
	row := func(src, name string, v vmDir) obj {
		apparent, allocated := v.sizes()
		st := v.state()
		var accessed time.Time
		if fi, err := os.Stat(v.path); err == nil {
			accessed = fi.ModTime()
		}
		return obj{
			{"Source", src},
			{"Name", name},
			{"Disk", apparent / 1e9},
			{"Size", allocated / 1e9},
			{"Accessed", accessed},
			{"Running", st == "running"},
			{"State", st},
		}
	}
	if source == "" || source == "local" {
		for _, v := range a.home.listLocal() {
			rows = append(rows, row("local", v.name, v))
		}
	}
	if source == "" || source == "oci" {
		for _, e := range a.home.listOCI() {
			rows = append(rows, row("OCI", e.name, e.dir))
		}
	}
	if p.flag["quiet"] {
		for _, r := range rows {
			a.println("%s", r[1].v)
		}
		return nil
	}
	if p.strDefault("format", "text") == "json" {
		list := make([]any, 0, len(rows))
		for _, r := range rows {
			r[4].v = r[4].v.(time.Time).UTC().Format("2006-01-02T15:04:05Z")
			list = append(list, r)
		}
		a.println("%s", swiftJSON(list, a.jsonOptions()))
		return nil
	}
	for _, r := range rows {
		r[4].v = relativeTime(r[4].v.(time.Time), now)
	}
	a.println("%s", textTable(rows))
	return nil
}

// textTable renders rows like tart's TextTable (plain style), hiding the
// deprecated "Running" column. No rows → empty string.
func textTable(rows []obj) string {
	if len(rows) == 0 {
		return ""
	}
	var cols []int
	for i, c := range rows[0] {
		if c.k != "Running" {
			cols = append(cols, i)
		}
	}
	cells := [][]string{{}}
	for _, i := range cols {
		cells[0] = append(cells[0], rows[0][i].k)
	}
	for _, r := range rows {
		var line []string
		for _, i := range cols {
			line = append(line, fmt.Sprint(r[i].v))
		}
		cells = append(cells, line)
	}
	width := make([]int, len(cols))
	for _, line := range cells {
		for i, c := range line {
			if len(c) > width[i] {
				width[i] = len(c)
			}
		}
	}
	var b strings.Builder
	for li, line := range cells {
		var parts []string
		for i, c := range line {
			parts = append(parts, c+strings.Repeat(" ", width[i]-len(c)))
		}
		b.WriteString(strings.TrimRight(strings.Join(parts, " "), " "))
		if li < len(cells)-1 {
			b.WriteString("\n")
		}
	}
	return b.String()
}

func relativeTime(t, now time.Time) string {
	d := now.Sub(t)
	if d < 0 {
		d = 0
	}
	unit := func(n int64, u string) string {
		if n == 1 {
			return fmt.Sprintf("1 %s ago", u)
		}
		return fmt.Sprintf("%d %ss ago", n, u)
	}
	switch {
	case d < time.Minute:
		return unit(int64(d/time.Second), "second")
	case d < time.Hour:
		return unit(int64(d/time.Minute), "minute")
	case d < 24*time.Hour:
		return unit(int64(d/time.Hour), "hour")
	default:
		return unit(int64(d/(24*time.Hour)), "day")
	}
}

// ---- ip ------------------------------------------------------------------

func runIP(a *app, p *parsed) error {
	wait, _, err := p.uint("wait", 16)
	if err != nil {
		return err
	}
	resolver := p.strDefault("resolver", "dhcp")
	if err := p.enum("resolver", []string{"dhcp", "arp", "agent"}, false); err != nil {
		return err
	}
	vm, err := a.home.openLocal(p.pos[0])
	if err != nil {
		return err
	}
	cfg, err := readConfig(vm.config())
	if err != nil {
		return genericErr("%v", err)
	}
	// Same loop shape as IP.resolveIP: try, sleep 1 s, until the deadline.
	deadline := time.Now().Add(time.Duration(wait) * time.Second)
	for {
		if vm.running() {
			if _, err := os.Stat(filepath.Join(vm.path, fakeDir, "booted")); err == nil {
				if addr, err := os.ReadFile(filepath.Join(vm.path, fakeDir, ipFile)); err == nil {
					a.println("%s", addr) // FAKETART_NET=vmnet: the VM's lease
				} else {
					a.println("%s", envOr("FAKETART_IP", "127.0.0.1"))
				}
				return nil
			}
		}
		time.Sleep(time.Second)
		if !time.Now().Before(deadline) {
			break
		}
	}
	msg := "no IP address found"
	if !vm.running() {
		msg += ", is your VM running?"
	}
	if resolver == "agent" {
		msg += " (also make sure that Guest agent for Tart is running inside of a VM)"
	} else if cfg.OS == "linux" && resolver == "arp" {
		msg += " (not all Linux distributions are compatible with the ARP resolver)"
	}
	return runtimeErr(1, "%s", msg)
}

// ---- exec ----------------------------------------------------------------

// runExec emulates a VM without the Tart Guest Agent.
func runExec(a *app, p *parsed) error {
	name := p.pos[0]
	vm, err := a.home.openLocal(name)
	if err != nil {
		return err
	}
	if !vm.running() {
		return runtimeErr(2, "VM %q is not running", name)
	}
	return runtimeErr(1, "Failed to connect to the VM using its control socket: connection refused, is the Tart Guest Agent running?")
}

// ---- rename --------------------------------------------------------------

func runRename(a *app, p *parsed) error {
	name, newName := p.pos[0], p.pos[1]
	if !validLocalName(name) || !a.home.localVM(name).initialized() {
		return usageErr(nil, "failed to rename a non-existent local VM: "+name, "")
	}
	if a.home.localVM(newName).initialized() {
		return usageErr(nil, fmt.Sprintf("failed to rename VM %s, target VM %s already exists, delete it first!", name, newName), "")
	}
	if err := os.Rename(a.home.localVM(name).path, a.home.localVM(newName).path); err != nil {
		return genericErr("%v", err)
	}
	return nil
}

// ---- suspend -------------------------------------------------------------

// runSuspend is Suspend.run(): SIGUSR1 to the VM's `tart run`, which saves
// the VM's state and exits; it does not wait for that. A VM that does not
// run is Tart's VMNotRunning built around a whole sentence, so its message
// names the VM twice.
func runSuspend(a *app, p *parsed) error {
	name := p.pos[0]
	vm, err := a.home.openLocal(name)
	if err != nil {
		return err
	}
	pid := lockHolder(vm.config())
	if pid == 0 {
		return runtimeErr(2, "VM %q is not running", fmt.Sprintf("VM %q is not running", name))
	}
	if err := syscall.Kill(pid, syscall.SIGUSR1); err != nil {
		return runtimeErr(1, "Failed to suspend the VM: failed to send SIGUSR1 signal to the \"tart run\" process running VM %q", name)
	}
	return nil
}

// ---- stop ----------------------------------------------------------------

func runStop(a *app, p *parsed) error {
	timeout, ok, err := p.uint("timeout", 64)
	if err != nil {
		return err
	}
	if !ok {
		timeout = 30
	}
	name := p.pos[0]
	vm, err := a.home.openLocal(name)
	if err != nil {
		return err
	}
	switch vm.state() {
	case "suspended":
		_ = os.Remove(vm.file(stateFile))
		return nil
	case "running":
	default:
		return runtimeErr(2, "VM %q is not running", name)
	}
	pid := lockHolder(vm.config())
	if pid == 0 {
		return runtimeErr(2, "VM %q is not running", name)
	}
	// Like tart, ignore the result of the graceful attempt.
	_ = syscall.Kill(pid, syscall.SIGINT)
	remaining := time.Duration(timeout) * time.Second
	const tick = 100 * time.Millisecond
	for remaining > 0 {
		pid = lockHolder(vm.config())
		if pid == 0 {
			return nil
		}
		time.Sleep(tick)
		remaining -= tick
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return runtimeErr(1, "failed to forcefully terminate the VM %q: %s", name, errnoText(err))
	}
	return nil
}

func errnoText(err error) string {
	s := err.Error()
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// ---- delete --------------------------------------------------------------

func runDelete(a *app, p *parsed) error {
	for _, name := range p.pos {
		if r, ok := parseRemoteName(name); ok {
			if err := a.deleteOCI(name, r); err != nil {
				return err
			}
			continue
		}
		if !validLocalName(name) {
			return vmDoesNotExist(name)
		}
		vm := a.home.localVM(name)
		f, err := os.OpenFile(vm.config(), os.O_RDWR, 0)
		if err != nil {
			if os.IsNotExist(err) {
				if _, statErr := os.Stat(vm.path); statErr == nil {
					// A directory without config.json (half-created): just remove it.
					if err := os.RemoveAll(vm.path); err != nil {
						return genericErr("%v", err)
					}
					continue
				}
				return vmDoesNotExist(name)
			}
			return genericErr("%v", err)
		}
		locked, err := tryLock(f)
		if err != nil {
			f.Close()
			return runtimeErr(1, "failed to lock %s: %v", vm.config(), err)
		}
		if !locked {
			f.Close()
			return runtimeErr(1, "VM %q is running", name)
		}
		err = os.RemoveAll(vm.path)
		f.Close()
		if err != nil {
			return genericErr("%v", err)
		}
	}
	return nil
}

func (a *app) deleteOCI(name string, r remoteName) error {
	entry := a.home.ociEntry(r)
	if _, err := os.Lstat(entry.path); err != nil {
		return vmDoesNotExist(name)
	}
	if err := os.RemoveAll(entry.path); err != nil {
		return genericErr("%v", err)
	}
	// GC digests no tag points to any more.
	repo := a.home.ociRepoDir(r)
	entries, _ := os.ReadDir(repo)
	referenced := map[string]bool{}
	for _, e := range entries {
		if e.Type()&os.ModeSymlink != 0 {
			if t, err := os.Readlink(filepath.Join(repo, e.Name())); err == nil {
				referenced[filepath.Base(t)] = true
			}
		}
	}
	var digests []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "sha256:") && e.IsDir() && !referenced[e.Name()] {
			digests = append(digests, e.Name())
		}
	}
	sort.Strings(digests)
	if r.tag != "" {
		for _, d := range digests {
			_ = os.RemoveAll(filepath.Join(repo, d))
		}
	}
	return nil
}
