package cache

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/internal/bytesize"
)

func key(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// tarOf writes a tar archive of entries (name → content; a name ending in
// "/" is a directory, content "->target" a symbolic link).
func tarOf(t *testing.T, entries ...string) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for i := 0; i < len(entries); i += 2 {
		name, content := entries[i], entries[i+1]
		h := &tar.Header{Name: name, Mode: 0o644, ModTime: time.Unix(0, 0)}
		switch {
		case strings.HasSuffix(name, "/"):
			h.Typeflag, h.Mode = tar.TypeDir, 0o755
		case strings.HasPrefix(content, "->"):
			h.Typeflag, h.Linkname = tar.TypeSymlink, content[2:]
		default:
			h.Typeflag, h.Size = tar.TypeReg, int64(len(content))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			tw.Write([]byte(content))
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func writeTemp(t *testing.T, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "out.tar")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func open(t *testing.T, max int64) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "caches"), max)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func stage(t *testing.T, s *Store, project string, entries ...api.CacheEntry) ([]Mounted, string) {
	t.Helper()
	return stageIn(t, s, project, "", entries...)
}

// stageIn is stage for a build of project's cache domain.
func stageIn(t *testing.T, s *Store, project, domain string, entries ...api.CacheEntry) ([]Mounted, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "staged")
	m, err := s.Stage(project, domain, entries, dir)
	if err != nil {
		t.Fatal(err)
	}
	return m, dir
}

// TestStageIsPerProject: a build of project B never gets project A's
// archive, even under A's very key; A's own builds get it back whole.
func TestStageIsPerProject(t *testing.T) {
	s := open(t, 1<<20)
	data := tarOf(t, "0/", "", "0/index", "A's packages")
	k := key("a-npm")
	if err := s.Put("project-a", "", "npm", k, writeTemp(t, data)); err != nil {
		t.Fatal(err)
	}
	if m, _ := stage(t, s, "project-b", api.CacheEntry{Name: "npm", Key: k}); len(m) != 0 {
		t.Fatalf("project B was given %+v", m)
	}
	m, dir := stage(t, s, "project-a", api.CacheEntry{Name: "npm", Key: k})
	if len(m) != 1 || m[0].Key != k || m[0].File != "npm.tar" {
		t.Fatalf("project A was given %+v", m)
	}
	got, err := os.ReadFile(filepath.Join(dir, "npm.tar"))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("staged archive differs from the one put (%v)", err)
	}
	if r := s.Report(); r.Hits != 1 || r.Misses != 1 || len(r.Keys) != 1 || r.Keys[0] != k || r.Bytes != int64(len(data)) {
		t.Errorf("report %+v", r)
	}
	// What doctor sees from outside, and what a restarted agent counts on from.
	if r := Inspect(s.Dir()); r.Hits != 1 || r.Misses != 1 || r.Bytes != int64(len(data)) {
		t.Errorf("inspect %+v", r)
	}
	if again, err := Open(s.Dir(), s.MaxBytes()); err != nil || again.Report().Hits != 1 {
		t.Errorf("reopened store lost its counts: %v", err)
	}
	if got := Summary(s.Report(), 1<<30); got != bytesize.IEC(int64(len(data)))+" of 1.0 GiB, 1 of 2 builds warm (50%)" {
		t.Errorf("summary %q", got)
	}
	// A new lockfile: no archive of that key, the newest of the name instead.
	m, _ = stage(t, s, "project-a", api.CacheEntry{Name: "npm", Key: key("a-npm-v2")})
	if len(m) != 1 || m[0].Key != k {
		t.Errorf("a new key was given %+v, want the newest npm archive (key %s)", m, k)
	}
	// Bad names never reach the file system.
	for _, p := range []string{"..", "a/b", "", ".hidden"} {
		if err := s.Put(p, "", "npm", k, writeTemp(t, data)); err == nil {
			t.Errorf("project %q: put accepted", p)
		}
	}
	if err := s.Put("project-a", "", "npm", "../../x", writeTemp(t, data)); err == nil {
		t.Error("key ../../x: put accepted")
	}
}

// TestCaseVariantProjectsHaveTheirOwnCaches: projects whose names differ
// only in case have directories whose names differ in more than case (a
// Mac's file system ignores case), and neither gets the other's archive.
func TestCaseVariantProjectsHaveTheirOwnCaches(t *testing.T) {
	s := open(t, 1<<20)
	for _, p := range []string{"App", "app"} {
		if err := s.Put(p, "", "gradle", key(p+"-gradle"), writeTemp(t, tarOf(t, "init.d/", "", "init.d/x.gradle", p+"'s script"))); err != nil {
			t.Fatal(err)
		}
	}
	dirs, _ := os.ReadDir(s.Dir())
	var names []string
	for _, d := range dirs {
		if d.IsDir() {
			names = append(names, d.Name())
		}
	}
	if len(names) != 2 || strings.EqualFold(names[0], names[1]) {
		t.Fatalf("project directories %q: want two that differ in more than case", names)
	}
	for _, p := range []string{"App", "app"} {
		m, dir := stage(t, s, p, api.CacheEntry{Name: "gradle", Key: key(p + "-gradle")})
		got, _ := os.ReadFile(filepath.Join(dir, "gradle.tar"))
		if len(m) != 1 || !bytes.Contains(got, []byte(p+"'s script")) {
			t.Errorf("%s was given %+v: %q", p, m, got)
		}
	}
}

// TestCodeCachesOnlyUnderTheirKey: a cache whose content runs in the build
// (Gradle, CocoaPods, custom paths) is given only under its exact key,
// never as the newest archive of another key; a package manager's store
// still is.
func TestCodeCachesOnlyUnderTheirKey(t *testing.T) {
	s := open(t, 1<<20)
	for _, name := range []string{"gradle", "pods", "custom", "npm"} {
		if err := s.Put("app", "", name, key(name+"-v1"), writeTemp(t, tarOf(t, "0/f", name))); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"gradle", "pods", "custom", api.CacheNodeModules} {
		if m, _ := stage(t, s, "app", api.CacheEntry{Name: name, Key: key(name + "-v2")}); len(m) != 0 {
			t.Errorf("%s under a new key was given %+v", name, m)
		}
	}
	if m, _ := stage(t, s, "app", api.CacheEntry{Name: "npm", Key: key("npm-v2")}); len(m) != 1 || m[0].Key != key("npm-v1") {
		t.Errorf("npm under a new key was given %+v, want its newest archive", m)
	}
}

// TestStageIsPerDomain: a project's cache domains (the controller's word:
// builds with secrets apart from builds without) share no archive, under
// one key or by the fallback to the newest, and saving in one replaces
// nothing in the other.
func TestStageIsPerDomain(t *testing.T) {
	s := open(t, 1<<20)
	const open, secrets = "environment:production without secrets", "environment:production with secrets"
	for _, name := range []string{"gradle", "npm"} {
		if err := s.Put("app", open, name, key(name), writeTemp(t, tarOf(t, "0/f", "planted "+name))); err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range []api.CacheEntry{{Name: "gradle", Key: key("gradle")}, {Name: "npm", Key: key("npm-v2")}} {
		if m, _ := stageIn(t, s, "app", secrets, e); len(m) != 0 {
			t.Errorf("a build with secrets was given %+v, saved by a build without", m)
		}
	}
	if err := s.Put("app", secrets, "npm", key("npm-v2"), writeTemp(t, tarOf(t, "0/f", "own npm"))); err != nil {
		t.Fatal(err)
	}
	if m, _ := stageIn(t, s, "app", open, api.CacheEntry{Name: "npm", Key: key("npm")}); len(m) != 1 || m[0].Key != key("npm") {
		t.Errorf("the other domain's save replaced this one's archive: %+v", m)
	}
}

// TestOldLayoutIsPruned: archives of the layouts before cache domains
// (<dir>/<project>/… and <dir>/<project>.<hash>/…, which any build of the
// project could have planted) are removed when the store opens; what the
// store did not write stays.
func TestOldLayoutIsPruned(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "caches")
	old := filepath.Join(dir, "App", "gradle")
	previous := filepath.Join(dir, "app."+strings.Repeat("0f", 16), "gradle")
	for _, d := range []string{old, previous} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(d, key("x")+".tar"), tarOf(t, "0/f", "old"), 0o600)
	}
	os.WriteFile(filepath.Join(dir, "App", "notes.txt"), []byte("the owner's"), 0o600)
	s, err := Open(dir, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{old, previous} {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("the old layout's cache directory %s is left: %v", d, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "App", "notes.txt")); err != nil {
		t.Errorf("a file the store did not write was removed: %v", err)
	}
	if r := s.Report(); r.Bytes != 0 || len(r.Keys) != 0 {
		t.Errorf("report %+v", r)
	}
}

// TestPutRefusesBadArchives: what a build may not slip into the store, each
// refused with ErrBadArchive and leaving the previous archive in place.
func TestPutRefusesBadArchives(t *testing.T) {
	const limit = 64 << 10
	s := open(t, limit)
	good := tarOf(t, "0/", "", "0/a", "good")
	k := key("p")
	if err := s.Put("p", "", "npm", k, writeTemp(t, good)); err != nil {
		t.Fatal(err)
	}
	var hdr bytes.Buffer
	tw := tar.NewWriter(&hdr)
	tw.WriteHeader(&tar.Header{Name: "0/dev", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3, Mode: 0o644})
	tw.Close()
	var hard bytes.Buffer
	tw = tar.NewWriter(&hard)
	tw.WriteHeader(&tar.Header{Name: "0/a", Typeflag: tar.TypeReg, Mode: 0o644})
	tw.WriteHeader(&tar.Header{Name: "0/b", Typeflag: tar.TypeLink, Linkname: "0/a", Mode: 0o644})
	tw.Close()
	cases := map[string][]byte{
		"corrupt":              bytes.Repeat([]byte("not a tar archive "), 100),
		"truncated":            tarOf(t, "0/big", strings.Repeat("x", 4000))[:1500],
		"oversized":            tarOf(t, "0/big", strings.Repeat("x", limit)),
		"absolute name":        tarOf(t, "/etc/passwd", "x"),
		"dot-dot name":         tarOf(t, "0/../../outside", "x"),
		"link out of its tree": tarOf(t, "0/", "", "0/l", "->../1/x"),
		"link to the host":     tarOf(t, "0/", "", "0/l", "->/etc/passwd"),
		"link far out":         tarOf(t, "0/l", "->../../../../etc"),
		"device":               hdr.Bytes(),
		"hard link":            hard.Bytes(),
		"empty":                tarOf(t),
	}
	for name, data := range cases {
		err := s.Put("p", "", "npm", key(name), writeTemp(t, data))
		if !errors.Is(err, ErrBadArchive) {
			t.Errorf("%s: put gave %v, want ErrBadArchive", name, err)
		}
	}
	// The archive is a symbolic link the VM left in the shared folder.
	link := filepath.Join(t.TempDir(), "link.tar")
	os.Symlink(writeTemp(t, good), link)
	if err := s.Put("p", "", "npm", key("link"), link); !errors.Is(err, ErrBadArchive) {
		t.Errorf("symlinked archive: put gave %v, want ErrBadArchive", err)
	}
	if r := s.Report(); len(r.Keys) != 1 || r.Keys[0] != k {
		t.Errorf("after refusals the store holds %v, want only %s", r.Keys, k)
	}
	if err := s.Put("p", "", "npm", key("inside"), writeTemp(t, tarOf(t, "0/d/", "", "0/d/l", "->../a", "0/a", "x"))); err != nil {
		t.Errorf("a link inside its tree was refused: %v", err)
	}
	entries, _ := os.ReadDir(filepath.Join(s.Dir(), scopeDir("p", ""), "npm"))
	if len(entries) != 1 {
		t.Errorf("cache dir holds %d entries after a replacing put, want 1 (no temp files, the old archive gone)", len(entries))
	}
}

// TestNodeModulesLayouts: the links a node_modules tree holds (npm's and
// Yarn's .bin, pnpm's .pnpm store and its nested links), all relative and
// inside the tree, are accepted with the stamp beside the tree; a link from
// it to a workspace package or the host is refused. Only the exact key of
// node_modules is shared: the VM would discard any other.
func TestNodeModulesLayouts(t *testing.T) {
	s := open(t, 1<<20)
	good := tarOf(t,
		"0/", "",
		"0/.bin/", "",
		"0/.bin/semver", "->../semver/bin/semver.js",
		"0/semver/bin/semver.js", "#!/usr/bin/env node",
		"0/.pnpm/is-number@7.0.0/node_modules/is-number/index.js", "module.exports = 1",
		"0/.pnpm/a@1.0.0/node_modules/a/index.js", "require('is-number')",
		"0/.pnpm/a@1.0.0/node_modules/is-number", "->../../is-number@7.0.0/node_modules/is-number",
		"0/is-number", "->.pnpm/is-number@7.0.0/node_modules/is-number",
		"0/.pnpm/node_modules/a", "->../a@1.0.0/node_modules/a",
		"stamp.json", `{"key":"k"}`,
	)
	k := key("modules")
	if err := s.Put("p", "", api.CacheNodeModules, k, writeTemp(t, good)); err != nil {
		t.Fatalf("a node_modules tree with links inside it was refused: %v", err)
	}
	for name, link := range map[string][2]string{
		"workspace package": {"0/@fixture/shared", "->../../packages/shared"},
		"file: dependency":  {"0/cli", "->../tools/cli"},
		"from .pnpm out":    {"0/.pnpm/a@1.0.0/node_modules/a", "->../../../../outside"},
		"absolute":          {"0/npm", "->/usr/lib/node_modules/npm"},
	} {
		data := tarOf(t, "0/", "", link[0], link[1])
		if err := s.Put("p", "", api.CacheNodeModules, key(name), writeTemp(t, data)); !errors.Is(err, ErrBadArchive) {
			t.Errorf("%s: put gave %v, want ErrBadArchive", name, err)
		}
	}
	if m, _ := stage(t, s, "p", api.CacheEntry{Name: api.CacheNodeModules, Key: k}); len(m) != 1 || m[0].Key != k {
		t.Errorf("exact key: staged %+v", m)
	}
	if m, _ := stage(t, s, "p", api.CacheEntry{Name: api.CacheNodeModules, Key: key("other")}); len(m) != 0 {
		t.Errorf("another key: staged %+v, want nothing", m)
	}
}

// TestEvictionUnderCap: the least recently used archive goes first, and
// being staged for a build counts as a use.
func TestEvictionUnderCap(t *testing.T) {
	one := tarOf(t, "0/f", strings.Repeat("x", 3000)) // 4 KiB+ each
	size := int64(len(one))
	s := open(t, 3*size+size/2) // room for three
	for i, p := range []string{"p1", "p2", "p3"} {
		if err := s.Put(p, "", "npm", key(p), writeTemp(t, one)); err != nil {
			t.Fatal(err)
		}
		old := time.Now().Add(time.Duration(i-10) * time.Minute) // p1 oldest
		os.Chtimes(filepath.Join(s.Dir(), scopeDir(p, ""), "npm", key(p)+".tar"), old, old)
	}
	stage(t, s, "p1", api.CacheEntry{Name: "npm", Key: key("p1")}) // p1 is now the newest
	if err := s.Put("p4", "", "npm", key("p4"), writeTemp(t, one)); err != nil {
		t.Fatal(err)
	}
	r := s.Report()
	if r.Bytes > s.MaxBytes() {
		t.Errorf("store holds %d bytes over its cap of %d", r.Bytes, s.MaxBytes())
	}
	want := []string{key("p4"), key("p1"), key("p3")}
	if fmt.Sprint(r.Keys) != fmt.Sprint(want) {
		t.Errorf("keys %v, want p4, p1, p3 (p2 the least recently used evicted)", r.Keys)
	}
	if err := s.Put("p5", "", "npm", key("p5"), writeTemp(t, tarOf(t, "0/f", strings.Repeat("x", int(4*size))))); !errors.Is(err, ErrBadArchive) {
		t.Errorf("an archive over the whole cap: %v", err)
	}
}

// TestConcurrentPuts: builds of one project finishing together leave one
// whole archive, byte for byte one of theirs, and no temporary file.
func TestConcurrentPuts(t *testing.T) {
	s := open(t, 64<<20)
	const n = 8
	archives := make([][]byte, n)
	paths := make([]string, n)
	for i := range archives {
		archives[i] = tarOf(t, "0/f", strings.Repeat(string(rune('a'+i)), 200_000))
		paths[i] = writeTemp(t, archives[i])
	}
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.Put("p", "", "npm", key(fmt.Sprint(i%2)), paths[i]); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	entries, _ := os.ReadDir(filepath.Join(s.Dir(), scopeDir("p", ""), "npm"))
	if len(entries) != 1 {
		t.Fatalf("%d entries in the cache directory, want one archive", len(entries))
	}
	got, err := os.ReadFile(filepath.Join(s.Dir(), scopeDir("p", ""), "npm", entries[0].Name()))
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range archives {
		if bytes.Equal(got, a) {
			return
		}
	}
	t.Error("the archive left is none of the archives put: torn")
}
