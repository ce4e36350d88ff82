package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/sirupsen/logrus"

	"github.com/freeagent-build/freeagent/controller/blobs"
	"github.com/freeagent-build/freeagent/controller/pgcluster"
	"github.com/freeagent-build/freeagent/controller/serve"
	"github.com/freeagent-build/freeagent/controller/store"
)

// A backup directory holds the database (pg_dump's custom format), every
// object of the blob store with its SHA-256, and a description.
const (
	backupDump     = "database.dump"
	backupBlobs    = "blobs"
	backupSums     = "blobs.sha256" // sha256sum's format: "<hex>  <key>"
	backupManifest = "backup.json"
)

// backupInfo is backup.json.
type backupInfo struct {
	Format        int       `json:"format"`
	CreatedAt     time.Time `json:"created_at"`
	SchemaVersion int       `json:"schema_version"`
	Objects       int       `json:"objects"`
	Bytes         int64     `json:"bytes"`
	// Keys names what the backup does not hold: the keys must come back
	// from where the operator keeps them.
	Keys string `json:"keys"`
}

const keysNote = "not in this backup: FREEAGENT_CERTS_KEY (or DATA_DIR/certs.key) and FREEAGENT_LINK_KEY (or DATA_DIR/links.key); restore with the same ones"

// cmdBackup writes the farm's database and build files to --to DIR, a new
// or empty directory. It runs beside serving replicas: the dump is one
// consistent snapshot, and the files are copied after it, so every file a
// row of the dump names is there unless the collector deleted it meanwhile
// (an expired file), while files newer than the dump are orphans the
// collector removes after a restore.
func cmdBackup(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var to string
	cfg, _, err := parseConfigWith("backup", args, stderr, true, func(fs *flag.FlagSet) {
		fs.StringVar(&to, "to", "", "the `DIR` to write the backup to (new or empty)")
	})
	if err != nil {
		return err
	}
	if to == "" {
		return usageError{errors.New("backup needs --to DIR")}
	}
	if err := emptyDir(to); err != nil {
		return err
	}
	dsn, cluster, err := serve.OpenDatabase(ctx, cfg.Serve, quietLogger(stderr))
	if err != nil {
		return err
	}
	if cluster != nil {
		defer cluster.Stop() //nolint:errcheck
	}
	st, err := store.Open(ctx, dsn, cfg.Serve.Store)
	if err != nil {
		return err
	}
	defer st.Close()
	version, err := st.SchemaVersion(ctx)
	if err != nil {
		return err
	}
	pgDump, err := postgresTool("pg_dump")
	if err != nil {
		return err
	}
	if err := runTool(ctx, pgDump, "--format=custom", "--no-owner", "--no-privileges", "--file", filepath.Join(to, backupDump), "--dbname", dsn); err != nil {
		return fmt.Errorf("back up the database: %w", err)
	}
	backend, err := serve.OpenBlobStore(ctx, cfg.Serve)
	if err != nil {
		return err
	}
	info := backupInfo{Format: 1, CreatedAt: time.Now().UTC(), SchemaVersion: version, Keys: keysNote}
	sums, err := os.Create(filepath.Join(to, backupSums))
	if err != nil {
		return fmt.Errorf("write the backup: %w", err)
	}
	defer sums.Close()
	var keys []string
	for obj, err := range backend.List(ctx, "") {
		if err != nil {
			return fmt.Errorf("list the blob store: %w", err)
		}
		keys = append(keys, obj.Key)
	}
	slices.Sort(keys)
	for _, key := range keys {
		dst, err := backupPath(to, key)
		if err != nil {
			return err
		}
		sum, n, err := copyOut(ctx, backend, key, dst)
		if errors.Is(err, os.ErrNotExist) {
			continue // deleted since the listing (an expired or stray file)
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(sums, "%s  %s\n", sum, key)
		info.Objects++
		info.Bytes += n
	}
	if err := sums.Close(); err != nil {
		return fmt.Errorf("write the backup: %w", err)
	}
	if err := writeJSONFile(filepath.Join(to, backupManifest), info); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "backed up the database (schema %d) and %d files (%d bytes) to %s\n%s\n", version, info.Objects, info.Bytes, to, keysNote)
	return nil
}

// cmdRestore loads a backup into an empty database and blob store. The
// controllers must be stopped, and started afterwards with the keys the
// farm had.
func cmdRestore(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var from string
	cfg, _, err := parseConfigWith("restore", args, stderr, true, func(fs *flag.FlagSet) {
		fs.StringVar(&from, "from", "", "the backup `DIR` (written by backup --to)")
	})
	if err != nil {
		return err
	}
	if from == "" {
		return usageError{errors.New("restore needs --from DIR")}
	}
	var info backupInfo
	b, err := os.ReadFile(filepath.Join(from, backupManifest))
	if err != nil {
		return fmt.Errorf("%s is not a backup (no %s): %w", from, backupManifest, err)
	}
	if err := json.Unmarshal(b, &info); err != nil || info.Format != 1 {
		return fmt.Errorf("%s: not a backup this controller reads (format %d): %v", backupManifest, info.Format, err)
	}
	if info.SchemaVersion > store.LatestMigration() {
		return fmt.Errorf("the backup's schema is version %d, this controller knows up to %d: restore with the release that made it, or a newer one", info.SchemaVersion, store.LatestMigration())
	}
	dsn, cluster, err := serve.OpenDatabase(ctx, cfg.Serve, quietLogger(stderr))
	if err != nil {
		return err
	}
	if cluster != nil {
		defer cluster.Stop() //nolint:errcheck
	}
	if err := requireEmptyDatabase(ctx, dsn); err != nil {
		return err
	}
	backend, err := serve.OpenBlobStore(ctx, cfg.Serve)
	if err != nil {
		return err
	}
	for obj, err := range backend.List(ctx, "") {
		if err != nil {
			return fmt.Errorf("list the blob store: %w", err)
		}
		return fmt.Errorf("the blob store is not empty (it holds %s): restore into an empty one", obj.Key)
	}
	pgRestore, err := postgresTool("pg_restore")
	if err != nil {
		return err
	}
	if err := runTool(ctx, pgRestore, "--no-owner", "--no-privileges", "--exit-on-error", "--single-transaction", "--dbname", dsn, filepath.Join(from, backupDump)); err != nil {
		return fmt.Errorf("restore the database: %w", err)
	}
	f, err := os.Open(filepath.Join(from, backupSums))
	if err != nil {
		return fmt.Errorf("read the backup: %w", err)
	}
	defer f.Close()
	objects := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 64<<10)
	for sc.Scan() {
		sum, key, ok := strings.Cut(sc.Text(), "  ")
		if !ok || len(sum) != 64 {
			return fmt.Errorf("%s: line %q: want \"<sha256>  <key>\"", backupSums, sc.Text())
		}
		src, err := backupPath(from, key)
		if err != nil {
			return err
		}
		if err := copyIn(ctx, backend, src, key, sum); err != nil {
			return err
		}
		objects++
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read %s: %w", backupSums, err)
	}
	fmt.Fprintf(stdout, "restored the database (schema %d) and %d files from %s\nstart the controllers with the farm's FREEAGENT_CERTS_KEY and FREEAGENT_LINK_KEY\n", info.SchemaVersion, objects, from)
	return nil
}

// emptyDir makes dir, or accepts it when it exists and is empty: a backup
// never mixes with another.
func emptyDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("backup directory: %w", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("backup directory: %w", err)
	}
	if len(entries) > 0 {
		return fmt.Errorf("backup directory %s is not empty: give a new one", dir)
	}
	return nil
}

// backupPath is where the object at key lives in the backup: a key is a
// slash-separated relative path, and one that would leave the directory
// (a tampered blobs.sha256) is refused.
func backupPath(dir, key string) (string, error) {
	clean := path.Clean(key)
	if clean != key || !filepath.IsLocal(filepath.FromSlash(key)) {
		return "", fmt.Errorf("object key %q is not a plain relative path", key)
	}
	return filepath.Join(dir, backupBlobs, filepath.FromSlash(key)), nil
}

// copyOut copies one object to a file, returning its SHA-256 and size.
func copyOut(ctx context.Context, backend blobs.Backend, key, dst string) (string, int64, error) {
	obj, _, err := backend.Open(ctx, key)
	if err != nil {
		return "", 0, err
	}
	defer obj.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return "", 0, fmt.Errorf("write the backup: %w", err)
	}
	f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", 0, fmt.Errorf("write the backup: %w", err)
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), obj)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", 0, fmt.Errorf("copy %s into the backup: %w", key, err)
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// copyIn stores a backed-up file at key, checking its SHA-256 on the way:
// a file that changed since the backup is refused before it is visible.
func copyIn(ctx context.Context, backend blobs.Backend, src, key, want string) error {
	f, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("read the backup: %w", err)
	}
	defer f.Close()
	w, err := backend.Create(ctx, key)
	if err != nil {
		return fmt.Errorf("restore %s: %w", key, err)
	}
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(w, h), f); err != nil {
		w.Abort()
		return fmt.Errorf("restore %s: %w", key, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		w.Abort()
		return fmt.Errorf("restore %s: the backup's copy has SHA-256 %s, %s was recorded: the backup is damaged", key, got, want)
	}
	if err := w.Commit(ctx); err != nil {
		return fmt.Errorf("restore %s: %w", key, err)
	}
	return nil
}

// requireEmptyDatabase refuses a database that already holds a farm.
func requireEmptyDatabase(ctx context.Context, dsn string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("connect to the database: %w", err)
	}
	defer conn.Close(ctx)
	var tables int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE schemaname = 'public'`).Scan(&tables); err != nil {
		return fmt.Errorf("inspect the database: %w", err)
	}
	if tables > 0 {
		return errors.New("the database is not empty: restore into a new, empty database (createdb), never over a farm")
	}
	return nil
}

// quietLogger logs warnings and errors only: a one-shot command's output
// is its result.
func quietLogger(w io.Writer) *logrus.Logger {
	log := logrus.New()
	log.SetOutput(w)
	log.SetLevel(logrus.WarnLevel)
	return log
}

// postgresTool finds pg_dump or pg_restore: on PATH, else beside the
// PostgreSQL server binaries.
func postgresTool(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	if dir, err := pgcluster.FindBinDir(); err == nil {
		if p := filepath.Join(dir, name); fileExists(p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s is not installed: install the PostgreSQL client (apt-get install postgresql-client, brew install libpq), of the server's major version or newer", name)
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func runTool(ctx context.Context, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w\n%s", filepath.Base(name), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func writeJSONFile(p string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(p, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("write the backup: %w", err)
	}
	return nil
}
