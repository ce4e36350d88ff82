package main

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

// Storage layout, identical to real tart's (see tart-cli.md §1.3):
//
//	$TART_HOME/vms/<name>/{config.json,disk.img,nvram.bin[,state.vzvmsave]}
//	$TART_HOME/cache/OCIs/<host>/<namespace>/<tag> -> sha256:<hex>
//	$TART_HOME/cache/OCIs/<host>/<namespace>/sha256:<hex>/
//	$TART_HOME/tmp/<uuid>/
//
// Fake-only files live inside a VM directory and are ignored by every
// listing: fake-guest.json (what "boots") and .faketart/ (guest view, logs).

const (
	configFile = "config.json"
	diskFile   = "disk.img"
	nvramFile  = "nvram.bin"
	stateFile  = "state.vzvmsave"
	guestFile  = "fake-guest.json"
	fakeDir    = ".faketart"
	ipFile     = "ip" // in fakeDir: the address of a VM on FAKETART_NET=vmnet
)

type tartHome struct {
	dir string
}

func openHome() (*tartHome, error) {
	dir := os.Getenv("TART_HOME")
	if dir == "" {
		h, err := os.UserHomeDir()
		if err != nil {
			return nil, err
		}
		dir = filepath.Join(h, ".tart")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	h := &tartHome{dir: abs}
	for _, d := range []string{h.cacheDir(), h.tmpDir()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	return h, nil
}

func (h *tartHome) vmsDir() string   { return filepath.Join(h.dir, "vms") }
func (h *tartHome) cacheDir() string { return filepath.Join(h.dir, "cache") }
func (h *tartHome) ociDir() string   { return filepath.Join(h.dir, "cache", "OCIs") }
func (h *tartHome) tmpDir() string   { return filepath.Join(h.dir, "tmp") }

// vmDir is one VM directory (local or an OCI cache entry).
type vmDir struct {
	name string
	path string
}

func (v vmDir) file(n string) string { return filepath.Join(v.path, n) }
func (v vmDir) config() string       { return v.file(configFile) }

func (v vmDir) initialized() bool {
	for _, f := range []string{configFile, diskFile, nvramFile} {
		if _, err := os.Stat(v.file(f)); err != nil {
			return false
		}
	}
	return true
}

func validLocalName(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.ContainsAny(name, "/\x00")
}

func (h *tartHome) localVM(name string) vmDir {
	return vmDir{name: name, path: filepath.Join(h.vmsDir(), name)}
}

// openLocal is VMStorageLocal.open: existence check, the "missing files"
// check, and an access-date bump (we use the directory's mtime).
func (h *tartHome) openLocal(name string) (vmDir, error) {
	v := h.localVM(name)
	if !validLocalName(name) {
		return v, vmDoesNotExist(name)
	}
	if _, err := os.Stat(v.path); err != nil {
		return v, vmDoesNotExist(name)
	}
	if !v.initialized() {
		return v, runtimeErr(1, "VM is missing some of its files (%s, %s or %s)", configFile, diskFile, nvramFile)
	}
	now := time.Now()
	_ = os.Chtimes(v.path, now, now)
	return v, nil
}

// listLocal returns initialized local VMs sorted by name.
func (h *tartHome) listLocal() []vmDir {
	entries, err := os.ReadDir(h.vmsDir())
	if err != nil {
		return nil
	}
	var out []vmDir
	for _, e := range entries {
		v := h.localVM(e.Name())
		if v.initialized() {
			out = append(out, v)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// ---- VM config ---------------------------------------------------------

type displayConfig struct {
	Width  int    `json:"width"`
	Height int    `json:"height"`
	Unit   string `json:"unit,omitempty"`
}

type vmConfig struct {
	Version       int           `json:"version"`
	OS            string        `json:"os"`
	Arch          string        `json:"arch"`
	ECID          string        `json:"ecid,omitempty"`
	HardwareModel string        `json:"hardwareModel,omitempty"`
	CPUCountMin   int           `json:"cpuCountMin"`
	CPUCount      int           `json:"cpuCount"`
	MemorySizeMin uint64        `json:"memorySizeMin"`
	MemorySize    uint64        `json:"memorySize"`
	MACAddress    string        `json:"macAddress"`
	Display       displayConfig `json:"display"`
	DisplayRefit  *bool         `json:"displayRefit,omitempty"`
	DiskFormat    string        `json:"diskFormat"`
}

func readConfig(path string) (*vmConfig, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	c := &vmConfig{OS: "darwin", Arch: "arm64", DiskFormat: "raw", Display: displayConfig{Width: 1024, Height: 768}}
	if err := json.Unmarshal(data, c); err != nil {
		return nil, fmt.Errorf("failed to decode %s: %v", path, err)
	}
	return c, nil
}

// encode writes the keys in VMConfig.encode(to:)'s order, pretty-printed.
func (c *vmConfig) encode() []byte {
	o := obj{{"version", c.Version}, {"os", c.OS}, {"arch", c.Arch}}
	if c.OS == "darwin" {
		o = append(o, kv{"ecid", c.ECID}, kv{"hardwareModel", c.HardwareModel})
	}
	disp := obj{{"width", c.Display.Width}, {"height", c.Display.Height}}
	if c.Display.Unit != "" {
		disp = append(disp, kv{"unit", c.Display.Unit})
	}
	o = append(o,
		kv{"cpuCountMin", c.CPUCountMin}, kv{"cpuCount", c.CPUCount},
		kv{"memorySizeMin", c.MemorySizeMin}, kv{"memorySize", c.MemorySize},
		kv{"macAddress", c.MACAddress}, kv{"display", disp})
	if c.DisplayRefit != nil {
		o = append(o, kv{"displayRefit", *c.DisplayRefit})
	}
	o = append(o, kv{"diskFormat", c.DiskFormat})
	return []byte(swiftJSON(o, swiftJSONOptions{}))
}

// save rewrites config.json in place (same inode, like Data.write(to:)), so a
// running VM's fcntl lock on it stays visible to other processes.
func (c *vmConfig) save(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(c.encode()); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func randomMAC() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	b[0] = (b[0] | 0x02) &^ 0x01 // locally administered, unicast
	return fmt.Sprintf("%02x:%02x:%02x:%02x:%02x:%02x", b[0], b[1], b[2], b[3], b[4], b[5])
}

func randomBase64(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return base64.StdEncoding.EncodeToString(b)
}

func newUUID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6] = (b[6] & 0x0f) | 0x40
	b[8] = (b[8] & 0x3f) | 0x80
	return strings.ToUpper(fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16]))
}

// ---- sizes -------------------------------------------------------------

// sizes returns the apparent and allocated byte counts of config+disk+nvram.
func (v vmDir) sizes() (apparent, allocated int64) {
	for _, f := range []string{configFile, diskFile, nvramFile} {
		st, err := os.Stat(v.file(f))
		if err != nil {
			continue
		}
		apparent += st.Size()
		if sys, ok := st.Sys().(*syscall.Stat_t); ok {
			allocated += int64(sys.Blocks) * 512
		}
	}
	return
}

// ---- locks -------------------------------------------------------------

// lockHolder is PIDLock.pid(): F_GETLK on config.json; 0 when unlocked.
// Never call it from the process that holds the lock (closing the probe fd
// would drop that process's lock).
func lockHolder(path string) int {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return 0
	}
	defer f.Close()
	lk := syscall.Flock_t{Type: syscall.F_RDLCK, Whence: io.SeekStart}
	if err := syscall.FcntlFlock(f.Fd(), syscall.F_GETLK, &lk); err != nil {
		return 0
	}
	if lk.Type == syscall.F_UNLCK {
		return 0
	}
	return int(lk.Pid)
}

// tryLock is PIDLock.trylock(): F_SETLK write lock on the whole file.
func tryLock(f *os.File) (bool, error) {
	lk := syscall.Flock_t{Type: syscall.F_WRLCK, Whence: io.SeekStart}
	err := syscall.FcntlFlock(f.Fd(), syscall.F_SETLK, &lk)
	if err == nil {
		return true, nil
	}
	if errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EACCES) {
		return false, nil
	}
	return false, err
}

func (v vmDir) running() bool { return lockHolder(v.config()) != 0 }

func (v vmDir) state() string {
	if v.running() {
		return "running"
	}
	if _, err := os.Stat(v.file(stateFile)); err == nil {
		return "suspended"
	}
	return "stopped"
}

// flockPath takes a flock(2) on path (a directory or file), like tart's FileLock.
func flockPath(path string, block bool) (*os.File, bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, false, err
	}
	how := syscall.LOCK_EX
	if !block {
		how |= syscall.LOCK_NB
	}
	if err := syscall.Flock(int(f.Fd()), how); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, false, nil
		}
		return nil, false, err
	}
	return f, true, nil
}

// globalLock is the flock on $TART_HOME that serialises clone's copy+rename
// and run's start-up checks.
func (h *tartHome) globalLock() (*os.File, error) {
	f, _, err := flockPath(h.dir, true)
	return f, err
}

// gc is Config.gc(): remove every tmp/ entry nobody holds a flock on.
func (h *tartHome) gc() error {
	entries, err := os.ReadDir(h.tmpDir())
	if err != nil {
		return err
	}
	for _, e := range entries {
		p := filepath.Join(h.tmpDir(), e.Name())
		f, ok, err := flockPath(p, false)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			return err
		}
		if !ok {
			continue
		}
		rmErr := os.RemoveAll(p)
		f.Close()
		if rmErr != nil {
			return rmErr
		}
	}
	return nil
}

// tempVMDir is VMDirectory.temporary() plus the flock that protects it from gc.
// The returned file must stay open until the directory has been moved.
func (h *tartHome) tempVMDir() (string, *os.File, error) {
	p := filepath.Join(h.tmpDir(), newUUID())
	if err := os.Mkdir(p, 0o755); err != nil {
		return "", nil, err
	}
	trackTmp(p)
	f, _, err := flockPath(p, true)
	if err != nil {
		return "", nil, err
	}
	return p, f, nil
}

// moveIntoVMs is VMStorageLocal.move: replaceItemAt(vms/<name>, tmp) —
// an existing VM of that name is silently replaced.
func (h *tartHome) moveIntoVMs(name, from string) error {
	if err := os.MkdirAll(h.vmsDir(), 0o755); err != nil {
		return err
	}
	dst := filepath.Join(h.vmsDir(), name)
	if _, err := os.Lstat(dst); err == nil {
		old := filepath.Join(h.tmpDir(), newUUID()+".replaced")
		if err := os.Rename(dst, old); err != nil {
			return err
		}
		defer os.RemoveAll(old)
	}
	return os.Rename(from, dst)
}

// ---- copying -----------------------------------------------------------

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, st.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// sparseCopy creates dst with src's apparent size without copying bytes:
// the fake never writes disk contents, and copying a sparse 50 GB image
// byte-wise on Linux would write zeros.
func sparseCopy(src, dst string) error {
	st, err := os.Stat(src)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if err := f.Truncate(st.Size()); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// copyVMFiles is VMDirectory.clone(to:) plus the fake guest spec.
func copyVMFiles(src, dst string) error {
	for _, f := range []string{configFile, nvramFile} {
		if err := copyFile(filepath.Join(src, f), filepath.Join(dst, f)); err != nil {
			return err
		}
	}
	if err := sparseCopy(filepath.Join(src, diskFile), filepath.Join(dst, diskFile)); err != nil {
		return err
	}
	for _, f := range []string{stateFile, guestFile} {
		if _, err := os.Stat(filepath.Join(src, f)); err == nil {
			if err := copyFile(filepath.Join(src, f), filepath.Join(dst, f)); err != nil {
				return err
			}
		}
	}
	return nil
}

// ---- remote (OCI) names --------------------------------------------------

type remoteName struct {
	host, namespace, tag, digest string
}

func (r remoteName) String() string {
	if r.digest != "" {
		return r.host + "/" + r.namespace + "@" + r.digest
	}
	return r.host + "/" + r.namespace + ":" + r.tag
}

// reference is the last path component in the OCI cache / fake registry.
func (r remoteName) reference() string {
	if r.digest != "" {
		return r.digest
	}
	return r.tag
}

func parseRemoteName(s string) (remoteName, bool) {
	var r remoteName
	if !strings.Contains(s, "/") {
		return r, false
	}
	ref := s
	if i := strings.Index(ref, "@"); i >= 0 {
		r.digest = ref[i+1:]
		ref = ref[:i]
		if !strings.HasPrefix(r.digest, "sha256:") || len(r.digest) <= len("sha256:") {
			return r, false
		}
	} else if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		r.tag = ref[i+1:]
		ref = ref[:i]
		if r.tag == "" {
			return r, false
		}
	} else {
		r.tag = "latest"
	}
	j := strings.Index(ref, "/")
	r.host, r.namespace = ref[:j], ref[j+1:]
	if r.host == "" || r.namespace == "" {
		return r, false
	}
	for _, part := range strings.Split(r.namespace, "/") {
		if part == "" || part == "." || part == ".." {
			return r, false
		}
	}
	if strings.ContainsAny(r.host, "/\x00") || r.host == "." || r.host == ".." || strings.ContainsAny(r.reference(), "/\x00") {
		return r, false
	}
	return r, true
}

func (h *tartHome) ociRepoDir(r remoteName) string {
	return filepath.Join(h.ociDir(), r.host, filepath.FromSlash(r.namespace))
}

func (h *tartHome) ociEntry(r remoteName) vmDir {
	return vmDir{name: r.String(), path: filepath.Join(h.ociRepoDir(r), r.reference())}
}

func (h *tartHome) ociExists(r remoteName) bool { return h.ociEntry(r).initialized() }

// ociEntryInfo is one `tart list --source oci` row.
type ociEntryInfo struct {
	name string
	dir  vmDir
}

func (h *tartHome) listOCI() []ociEntryInfo {
	var out []ociEntryInfo
	root := h.ociDir()
	_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || p == root {
			return nil
		}
		base := d.Name()
		if strings.HasPrefix(base, ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		rel, _ := filepath.Rel(root, filepath.Dir(p))
		rel = filepath.ToSlash(rel)
		isLink := d.Type()&os.ModeSymlink != 0
		switch {
		case strings.HasPrefix(base, "sha256:") && d.IsDir():
			v := vmDir{path: p}
			if v.initialized() && strings.Contains(rel, "/") {
				out = append(out, ociEntryInfo{name: rel + "@" + base, dir: v})
			}
			return filepath.SkipDir
		case isLink:
			v := vmDir{path: p}
			if v.initialized() && strings.Contains(rel, "/") {
				out = append(out, ociEntryInfo{name: rel + ":" + base, dir: v})
			}
		}
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	for i := range out {
		out[i].dir.name = out[i].name
	}
	return out
}

// ---- fake registry -------------------------------------------------------

// The fake registry ($FAKETART_REGISTRY) is a directory tree mirroring the
// OCI cache layout: <registry>/<host>/<namespace>/<tag>/ is a VM directory
// (config.json, disk.img, nvram.bin, optional fake-guest.json). An image's
// digest is computed from its contents; "@sha256:…" references are resolved by
// scanning the tags of the repository.

func imageDigest(dir string) (string, error) {
	h := sha256.New()
	for _, f := range []string{configFile, nvramFile, guestFile} {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil && !(f == guestFile && errors.Is(err, os.ErrNotExist)) {
			return "", err
		}
		fmt.Fprintf(h, "%s:%d\n", f, len(data))
		h.Write(data)
	}
	st, err := os.Stat(filepath.Join(dir, diskFile))
	if err != nil {
		return "", err
	}
	fmt.Fprintf(h, "disk:%d\n", st.Size())
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// registryLookup returns the registry image directory and its digest.
func registryLookup(r remoteName) (string, string, bool) {
	reg := os.Getenv("FAKETART_REGISTRY")
	if reg == "" {
		return "", "", false
	}
	repo := filepath.Join(reg, r.host, filepath.FromSlash(r.namespace))
	if r.tag != "" {
		dir := filepath.Join(repo, r.tag)
		if !(vmDir{path: dir}).initialized() {
			return "", "", false
		}
		d, err := imageDigest(dir)
		if err != nil {
			return "", "", false
		}
		return dir, d, true
	}
	entries, err := os.ReadDir(repo)
	if err != nil {
		return "", "", false
	}
	for _, e := range entries {
		dir := filepath.Join(repo, e.Name())
		if !(vmDir{path: dir}).initialized() {
			continue
		}
		if d, err := imageDigest(dir); err == nil && d == r.digest {
			return dir, d, true
		}
	}
	return "", "", false
}
