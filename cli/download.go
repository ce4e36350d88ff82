package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/internal/bytesize"
)

const downloadHelp = `Downloads a build's artifacts into ./<build-id>/ (created), or into -o DIR (created if
missing; -o always names a directory, the artifacts keep their names). Artifact names that are not plain file names, or that
start with a dot, are refused. It shows a progress bar, resumes an interrupted download
where it stopped (HTTP Range, from a hidden .part file beside the target, also across
runs), verifies the SHA-256 the controller recorded, never writes outside the chosen
directory, and keeps an existing file unless --force (a file that already holds the same
bytes counts as downloaded). With --wait it first waits for the build to end.`

// downloaded describes one artifact on disk.
type downloaded struct {
	Name           string `json:"name"`
	Path           string `json:"path"`
	Size           int64  `json:"size"`
	SHA256         string `json:"sha256"`
	AlreadyPresent bool   `json:"already_present,omitempty"`
}

// downloadOpts are the flags download and build:download share.
type downloadOpts struct {
	output, only string
	force, wait  bool
}

func (d *downloadOpts) flags(inv *invocation, fs *flag.FlagSet) {
	fs.StringVar(&d.output, "output", "", "`DIR` for the artifacts (created if missing; default ./<build-id>/)")
	inv.alias(fs, "o", "output")
	fs.BoolVar(&d.force, "force", false, "replace existing files")
	fs.StringVar(&d.only, "artifact", "", "download only the artifact with this `NAME`")
	fs.BoolVar(&d.wait, "wait", false, "wait for the build to end first")
}

// waitToDownload gets the build, first waiting for it to end with wait.
func (a *App) waitToDownload(ctx context.Context, inv *invocation, s *session, id string, wait bool) (api.Build, error) {
	b, err := s.getBuild(ctx, id)
	if err != nil || !wait || b.Status.Terminal() {
		return b, err
	}
	inv.ui.info("Waiting for build %s (%s)…", id, b.Status)
	return a.watchBuild(ctx, s, id, b, func(api.Build) {})
}

func (a *App) cmdDownload(ctx context.Context, inv *invocation, args []string) error {
	fs := inv.flags()
	var d downloadOpts
	d.flags(inv, fs)
	s, id, err := inv.buildArg(fs, args)
	if err != nil {
		return err
	}
	b, err := a.waitToDownload(ctx, inv, s, id, d.wait)
	if err != nil {
		return err
	}
	files, err := a.download(ctx, inv, s, b, d.output, d.force, d.only)
	if err != nil {
		return err
	}
	if inv.json {
		return inv.ui.emit(map[string]any{"build_id": id, "artifacts": files})
	}
	return nil
}

// download saves b's artifacts (or the one named only) under output.
func (a *App) download(ctx context.Context, inv *invocation, s *session, b api.Build, output string, force bool, only string) ([]downloaded, error) {
	arts := b.Artifacts
	if only != "" {
		arts = nil
		var names []string
		for _, art := range b.Artifacts {
			names = append(names, art.Name)
			if art.Name == only {
				arts = append(arts, art)
			}
		}
		if len(arts) == 0 {
			have := "it has none"
			if len(names) > 0 {
				have = "it has: " + strings.Join(names, ", ")
			}
			return nil, &cliError{code: ExitNotFound, msg: fmt.Sprintf("build %s has no artifact %q", b.ID, only), hint: have}
		}
	}
	if len(arts) == 0 {
		switch {
		case !b.Status.Terminal():
			return nil, failErr(fmt.Sprintf("wait for it: expo-build build:download %s --wait (or expo-build build:view %s --watch)", b.ID, b.ID),
				"build %s is %s: it has no artifacts yet", b.ID, b.Status)
		case b.Status == api.StatusCompleted:
			return nil, failErr("expo-build logs "+b.ID+" shows what the build did", "build %s completed without artifacts", b.ID)
		default:
			return nil, failErr(fmt.Sprintf("see why: expo-build logs %s", b.ID), "build %s %s and has no artifacts", b.ID, b.Status)
		}
	}
	dir, err := outputDir(output, b.ID)
	if err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, usageErr("open the output directory %s: %v", dir, err)
	}
	defer root.Close()
	var out []downloaded
	for _, art := range arts {
		if !plainName(art.Name) || strings.HasPrefix(art.Name, ".") {
			return out, failErr("report this to whoever runs the controller", "refusing artifact %q of build %s: not a plain file name, or a hidden one", art.Name, b.ID)
		}
		d, err := a.fetchArtifact(ctx, inv, s, root, dir, b.ID, art, force)
		if err != nil {
			return out, err
		}
		out = append(out, d)
	}
	return out, nil
}

// outputDir resolves -o, which always names a directory: an existing
// one, or one created (with its parents), whatever its name looks like
// ("-o app.apk" makes a directory app.apk; the artifact keeps its name in
// it). Without -o it is ./<id>/, so the artifacts of two builds never meet
// and none lands among the project's own files.
func outputDir(output, id string) (string, error) {
	if output == "" {
		if !plainName(id) || strings.HasPrefix(id, ".") {
			return "", usageErr("the build id %q is not usable as a directory name: pass -o DIR", id)
		}
		output = id
	}
	if st, err := os.Stat(output); err == nil && !st.IsDir() {
		return "", usageErr("-o %s: a file of that name exists; -o names the directory the artifacts go into (created if missing)", output)
	}
	if err := os.MkdirAll(output, 0o755); err != nil {
		return "", usageErr("create the output directory %s: %v (choose another with -o DIR)", output, err)
	}
	return output, nil
}

// plainName is a file name with no path and no control character in it.
func plainName(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.ContainsAny(name, "/\\\t\n") && plainText(name) == name && filepath.Base(name) == name && !filepath.IsAbs(name)
}

// fetchArtifact downloads one artifact to root/<its name> through a hidden
// .part file named after its checksum (so only a partial copy of the same
// bytes is ever resumed), verifies it and renames it into place.
func (a *App) fetchArtifact(ctx context.Context, inv *invocation, s *session, root *os.Root, dir, id string, art api.Artifact, force bool) (downloaded, error) {
	u := inv.ui
	target := art.Name
	shown := filepath.Join(dir, target)
	d := downloaded{Name: art.Name, Path: shown, Size: art.Size, SHA256: art.SHA256}
	if abs, err := filepath.Abs(shown); err == nil {
		d.Path = abs
	}
	if st, err := root.Lstat(target); err == nil {
		if !st.Mode().IsRegular() {
			return d, failErr("choose another path with -o", "%s exists and is not a regular file", shown)
		}
		if st.Size() == art.Size {
			if sum, err := fileSHA256(root, target); err == nil && sum == art.SHA256 {
				d.AlreadyPresent = true
				u.info("%s %s is already here with the same SHA-256", u.e(cGreen, "✔"), shown)
				if !u.json {
					u.printf("%s\n", d.Path)
				}
				return d, nil
			}
		}
		if !force {
			return d, failErr("pass --force to replace it, or -o to choose another path", "%s already exists", shown)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return d, fmt.Errorf("check %s: %w", shown, err)
	}
	sum := art.SHA256
	if len(sum) > 16 {
		sum = sum[:16]
	}
	part := "." + target + "." + sum + ".part"
	for restarted := false; ; restarted = true {
		resumedFrom, err := a.fetchToPart(ctx, inv, s, root, id, art, part, target)
		if err != nil {
			var mismatch *checksumError
			if errors.As(err, &mismatch) && resumedFrom > 0 && !restarted {
				u.warn("%v; the partial file from an earlier download was bad, starting over", err)
				continue
			}
			return d, err
		}
		break
	}
	if _, err := root.Lstat(target); err == nil && !force {
		return d, failErr("pass --force to replace it", "%s appeared while downloading; the download is kept as %s", shown, filepath.Join(dir, part))
	}
	if err := root.Rename(part, target); err != nil {
		return d, fmt.Errorf("move the download into place as %s: %w", shown, err)
	}
	if !u.json {
		u.info("%s Saved %s (%s, SHA-256 verified)", u.e(cGreen, "✔"), shown, bytesize.SI(art.Size))
		u.printf("%s\n", d.Path)
	}
	return d, nil
}

type checksumError struct{ got, want string }

func (e *checksumError) Error() string {
	return fmt.Sprintf("checksum mismatch: the file's SHA-256 is %s, the controller recorded %s", e.got, e.want)
}

// fetchToPart completes the .part file and verifies it. It returns the
// offset it resumed from.
func (a *App) fetchToPart(ctx context.Context, inv *invocation, s *session, root *os.Root, id string, art api.Artifact, part, target string) (int64, error) {
	f, err := root.OpenFile(part, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return 0, fmt.Errorf("create %s: %w", part, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	offset := st.Size()
	h := sha256.New()
	if offset > art.Size {
		offset = 0
	}
	if offset > 0 {
		if _, err := io.CopyN(h, f, offset); err != nil {
			offset = 0
			h.Reset()
		}
	}
	if err := f.Truncate(offset); err != nil {
		return 0, err
	}
	resumedFrom := offset
	if offset > 0 {
		inv.ui.info("Resuming %s from %s of %s", target, bytesize.SI(offset), bytesize.SI(art.Size))
	}
	bar := inv.ui.newProgress("Downloading "+target, art.Size)
	bar.done.Store(offset)
	c, err := s.clientFor(id)
	if err != nil {
		return 0, err
	}
	if offset < art.Size {
		err := a.resume(ctx, &offset, retryable, func(ctx context.Context) error {
			return a.fetchRange(ctx, c, id, art, f, h, &offset, bar)
		}, func(err error, wait time.Duration) {
			inv.ui.warn("download interrupted at %s (%s); resuming in %s", bytesize.SI(offset), shortNetErr(err), wait.Round(100*time.Millisecond))
		})
		bar.finish()
		switch {
		case err == nil:
		case ctx.Err() != nil:
			return resumedFrom, ctx.Err()
		case !retryable(err):
			return resumedFrom, wrapOp("download "+art.Name, err)
		default:
			return resumedFrom, &cliError{code: ExitUnreachable, msg: fmt.Sprintf("download %s stopped at %s of %s", art.Name, bytesize.SI(offset), bytesize.SI(art.Size)),
				err: err, hint: "run the same command again: it resumes from there"}
		}
	} else {
		bar.finish()
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != art.SHA256 {
		f.Close()
		root.Remove(part)
		return resumedFrom, &cliError{code: ExitFailed, msg: fmt.Sprintf("download %s", art.Name), err: &checksumError{got: got, want: art.SHA256},
			hint: "the partial file was removed; run the command again"}
	}
	if err := f.Sync(); err != nil {
		return resumedFrom, fmt.Errorf("write %s: %w", part, err)
	}
	return resumedFrom, nil
}

// fetchRange appends the artifact's bytes from *offset to f.
func (a *App) fetchRange(ctx context.Context, c *api.Client, id string, art api.Artifact, f *os.File, h hash.Hash, offset *int64, bar *progress) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	resp, err := c.DownloadArtifact(ctx, id, art.Name, *offset)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if sum := resp.Header.Get(api.HeaderChecksum); sum != "" && art.SHA256 != "" && !strings.EqualFold(sum, art.SHA256) {
		return failErr("run the command again", "artifact %s changed on the controller while downloading", art.Name)
	}
	start := int64(0)
	if resp.StatusCode == http.StatusPartialContent {
		start = contentRangeStart(resp.Header.Get("Content-Range"))
	}
	if start != *offset { // the controller sent something else than asked: start over
		if err := f.Truncate(0); err != nil {
			return err
		}
		h.Reset()
		*offset = 0
		bar.done.Store(0)
		if start != 0 {
			return fmt.Errorf("%w: unexpected Content-Range %q", io.ErrUnexpectedEOF, resp.Header.Get("Content-Range"))
		}
	}
	if _, err := f.Seek(*offset, io.SeekStart); err != nil {
		return err
	}
	body := newStallReader(resp.Body, a.stallTimeout(), cancel)
	defer body.stop()
	buf := make([]byte, 256<<10)
	for {
		n, rerr := body.Read(buf)
		if n > 0 {
			if *offset+int64(n) > art.Size {
				return failErr("run the command again", "artifact %s is larger than the %d bytes the controller announced", art.Name, art.Size)
			}
			if _, err := f.Write(buf[:n]); err != nil {
				return &cliError{code: ExitFailed, msg: "write " + f.Name(), err: err}
			}
			h.Write(buf[:n])
			*offset += int64(n)
			bar.done.Add(int64(n))
			bar.moved.Add(int64(n))
		}
		if rerr == io.EOF {
			if *offset < art.Size {
				return io.ErrUnexpectedEOF
			}
			return nil
		}
		if rerr != nil {
			if body.stalled() {
				return errStalled
			}
			return rerr
		}
	}
}

func contentRangeStart(v string) int64 {
	// "bytes START-END/TOTAL"
	v = strings.TrimPrefix(strings.TrimSpace(v), "bytes ")
	s, _, ok := strings.Cut(v, "-")
	if !ok {
		return -1
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return -1
	}
	return n
}

func fileSHA256(root *os.Root, name string) (string, error) {
	f, err := root.Open(name)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
