// Package cache keeps a worker's dependency caches: one tar archive per
// project, cache domain, cache name and key (<dir>/<scope dir>/<name>/<key>.tar),
// handed to builds read-only and replaced only by an archive a successful
// build of the same project wrote, after validation. The total size is
// capped; the least recently used archives go first.
//
// The project and the cache domain are the controller's word on the build
// (api.Job), never something the build says: they decide the directory, so
// no build can read or write the caches of another project, or of builds
// its project keeps apart from it (a build with secrets from builds
// without), whatever keys it carries. Project names may differ only in
// case, and a Mac's file system ignores case, so the directory is a
// case-folded name that still tells such projects apart (scopeDir).
package cache

import (
	"cmp"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/internal/boundedfile"
	"github.com/freeagent-build/freeagent/internal/bytesize"
)

// Names that may appear in a path of the store.
var (
	validProject = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`) // the controller's project names
	validName    = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,31}$`)
	validKey     = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// Directories of the layouts before scopeDir: <dir>/<project>/… and
// <dir>/<lower-case project>.<hash of the project>/…, neither kept apart by
// cache domain. Open removes their archives, which any build could have
// planted.
var oldScopeDir = []*regexp.Regexp{validProject, regexp.MustCompile(`^[a-z0-9_-]{1,128}\.[0-9a-f]{32}$`)}

// scopeDir is the directory in the store of a project's caches of one
// cache domain: the project's name in lower case, readable, then 128 bits
// of the SHA-256 of its exact name and the domain, so that "App" and "app",
// or two domains, have directories apart even where the file system
// ignores case. The "~" cannot occur in a project name, so no old
// directory looks new.
func scopeDir(project, domain string) string {
	sum := sha256.Sum256([]byte(project + "\n" + domain))
	return strings.ToLower(project) + "~" + hex.EncodeToString(sum[:16])
}

// fallbackCaches may be given to a build under another key of the same
// name (the project's newest) when their own key has no archive: package
// managers' download stores, which hold packages only, installed by the
// lockfile. The others are restored only under their exact key: node_modules
// (the VM restores it only under its key anyway), and caches that run code
// in a build (Gradle's init scripts and wrapper, CocoaPods, custom paths).
var fallbackCaches = []string{"npm", "yarn", "pnpm", "bun"}

// ValidKey reports whether key is a cache key (64 lowercase hex digits).
func ValidKey(key string) bool { return validKey.MatchString(key) }

const archiveExt = ".tar"

// Store is the worker's cache directory. Its methods are safe for
// concurrent use by the builds of one agent.
type Store struct {
	dir      string
	maxBytes int64

	mu           sync.Mutex
	hits, misses int64
}

// Open prepares the store in dir with a total cap of maxBytes (> 0), and
// removes what an interrupted write left there, and the archives of the
// layouts before scopeDir (which no lookup finds any more).
func Open(dir string, maxBytes int64) (*Store, error) {
	if maxBytes <= 0 {
		return nil, fmt.Errorf("cache size cap %d: must be positive", maxBytes)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create the cache directory: %w", err)
	}
	s := &Store{dir: dir, maxBytes: maxBytes}
	s.hits, s.misses = readStats(dir)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasPrefix(d.Name(), ".tmp-") {
			os.Remove(p)
		}
		return nil
	})
	s.pruneOldLayout()
	return s, err
}

// pruneOldLayout removes the archives of the directories of the layouts
// before scopeDir, and those directories once empty; anything else stays.
func (s *Store) pruneOldLayout() {
	projects, _ := os.ReadDir(s.dir)
	for _, p := range projects {
		if !p.IsDir() || !slices.ContainsFunc(oldScopeDir, func(re *regexp.Regexp) bool { return re.MatchString(p.Name()) }) {
			continue
		}
		old := filepath.Join(s.dir, p.Name())
		names, _ := os.ReadDir(old)
		for _, n := range names {
			if !n.IsDir() {
				continue
			}
			for _, a := range archivesIn(filepath.Join(old, n.Name())) {
				os.Remove(a.path)
			}
			os.Remove(filepath.Join(old, n.Name())) // only if empty
		}
		os.Remove(old)
	}
}

// statsFile keeps the hit counts across restarts of the agent, for the
// Mac owner (`freeagent doctor`) as much as for the controller.
const statsFile = ".stats.json"

type stats struct {
	Hits   int64 `json:"hits"`
	Misses int64 `json:"misses"`
}

func readStats(dir string) (hits, misses int64) {
	data, err := boundedfile.ReadNoFollow(filepath.Join(dir, statsFile), 4<<10)
	var st stats
	if err != nil || json.Unmarshal(data, &st) != nil || st.Hits < 0 || st.Misses < 0 {
		return 0, 0
	}
	return st.Hits, st.Misses
}

// writeStats records the counts (best effort: they only inform). Caller
// holds s.mu.
func (s *Store) writeStats() {
	data, _ := json.Marshal(stats{Hits: s.hits, Misses: s.misses})
	tmp := filepath.Join(s.dir, ".tmp-stats-"+randomHex())
	if os.WriteFile(tmp, data, 0o600) == nil && os.Rename(tmp, filepath.Join(s.dir, statsFile)) == nil {
		return
	}
	os.Remove(tmp)
}

// Inspect reports on the store in dir without changing anything (a running
// agent may be writing it): its size, keys and hit counts. A missing
// directory is an empty store.
func Inspect(dir string) api.WorkerCache {
	s := &Store{dir: dir}
	s.hits, s.misses = readStats(dir)
	return s.Report()
}

// Summary says in a line how big the caches are and how often builds found
// them warm: "48.2 MiB of 20 GiB, 3 of 4 builds warm (75%)".
func Summary(c api.WorkerCache, maxBytes int64) string {
	line := bytesize.IEC(c.Bytes)
	if maxBytes > 0 {
		line += " of " + bytesize.IEC(maxBytes)
	}
	if n := c.Hits + c.Misses; n > 0 {
		line += fmt.Sprintf(", %d of %d builds warm (%.0f%%)", c.Hits, n, 100*c.HitRate())
	} else {
		line += ", no build yet"
	}
	return line
}

// Dir is the store's directory.
func (s *Store) Dir() string { return s.dir }

// MaxBytes is the store's cap.
func (s *Store) MaxBytes() int64 { return s.maxBytes }

// Mounted is one archive given to a build: its cache's name, the key it was
// saved under (the build's own key on an exact hit) and its file name in
// the build's cache directory.
type Mounted struct {
	Name  string `json:"name"`
	Key   string `json:"key"`
	File  string `json:"file"`
	Bytes int64  `json:"bytes"`
}

// Stage puts into dir (created) the archive of each entry of project's
// cache domain: the one of its key, else (see lookup) the newest of the
// same name. The files are hard links (copies across file systems), so an
// eviction or a swap-in during the build changes nothing the build sees.
// It counts the build as a hit when it found any archive and marks those
// archives used.
func (s *Store) Stage(project, domain string, entries []api.CacheEntry, dir string) ([]Mounted, error) {
	if len(entries) == 0 || !validProject.MatchString(project) {
		return nil, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create the build's cache directory: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Mounted
	for _, e := range entries {
		if !validName.MatchString(e.Name) || !ValidKey(e.Key) || slices.ContainsFunc(out, func(m Mounted) bool { return m.Name == e.Name }) {
			continue
		}
		src, key, ok := s.lookup(project, domain, e.Name, e.Key)
		if !ok {
			continue
		}
		m := Mounted{Name: e.Name, Key: key, File: e.Name + archiveExt}
		dst := filepath.Join(dir, m.File)
		if err := linkOrCopy(src, dst); err != nil {
			return out, fmt.Errorf("give the build its %s cache: %w", e.Name, err)
		}
		if st, err := os.Stat(dst); err == nil {
			m.Bytes = st.Size()
		}
		now := time.Now()
		os.Chtimes(src, now, now) //nolint:errcheck // recency only orders eviction
		out = append(out, m)
	}
	if len(out) > 0 {
		s.hits++
	} else {
		s.misses++
	}
	s.writeStats()
	return out, nil
}

// lookup finds the archive of name under key of project's cache domain,
// else, for the fallbackCaches, the domain's newest under another key.
func (s *Store) lookup(project, domain, name, key string) (path, found string, ok bool) {
	dir := filepath.Join(s.dir, scopeDir(project, domain), name)
	exact := filepath.Join(dir, key+archiveExt)
	if st, err := os.Lstat(exact); err == nil && st.Mode().IsRegular() {
		return exact, key, true
	}
	if !slices.Contains(fallbackCaches, name) {
		return "", "", false
	}
	if as := archivesIn(dir); len(as) > 0 { // newest first
		return as[0].path, as[0].key, true
	}
	return "", "", false
}

// Put validates the archive src, which a build of project in cache domain
// wrote, and makes it that domain's archive of name under key, replacing
// any other archive of that name in the domain (the new one supersedes
// it). A refused archive leaves the store as it was; the error says why.
// Concurrent Puts of one cache leave one whole archive: the last renamed.
func (s *Store) Put(project, domain, name, key, src string) error {
	if !validProject.MatchString(project) || !validName.MatchString(name) || !ValidKey(key) {
		return fmt.Errorf("cache %q of project %q under key %q: not a valid name", name, project, key)
	}
	dir := filepath.Join(s.dir, scopeDir(project, domain), name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create the cache's directory: %w", err)
	}
	tmp := filepath.Join(dir, ".tmp-"+randomHex())
	defer os.Remove(tmp)
	size, err := s.copyValidated(src, tmp)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	dst := filepath.Join(dir, key+archiveExt)
	// Room under the cap, counting the archives this one replaces as gone.
	if err := s.evict(size, dir); err != nil {
		return err
	}
	if err := os.Rename(tmp, dst); err != nil {
		return fmt.Errorf("swap in the %s cache: %w", name, err)
	}
	syncDir(dir)
	old, _ := os.ReadDir(dir)
	for _, d := range old {
		if d.Name() != key+archiveExt && strings.HasSuffix(d.Name(), archiveExt) {
			os.Remove(filepath.Join(dir, d.Name()))
		}
	}
	return nil
}

// copyValidated copies src to dst while validating it as a cache archive,
// growing room by eviction when the disk is full. It returns dst's size.
// An archive that would not fit even with every cache evicted evicts none.
func (s *Store) copyValidated(src, dst string) (int64, error) {
	for {
		size, err := copyArchive(src, dst, s.maxBytes)
		if !errors.Is(err, syscall.ENOSPC) {
			return size, err
		}
		os.Remove(dst) // what was copied is room too
		s.mu.Lock()
		freed := s.fits(src) && s.evictOldest()
		s.mu.Unlock()
		if !freed {
			return 0, fmt.Errorf("the disk is full and evicting caches cannot make room for this one: %w", err)
		}
	}
}

// fits reports whether src could be written once every archive is gone.
// Caller holds s.mu.
func (s *Store) fits(src string) bool {
	st, err := os.Lstat(src)
	var fs unix.Statfs_t
	if err != nil || unix.Statfs(s.dir, &fs) != nil {
		return true // no way to tell: evicting is the safe side of a full disk
	}
	room := int64(fs.Bavail) * int64(fs.Bsize) //nolint:unconvert // field types differ between systems
	for _, a := range s.list() {
		room += a.size
	}
	return st.Size() <= room
}

// archive is one archive of the store.
type archive struct {
	path  string
	size  int64
	used  time.Time
	key   string
	cache string // its <scope dir>/<name> directory
}

// list returns the store's archives, most recently used first.
func (s *Store) list() []archive {
	var out []archive
	projects, _ := os.ReadDir(s.dir)
	for _, p := range projects {
		if !p.IsDir() {
			continue
		}
		names, _ := os.ReadDir(filepath.Join(s.dir, p.Name()))
		for _, n := range names {
			out = append(out, archivesIn(filepath.Join(s.dir, p.Name(), n.Name()))...)
		}
	}
	sortByUse(out)
	return out
}

// archivesIn returns the archives of one cache directory
// (<scope dir>/<name>), most recently used first.
func archivesIn(dir string) []archive {
	var out []archive
	files, _ := os.ReadDir(dir)
	for _, f := range files {
		key, ok := strings.CutSuffix(f.Name(), archiveExt)
		info, err := f.Info()
		if !ok || !ValidKey(key) || err != nil || !info.Mode().IsRegular() {
			continue
		}
		out = append(out, archive{path: filepath.Join(dir, f.Name()), size: info.Size(), used: info.ModTime(), key: key, cache: dir})
	}
	sortByUse(out)
	return out
}

func sortByUse(as []archive) {
	slices.SortFunc(as, func(a, b archive) int { return cmp.Or(b.used.Compare(a.used), strings.Compare(a.path, b.path)) })
}

// evict removes the least recently used archives until adding size bytes
// stays under the cap; the archives of replacing (which the new one
// replaces) count as gone and are left to the caller. Caller holds s.mu.
func (s *Store) evict(size int64, replacing string) error {
	if size > s.maxBytes {
		return fmt.Errorf("the archive (%d bytes) is larger than the cache cap (%d bytes)", size, s.maxBytes)
	}
	var total int64
	all := s.list()
	for _, a := range all {
		if a.cache != replacing {
			total += a.size
		}
	}
	for i := len(all) - 1; i >= 0 && total+size > s.maxBytes; i-- {
		if all[i].cache == replacing {
			continue
		}
		if err := os.Remove(all[i].path); err == nil {
			total -= all[i].size
		}
	}
	return nil
}

// evictOldest removes the least recently used archive, reporting whether
// there was one. Caller holds s.mu.
func (s *Store) evictOldest() bool {
	all := s.list()
	for i := len(all) - 1; i >= 0; i-- {
		if os.Remove(all[i].path) == nil {
			return true
		}
	}
	return false
}

// Report is what the worker tells the controller: its newest keys (at
// most api.MaxWorkerCacheKeys), its size and its hit counts (kept across
// the agent's restarts).
func (s *Store) Report() api.WorkerCache {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := api.WorkerCache{Keys: []string{}, Hits: s.hits, Misses: s.misses}
	for _, a := range s.list() {
		r.Bytes += a.size
		if len(r.Keys) < api.MaxWorkerCacheKeys {
			r.Keys = append(r.Keys, a.key)
		}
	}
	return r
}

func linkOrCopy(src, dst string) error {
	os.Remove(dst)
	if err := os.Link(src, dst); err == nil {
		return nil
	}
	return CopyReadOnly(src, dst)
}

// CopyReadOnly copies the file src to dst, a new file of mode 0444: how
// an archive reaches a build that cannot link it.
func CopyReadOnly(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o444)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

func randomHex() string {
	var b [8]byte
	rand.Read(b[:]) //nolint:errcheck // crypto/rand does not fail on supported platforms
	return hex.EncodeToString(b[:])
}

// syncDir makes a rename in dir durable (best effort).
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync() //nolint:errcheck
		d.Close()
	}
}
