// Package pack chooses the files of an Expo project to upload and streams
// them as a tar.gz: nothing is held in memory but the file list and the
// compressor's window, so a project of any size packs in constant memory.
//
// What is left out: Defaults(), then the project's ignore rules. A
// .easignore at the project root replaces every .gitignore (EAS semantics);
// without one, the root .gitignore and those of subdirectories apply, each to
// its own directory, with git's precedence (deeper files win, last match
// wins, an excluded directory is never entered). A project can re-include a
// default with a negated pattern, e.g. "!/dist/".
package pack

import (
	"archive/tar"
	"cmp"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/freeagent-build/freeagent/cli/ignore"
	"github.com/freeagent-build/freeagent/internal/sourcefp"
)

// Defaults returns the patterns excluded from every upload unless the
// project's ignore file re-includes them: dependencies (the build installs
// them), VCS data, Expo's caches, native and web build output, logs and
// earlier build artifacts.
func Defaults() []string {
	return []string{
		".git/",
		".hg/",
		".svn/",
		"node_modules/",
		".expo/",
		"/dist/",
		"/build/",
		"/web-build/",
		"/logs/",
		"*.log",
		".DS_Store",
		"/ios/build/",
		"/ios/Pods/",
		"/ios/DerivedData/",
		"xcuserdata/",
		"/android/build/",
		"/android/app/build/",
		"/android/.gradle/",
		".gradle/",
		".cxx/",
		"*.ipa",
		"*.apk",
		"*.aab",
		"*.xcarchive/",
	}
}

// Kinds of entries, as the source fingerprint hashes them.
const (
	KindDir     = sourcefp.Dir
	KindFile    = sourcefp.File
	KindSymlink = sourcefp.Symlink
)

// Entry is one path to pack.
type Entry struct {
	Rel     string // slash-separated, relative to the root
	Kind    int
	Mode    fs.FileMode // permission bits
	Size    int64
	ModTime time.Time
	Link    string // symlink target
}

// Options shape what Scan packs.
type Options struct {
	// AppDir is the app's directory inside the root (slash-separated; ""
	// when the app is the root), for a monorepo packed from its workspace
	// root. The defaults anchored at the project's root (/dist/,
	// /ios/Pods/, …) apply to the app's directory too, so the app's build
	// output stays out as it does for a lone app. Ignore files are read
	// as for any root: a .easignore at the root replaces every .gitignore
	// (EAS reads .easignore only at the root of the upload), the
	// .gitignore files apply to their own directories.
	AppDir string
	// Exclude lists paths relative to the root (slash-separated) that are
	// never packed, whatever the ignore files say: credentials.json and
	// the files it names, which are sent sealed instead. A directory
	// leaves out everything in it.
	Exclude []string
}

// Plan is the result of Scan: what will be packed.
type Plan struct {
	Root       string // absolute, symlinks resolved
	AppDir     string // Options.AppDir, cleaned
	Entries    []Entry
	Files      int   // regular files
	Bytes      int64 // their total size
	Excluded   int   // paths left out (an excluded directory counts once)
	ExcludedAt []string
	IgnoreFile string   // ".easignore", ".gitignore" or "" (defaults only)
	Warnings   []string // unreadable patterns, skipped links and special files

	exclude map[string]bool // Options.Exclude, cleaned
}

// cleanRel checks and cleans a slash-separated path relative to the root.
func cleanRel(rel, what string) (string, error) {
	if rel == "" {
		return "", nil
	}
	if path.IsAbs(rel) || filepath.IsAbs(rel) || strings.Contains(rel, "\\") {
		return "", fmt.Errorf("%s %q must be relative to the root, with forward slashes", what, rel)
	}
	c := path.Clean(rel)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("%s %q leaves the root", what, rel)
	}
	if c == "." {
		return "", nil
	}
	return c, nil
}

// maxExcludedSamples bounds ExcludedAt.
const maxExcludedSamples = 20

// Scan walks root (the app's directory, or a workspace root holding the
// app at opts.AppDir) and decides what to pack, leaving opts.Exclude out.
// Only names and metadata are read; file contents are read by Write.
func Scan(ctx context.Context, root string, opts Options) (*Plan, error) {
	p, m, err := newPlan(root, opts)
	if err != nil {
		return nil, err
	}
	if err := p.walk(ctx, m, ""); err != nil {
		return nil, err
	}
	return p, nil
}

// Packs reports whether Scan would pack the regular file at rel
// (slash-separated, relative to root): it exists, and neither it nor a
// directory above it is left out. Only the ignore files on its way are
// read, so it answers quickly in a project of any size.
func Packs(root string, opts Options, rel string) (bool, error) {
	rel, err := cleanRel(rel, "a path to pack")
	if err != nil || rel == "" {
		return false, cmp.Or(err, errors.New("the root itself is not a file to pack"))
	}
	p, m, err := newPlan(root, opts)
	if err != nil {
		return false, err
	}
	if st, err := os.Lstat(filepath.Join(p.Root, filepath.FromSlash(rel))); err != nil || !st.Mode().IsRegular() {
		return false, nil
	}
	parts := strings.Split(rel, "/")
	for i := range parts {
		dir, child := path.Join(parts[:i]...), path.Join(parts[:i+1]...)
		if err := p.addGitignore(m, dir); err != nil {
			return false, err
		}
		if ig, _ := m.Ignored(child, i < len(parts)-1); ig || p.exclude[child] {
			return false, nil
		}
	}
	return true, nil
}

// newPlan checks opts and compiles the rules every path of root is
// decided by before the walk adds the .gitignore files it meets.
func newPlan(root string, opts Options) (*Plan, *ignore.Matcher, error) {
	appDir, err := cleanRel(opts.AppDir, "the app directory")
	if err != nil {
		return nil, nil, err
	}
	exclude := map[string]bool{}
	for _, e := range opts.Exclude {
		rel, err := cleanRel(e, "an excluded path")
		if err != nil {
			return nil, nil, err
		}
		if rel == "" {
			return nil, nil, fmt.Errorf("cannot exclude the whole root %q from the upload", root)
		}
		exclude[rel] = true
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, nil, fmt.Errorf("resolve %s: %w", root, err)
	}
	if abs, err = filepath.EvalSymlinks(abs); err != nil {
		return nil, nil, fmt.Errorf("resolve %s: %w", root, err)
	}
	p := &Plan{Root: abs, AppDir: appDir, exclude: exclude}
	defaults, _ := ignore.Parse("", []byte(strings.Join(Defaults(), "\n")), "built-in defaults")
	m := ignore.New(defaults...)
	if appDir != "" {
		appDefaults, _ := ignore.Parse(appDir, []byte(strings.Join(Defaults(), "\n")), "built-in defaults")
		m.Add(appDefaults...)
		if _, err := os.Stat(filepath.Join(abs, filepath.FromSlash(appDir), ".easignore")); err == nil {
			p.Warnings = append(p.Warnings, fmt.Sprintf("%s/.easignore is not used: .easignore is read only at the root of the upload, %s; move its rules there, prefixed with %s/", appDir, abs, appDir))
		}
	}
	easignore, err := os.ReadFile(filepath.Join(abs, ".easignore"))
	switch {
	case err == nil:
		p.IgnoreFile = ".easignore"
		pats, warn := ignore.Parse("", easignore, ".easignore")
		m.Add(pats...)
		p.Warnings = append(p.Warnings, warn...)
	case errors.Is(err, fs.ErrNotExist):
		if _, err := os.Stat(filepath.Join(abs, ".gitignore")); err == nil {
			p.IgnoreFile = ".gitignore"
		}
	default:
		return nil, nil, fmt.Errorf("read .easignore: %w", err)
	}
	return p, m, nil
}

// addGitignore adds dir's .gitignore to m, unless a .easignore replaces
// every .gitignore.
func (p *Plan) addGitignore(m *ignore.Matcher, dir string) error {
	if p.IgnoreFile == ".easignore" {
		return nil
	}
	file := filepath.Join(p.Root, filepath.FromSlash(dir), ".gitignore")
	if st, err := os.Lstat(file); err != nil || !st.Mode().IsRegular() {
		return nil
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("read %s: %w", path.Join(dir, ".gitignore"), err)
	}
	pats, warn := ignore.Parse(dir, data, path.Join(dir, ".gitignore"))
	m.Add(pats...)
	p.Warnings = append(p.Warnings, warn...)
	return nil
}

func (p *Plan) walk(ctx context.Context, m *ignore.Matcher, dir string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	full := filepath.Join(p.Root, filepath.FromSlash(dir))
	ents, err := os.ReadDir(full)
	if err != nil {
		return fmt.Errorf("read directory %s: %w", full, err)
	}
	if err := p.addGitignore(m, dir); err != nil {
		return err
	}
	for _, e := range ents { // os.ReadDir sorts by name: the archive is deterministic
		rel := path.Join(dir, e.Name())
		isDir := e.IsDir()
		if ig, _ := m.Ignored(rel, isDir); ig || p.exclude[rel] {
			p.Excluded++
			if len(p.ExcludedAt) < maxExcludedSamples {
				if isDir {
					rel += "/"
				}
				p.ExcludedAt = append(p.ExcludedAt, rel)
			}
			continue
		}
		info, err := e.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue // removed while we looked
			}
			return fmt.Errorf("stat %s: %w", rel, err)
		}
		switch t := info.Mode().Type(); {
		case isDir:
			p.Entries = append(p.Entries, Entry{Rel: rel, Kind: KindDir, Mode: info.Mode().Perm(), ModTime: info.ModTime()})
			if err := p.walk(ctx, m, rel); err != nil {
				return err
			}
		case t.IsRegular():
			p.Entries = append(p.Entries, Entry{Rel: rel, Kind: KindFile, Mode: info.Mode().Perm(), Size: info.Size(), ModTime: info.ModTime()})
			p.Files++
			p.Bytes += info.Size()
		case t&fs.ModeSymlink != 0:
			target, err := os.Readlink(filepath.Join(full, e.Name()))
			if err != nil {
				return fmt.Errorf("read link %s: %w", rel, err)
			}
			if !linkStaysInside(rel, target) {
				p.Warnings = append(p.Warnings, fmt.Sprintf("skipped %s: it is a symbolic link to %s, outside the project", rel, target))
				continue
			}
			p.Entries = append(p.Entries, Entry{Rel: rel, Kind: KindSymlink, Mode: 0o777, ModTime: info.ModTime(), Link: filepath.ToSlash(target)})
		default:
			p.Warnings = append(p.Warnings, fmt.Sprintf("skipped %s: not a regular file, directory or link (%s)", rel, t))
		}
	}
	return nil
}

// linkStaysInside reports whether a relative link target resolves inside
// the project (the build VM refuses archives with links that leave it).
func linkStaysInside(rel, target string) bool {
	target = filepath.ToSlash(target)
	if target == "" || path.IsAbs(target) || filepath.IsAbs(target) {
		return false
	}
	resolved := path.Join(path.Dir(rel), target)
	return resolved != ".." && !strings.HasPrefix(resolved, "../")
}

// Fingerprint identifies the plan's content cheaply (paths, kinds, sizes,
// modes, times and link targets; no file is read): two scans of an unchanged
// project give the same fingerprint.
func (p *Plan) Fingerprint() string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00", p.Root)
	for _, e := range p.Entries {
		fmt.Fprintf(h, "%s\x00%d\x00%o\x00%d\x00%d\x00%s\x00", e.Rel, e.Kind, e.Mode, e.Size, e.ModTime.UnixNano(), e.Link)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// ErrChanged reports a file that changed size while it was packed.
var ErrChanged = errors.New("file changed while it was being packed")

// Write streams the plan as a tar.gz to w and returns the source
// fingerprint of what it packed (api.BuildSpec.SourceFingerprint, defined
// by package sourcefp; the controller computes it again from the archive).
// It is computed from the bytes as they are packed: the tree is read
// once. progress, if set, is called with the number of file bytes read so
// far (out of p.Bytes).
func (p *Plan) Write(ctx context.Context, w io.Writer, progress func(read int64)) (string, error) {
	gz, err := gzip.NewWriterLevel(w, gzip.DefaultCompression)
	if err != nil {
		return "", err
	}
	tw := tar.NewWriter(gz)
	fp := sourcefp.New()
	buf := make([]byte, 256<<10)
	var read int64
	for _, e := range p.Entries {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		h := &tar.Header{Name: e.Rel, Mode: int64(e.Mode), ModTime: e.ModTime.Truncate(time.Second), Format: tar.FormatPAX}
		fp.Entry(e.Kind, e.Rel, int64(e.Mode), e.Size, e.Link)
		switch e.Kind {
		case KindDir:
			h.Typeflag, h.Name = tar.TypeDir, e.Rel+"/"
			if err := tw.WriteHeader(h); err != nil {
				return "", fmt.Errorf("pack %s: %w", e.Rel, err)
			}
		case KindSymlink:
			h.Typeflag, h.Linkname = tar.TypeSymlink, e.Link
			if err := tw.WriteHeader(h); err != nil {
				return "", fmt.Errorf("pack %s: %w", e.Rel, err)
			}
		case KindFile:
			h.Typeflag, h.Size = tar.TypeReg, e.Size
			if err := p.writeFile(io.MultiWriter(tw, fp), tw, h, e, buf, func(n int) {
				read += int64(n)
				if progress != nil {
					progress(read)
				}
			}); err != nil {
				return "", err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return "", fmt.Errorf("finish the archive: %w", err)
	}
	if err := gz.Close(); err != nil {
		return "", fmt.Errorf("finish the archive: %w", err)
	}
	return fp.Sum(), nil
}

// writeFile packs one file: its header into tw, its bytes into body (tw,
// and the fingerprint's hash).
func (p *Plan) writeFile(body io.Writer, tw *tar.Writer, h *tar.Header, e Entry, buf []byte, counted func(int)) error {
	f, err := os.Open(filepath.Join(p.Root, filepath.FromSlash(e.Rel)))
	if err != nil {
		return fmt.Errorf("open %s: %w", e.Rel, err)
	}
	defer f.Close()
	if err := tw.WriteHeader(h); err != nil {
		return fmt.Errorf("pack %s: %w", e.Rel, err)
	}
	var n int64
	for n < e.Size {
		chunk := buf[:min(int64(len(buf)), e.Size-n)]
		k, err := io.ReadFull(f, chunk)
		if k > 0 {
			if _, werr := body.Write(chunk[:k]); werr != nil {
				return fmt.Errorf("pack %s: %w", e.Rel, werr)
			}
			n += int64(k)
			counted(k)
		}
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return fmt.Errorf("pack %s: %w (it shrank from %d to %d bytes); run the command again once the project is stable", e.Rel, ErrChanged, e.Size, n)
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", e.Rel, err)
		}
	}
	return nil
}
