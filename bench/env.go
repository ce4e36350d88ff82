package bench

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/pgcluster"
)

const controllerPackage = "github.com/freeagent-build/freeagent/controller/cmd/freeagent-controller"

// env is the running system under test: a durable Postgres cluster, the
// controller as a child process, an admin API key and a tuned HTTP client.
type env struct {
	cfg Config

	dir       string // the run's temporary directory, removed by close
	pgDir     string
	cluster   *pgcluster.Cluster
	port      int    // Postgres TCP port on 127.0.0.1
	dsn       string // the controller's database
	pgVersion string
	db        *pgxpool.Pool // the benchmark's own connections (seeding, resets, stats)

	bin     string // freeagent-controller
	dataDir string
	ctrl    *child
	url     string
	key     string // admin API key

	transport *http.Transport
	hc        *http.Client
	source    []byte // a small tar.gz project, submitted over and over

	closers []func() error // undone in reverse order by close
}

func (e *env) logf(format string, args ...any) {
	fmt.Fprintf(e.cfg.Log, "bench: "+format+"\n", args...)
}

// setup brings everything up; on error whatever started is torn down again.
func setup(ctx context.Context, cfg Config) (_ *env, err error) {
	e := &env{cfg: cfg}
	defer func() {
		if err != nil {
			err = errors.Join(err, e.close())
		}
	}()
	if e.dir, err = os.MkdirTemp(cfg.TempDir, "freeagent-bench-"); err != nil {
		return nil, err
	}
	e.onClose(func() error { return os.RemoveAll(e.dir) })
	// Traversable, not listable: as root Postgres runs as user postgres
	// and must reach its own directory below this one.
	if err := os.Chmod(e.dir, 0o711); err != nil {
		return nil, err
	}
	e.pgDir, e.dataDir = filepath.Join(e.dir, "pg"), filepath.Join(e.dir, "controller")

	// Build the controller while Postgres starts.
	var wg sync.WaitGroup
	var buildErr error
	e.bin = cfg.ControllerBin
	if e.bin == "" {
		e.bin = filepath.Join(e.dir, "freeagent-controller")
		wg.Add(1)
		go func() {
			defer wg.Done()
			buildErr = buildController(ctx, e.bin, cfg.ControllerTags)
		}()
	}
	pgErr := e.startPostgres(ctx)
	wg.Wait()
	if err := errors.Join(buildErr, pgErr); err != nil {
		return nil, err
	}

	if err := e.startController(ctx); err != nil {
		return nil, err
	}
	if e.key, err = e.createKey(ctx, "bench", "admin"); err != nil {
		return nil, err
	}
	if err := e.startClient(); err != nil {
		return nil, err
	}
	return e, nil
}

// startClient prepares the HTTP client (many keep-alive connections to one
// host: every simulated worker and submitter holds one) and the source
// archive the submitters send.
func (e *env) startClient() error {
	e.transport = &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        0, // no total limit
		MaxIdleConnsPerHost: 1024,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	e.hc = &http.Client{Transport: e.transport}
	e.onClose(func() error { e.transport.CloseIdleConnections(); return nil })
	var err error
	e.source, err = sourceArchive()
	return err
}

func (e *env) onClose(f func() error) { e.closers = append(e.closers, f) }

// close stops the controller and Postgres and removes the temporary
// directory. It is safe to call more than once.
func (e *env) close() error {
	var errs []error
	for i := len(e.closers) - 1; i >= 0; i-- {
		errs = append(errs, e.closers[i]())
	}
	e.closers = nil
	return errors.Join(errs...)
}

func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(os.Getenv("GOROOT"), "bin", "go")
}

func buildController(ctx context.Context, out, tags string) error {
	cmd := exec.CommandContext(ctx, goTool(), "build", "-tags", tags, "-o", out, controllerPackage)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s (run the benchmark from inside the module, or pass the controller binary): %v\n%s", controllerPackage, err, b)
	}
	return nil
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func (e *env) startPostgres(ctx context.Context) error {
	var err error
	// A port that is free now may be taken before Postgres binds it; try
	// a few.
	for try := 0; try < 3; try++ {
		if e.port, err = freePort(); err != nil {
			return err
		}
		e.cluster, err = pgcluster.Start(ctx, pgcluster.Options{Dir: e.pgDir, Durable: true, Port: e.port})
		if err == nil || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		return err
	}
	e.onClose(e.cluster.Stop)
	e.dsn = e.cluster.DSN(pgcluster.DefaultDatabase)
	pcfg, err := pgxpool.ParseConfig(e.dsn)
	if err != nil {
		return err
	}
	pcfg.MaxConns = 4
	if e.db, err = pgxpool.NewWithConfig(ctx, pcfg); err != nil {
		return err
	}
	e.onClose(func() error { e.db.Close(); return nil })
	var fsync, syncCommit string
	if err := e.db.QueryRow(ctx, `SELECT current_setting('server_version'), current_setting('fsync'), current_setting('synchronous_commit')`).
		Scan(&e.pgVersion, &fsync, &syncCommit); err != nil {
		return fmt.Errorf("query Postgres settings: %w", err)
	}
	if fsync != "on" || syncCommit != "on" {
		return fmt.Errorf("the cluster is not durable (fsync=%s, synchronous_commit=%s)", fsync, syncCommit)
	}
	return nil
}

func (e *env) startController(ctx context.Context) error {
	var err error
	// Simulated workers go as fast as the controller lets them (real ones
	// make a request every few seconds): no budgets, so the phases measure
	// the controller, not its limits (the storm phase compares both). Warm
	// placement never gives up (the claim phase's queue is older than its
	// default 30 s), so the claims of workers holding caches always pay
	// for its look-ahead.
	e.ctrl, err = startChild(e.bin, []string{"serve", "--listen", "127.0.0.1:0", "--data-dir", e.dataDir, "--database-url", e.dsn,
		"--rate-per-key", "0", "--rate-per-worker", "0", "--warm-placement-wait", "1000h"}, e.logf)
	if err != nil {
		return err
	}
	e.onClose(e.ctrl.stop)
	e.url, err = e.ctrl.waitURL(ctx, time.Minute)
	return err
}

func (e *env) createKey(ctx context.Context, name, role string) (string, error) {
	cmd := exec.CommandContext(ctx, e.bin, "keys", "create", "--name", name, "--role", role, "--database-url", e.dsn)
	cmd.Env = childEnv()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("freeagent-controller keys create: %v\n%s", err, stderr.Bytes())
	}
	key := strings.TrimSpace(string(out))
	if key == "" || strings.ContainsAny(key, " \n") {
		return "", fmt.Errorf("freeagent-controller keys create printed %q, not a key", out)
	}
	return key, nil
}

// startProduction starts binary bin as a second replica on the same
// database and files with the production defaults, request budgets
// included, and makes a worker key for it, as a farm's workers share one:
// the phases that measure the farm as it runs (storm, fleet) drive it, each
// with a replica of its own. The caller stops it.
func (e *env) startProduction(ctx context.Context, bin string) (*child, *api.Client, error) {
	ctrl, err := startChild(bin, []string{"serve", "--listen", "127.0.0.1:0", "--data-dir", e.dataDir, "--database-url", e.dsn,
		"--name", "bench-production"}, e.logf)
	if err != nil {
		return nil, nil, err
	}
	u, err := ctrl.waitURL(ctx, time.Minute)
	if err != nil {
		return nil, nil, errors.Join(err, ctrl.stop())
	}
	key, err := e.createKey(ctx, "bench-fleet", "worker")
	if err != nil {
		return nil, nil, errors.Join(err, ctrl.stop())
	}
	return ctrl, &api.Client{BaseURL: u, APIKey: key, HTTP: e.hc, UserAgent: "freeagent-bench"}, nil
}

// client is an admin API client over the shared, tuned transport.
func (e *env) client() *api.Client {
	return &api.Client{BaseURL: e.url, APIKey: e.key, HTTP: e.hc, UserAgent: "freeagent-bench"}
}

// alive reports an error when the controller has died.
func (e *env) alive() error {
	if e.ctrl == nil {
		return nil
	}
	return e.ctrl.died()
}

// resetQueue empties the controller's tables (API keys aside) and its file
// store, so that every phase and every lifecycle run starts from the same
// state: no leftovers in flight (builds, parked workers) and no history
// whose size would change what the next run measures.
func (e *env) resetQueue(ctx context.Context) error {
	if err := e.truncate(ctx); err != nil {
		return err
	}
	dir := filepath.Join(e.dataDir, "files", "builds")
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		entries = nil // another layout: the files stay until the run's directory goes
	} else if err != nil {
		return err
	}
	for _, ent := range entries {
		if err := os.RemoveAll(filepath.Join(dir, ent.Name())); err != nil {
			return err
		}
	}
	// Write back what the last phase left dirty (its files, the removals
	// above) now, rather than as fsync stalls in the next measurement.
	syscall.Sync()
	return nil
}

// truncate empties the queue's tables. The controller keeps running while
// it does (its sweeper, a worker's last heartbeat), and TRUNCATE takes its
// exclusive locks table by table, so Postgres may pick it as a deadlock's
// victim; the victim's work is undone, and trying again is safe.
func (e *env) truncate(ctx context.Context) error {
	const tries = 5
	for i := 1; ; i++ {
		_, err := e.db.Exec(ctx, `TRUNCATE builds, build_attempts, artifacts, build_logs, workers CASCADE`)
		var pgErr *pgconn.PgError
		if err == nil || i == tries || !errors.As(err, &pgErr) || pgErr.Code != "40P01" { // deadlock_detected
			return err
		}
		if err := api.Sleep(ctx, time.Duration(i)*50*time.Millisecond); err != nil {
			return err
		}
	}
}

// checkpoint flushes dirty buffers, so that a checkpoint caused by the
// previous phase does not land in the next measurement.
func (e *env) checkpoint(ctx context.Context) error {
	_, err := e.db.Exec(ctx, `CHECKPOINT`)
	return err
}

// commits returns the committed transactions of database db so far (the
// statistics lag by up to a second; over a window of many seconds that is a
// small error).
func (e *env) commits(ctx context.Context, db string) (int64, error) {
	var n int64
	err := e.db.QueryRow(ctx, `SELECT xact_commit FROM pg_stat_database WHERE datname = $1`, db).Scan(&n)
	return n, err
}

// postmasterPID reads the server's pid from its pid file.
func (e *env) postmasterPID() (int, error) {
	b, err := os.ReadFile(filepath.Join(e.pgDir, "pgdata", "postmaster.pid"))
	if err != nil {
		return 0, err
	}
	var pid int
	if _, err := fmt.Sscanf(string(b), "%d", &pid); err != nil {
		return 0, fmt.Errorf("postmaster.pid: %w", err)
	}
	return pid, nil
}

// sourceArchive is a deterministic ~1 KiB tar.gz project.
func sourceArchive() ([]byte, error) {
	rng := rand.NewChaCha8([32]byte{'f', 'a'})
	noise := make([]byte, 640)
	rng.Read(noise) //nolint:errcheck // never fails
	files := []struct{ name, body string }{
		{"package.json", `{"name":"bench-app","version":"1.0.0","scripts":{"freeagent:build":"true"}}` + "\n"},
		{"app.js", "// " + base64.StdEncoding.EncodeToString(noise) + "\n"},
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, f := range files {
		hdr := &tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.body)), ModTime: time.Unix(1700000000, 0), Typeflag: tar.TypeReg}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write([]byte(f.body)); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// childEnv is our environment without the controller's own settings, so
// that a developer's FREEAGENT_* variables cannot change what is measured.
func childEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "FREEAGENT_") || strings.HasPrefix(kv, "DATABASE_URL=") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// child is the controller process.
type child struct {
	cmd      *exec.Cmd
	out      *childLog
	exited   chan struct{}
	waitErr  error // valid once exited is closed
	mu       sync.Mutex
	stopping bool
	stopOnce sync.Once
	stopErr  error
}

// startChild starts the controller with args, and env added to childEnv.
func startChild(bin string, args []string, logf func(string, ...any), env ...string) (*child, error) {
	c := &child{out: &childLog{ready: make(chan string, 1), logf: logf}, exited: make(chan struct{})}
	c.cmd = exec.Command(bin, args...) // not CommandContext: stop shuts it down gracefully
	c.cmd.Env = append(childEnv(), env...)
	c.cmd.Stdout, c.cmd.Stderr = c.out, c.out
	c.cmd.SysProcAttr = sysProcAttr()
	c.cmd.WaitDelay = 5 * time.Second
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	go func() {
		c.waitErr = c.cmd.Wait()
		close(c.exited)
	}()
	return c, nil
}

func (c *child) pid() int { return c.cmd.Process.Pid }

func (c *child) waitURL(ctx context.Context, timeout time.Duration) (string, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case u := <-c.out.ready:
		return u, nil
	case <-c.exited:
		return "", fmt.Errorf("the controller exited before listening: %v\n%s", c.waitErr, c.out.Tail())
	case <-t.C:
		return "", fmt.Errorf("the controller did not log \"listening on\" within %v\n%s", timeout, c.out.Tail())
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// died returns an error if the controller exited without being stopped.
func (c *child) died() error {
	select {
	case <-c.exited:
		c.mu.Lock()
		stopping := c.stopping
		c.mu.Unlock()
		if !stopping {
			return fmt.Errorf("the controller exited during the run: %v\n%s", c.waitErr, c.out.Tail())
		}
	default:
	}
	return nil
}

// stop asks the controller to shut down (SIGTERM: it answers long polls and
// waits for uploads up to 30 s), and kills it if it does not.
func (c *child) stop() error {
	c.stopOnce.Do(func() {
		c.stopErr = c.died()
		c.mu.Lock()
		c.stopping = true
		c.mu.Unlock()
		select {
		case <-c.exited:
			return
		default:
		}
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-c.exited:
		case <-time.After(40 * time.Second):
			_ = c.cmd.Process.Kill()
			<-c.exited
			c.stopErr = errors.Join(c.stopErr, errors.New("the controller did not stop within 40 s of SIGTERM; killed"))
		}
	})
	return c.stopErr
}

var listeningRE = regexp.MustCompile(`listening on (http://[^\s"]+)`)

// childLog receives the controller's output: it spots the "listening on"
// line, keeps the last lines for error messages and passes warnings on.
type childLog struct {
	mu      sync.Mutex
	partial []byte
	tail    []string
	ready   chan string
	found   bool
	warned  int
	logf    func(string, ...any)
}

const childTailLines = 30

func (w *childLog) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.partial = append(w.partial, p...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			break
		}
		w.line(string(w.partial[:i]))
		w.partial = w.partial[i+1:]
	}
	return len(p), nil
}

func (w *childLog) line(l string) {
	w.tail = append(w.tail, l)
	if len(w.tail) > childTailLines {
		w.tail = w.tail[len(w.tail)-childTailLines:]
	}
	if !w.found {
		if m := listeningRE.FindStringSubmatch(l); m != nil {
			w.found = true
			w.ready <- m[1]
		}
	}
	// "context canceled": a request the benchmark abandoned when a phase
	// ended; expected, not worth a line.
	if (strings.Contains(l, "level=warning") || strings.Contains(l, "level=error") || strings.Contains(l, "level=fatal") ||
		strings.HasPrefix(l, "panic")) && !strings.Contains(l, "context canceled") {
		if w.warned < 20 {
			w.logf("controller: %s", l)
		} else if w.warned == 20 {
			w.logf("controller: (more warnings not shown)")
		}
		w.warned++
	}
}

// Tail returns the last lines the controller printed.
func (w *childLog) Tail() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return "--- last lines of the controller's output ---\n" + strings.Join(w.tail, "\n")
}

// holdColdCaches gives each worker api.MaxWorkerCacheKeys cache keys that
// no build needs, as a full worker_cache_keys report would: every claim of
// those workers then runs cache-aware placement's whole look-ahead and
// finds nothing warm, its most expensive case.
func (e *env) holdColdCaches(ctx context.Context, ws ...*simWorker) error {
	for _, w := range ws {
		_, err := e.db.Exec(ctx, `INSERT INTO worker_cache_keys (worker_id, cache_key)
			SELECT $1, encode(sha256(($1 || '-cold-' || g)::bytea), 'hex') FROM generate_series(1, $2::int) g`, w.id, api.MaxWorkerCacheKeys)
		if err != nil {
			return fmt.Errorf("record worker %s's caches: %w", w.id, err)
		}
	}
	return nil
}
