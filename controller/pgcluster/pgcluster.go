//go:build unix

// Package pgcluster runs a private PostgreSQL cluster as a child process.
//
// Why: the controller must work out of the box without an external database
// (`serve` with no DATABASE_URL keeps a persistent cluster in its data dir),
// and tests need a real, throwaway Postgres without Docker. Both use the same
// code: initdb once, then run `postgres` directly (not via pg_ctl, which
// daemonizes) as our own child, so that its lifetime and output are ours.
package pgcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// Options configures Start.
type Options struct {
	// Dir holds the cluster: data in Dir/pgdata, the unix socket in Dir
	// (or in a short temp dir when Dir is too long for a socket path), and
	// the server log in Dir/postgres.log unless Logger is set. Created if
	// missing; reused (data kept) if it already holds a cluster.
	Dir string
	// BinDir holds initdb and postgres; empty means FindBinDir.
	BinDir string
	// Durable false turns off fsync, synchronous_commit and full_page_writes:
	// several times faster, and a crash may lose or corrupt data, which is
	// fine for throwaway test clusters. Use true for anything that persists.
	// (False also keeps dynamic shared memory inside Dir; see startServer.)
	Durable bool
	// Port, when > 0, also makes the server listen on 127.0.0.1:Port (for
	// tools that cannot use a unix socket). 0 means unix socket only, so
	// parallel clusters never fight over a port.
	Port int
	// Logger receives the output of initdb and the server; nil means append
	// to Dir/postgres.log.
	Logger io.Writer
}

// Cluster is a running server started by Start. Stop it with Stop.
type Cluster struct {
	dataDir      string
	socketDir    string
	tmpSocketDir string // short socket dir we created (removed by Stop); "" if the socket lives in Dir
	port         int
	tcp          bool

	cmd     *exec.Cmd
	exited  chan struct{} // closed once the server process has been reaped
	waitErr error         // cmd.Wait's result; read only after exited is closed

	logFile *os.File      // Dir/postgres.log when Options.Logger is nil
	logTail func() string // last lines of server output, for error messages

	stopOnce sync.Once
	stopErr  error
}

const (
	// DefaultDatabase is created by Start if missing: the database the
	// controller itself uses.
	DefaultDatabase = "freeagent"

	socketOnlyPort = 5432             // only names the socket file (.s.PGSQL.5432) when there is no TCP
	startTimeout   = 30 * time.Second // how long Start waits for the server to accept connections
	stopTimeout    = 10 * time.Second // how long Stop waits after SIGINT before SIGKILL
	tailLines      = 20               // lines of server output quoted in errors
	// maxSocketPath is the longest socket path we use. sun_path holds 108
	// bytes on Linux but only 104 on macOS, both including the final NUL.
	maxSocketPath = 103
)

// Start initializes the cluster in opts.Dir if needed, starts the server and
// waits (up to 30 s, or until ctx ends) until it accepts connections. It also
// creates the database "freeagent" if missing. On error nothing is left
// running.
func Start(ctx context.Context, opts Options) (_ *Cluster, err error) {
	if opts.Dir == "" {
		return nil, errors.New("pgcluster: Options.Dir is required")
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("pgcluster: %w", err)
	}
	binDir := opts.BinDir
	if binDir == "" {
		if binDir, err = FindBinDir(); err != nil {
			return nil, fmt.Errorf("pgcluster: %w", err)
		}
	} else if !hasServerBinaries(binDir) {
		return nil, fmt.Errorf("pgcluster: %w in BinDir %s; %s", ErrNoBinaries, binDir, installHint)
	}

	// Postgres refuses to run as root, so as root we run it as the postgres
	// user and hand it Dir; as anyone else it simply runs as us.
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		if cred, err = postgresUser(); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("pgcluster: %w", err)
	}
	if cred != nil {
		if err := checkReachable(dir, cred); err != nil {
			return nil, err
		}
		if err := chownTree(dir, cred); err != nil {
			return nil, fmt.Errorf("pgcluster: handing %s to the postgres user: %w", dir, err)
		}
	}

	c := &Cluster{
		dataDir: filepath.Join(dir, "pgdata"),
		port:    socketOnlyPort,
		exited:  make(chan struct{}),
	}
	if opts.Port > 0 {
		c.port, c.tcp = opts.Port, true
	}
	defer func() {
		if err != nil {
			c.Stop() // kills the server if it started; removes the temp socket dir; closes the log
		}
	}()

	if err := c.setupSocketDir(dir, cred); err != nil {
		return nil, err
	}
	out, err := c.setupLog(dir, opts.Logger)
	if err != nil {
		return nil, err
	}
	if err := c.initdb(ctx, dir, binDir, opts.Durable, cred, out); err != nil {
		return nil, err
	}
	var conn *pgx.Conn
	for attempt := 1; ; attempt++ {
		if err := c.removeStaleLockFiles(); err != nil {
			return nil, err
		}
		if err := c.startServer(binDir, opts.Durable, cred, out); err != nil {
			return nil, err
		}
		if conn, err = c.waitReady(ctx); err == nil {
			break
		}
		// A server killed together with its parent leaves backends that
		// exit a moment later, still attached to the old shared memory
		// ("pre-existing shared memory block is still in use"): wait
		// them out rather than fail the restart.
		select {
		case <-c.exited:
		default:
			return nil, err
		}
		if attempt >= 50 || c.logTail == nil || !strings.Contains(c.logTail(), "pre-existing shared memory block") {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(200 * time.Millisecond):
		}
		c.cmd, c.exited, c.waitErr = nil, make(chan struct{}), nil
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := createDatabaseIfMissing(ctx, conn, DefaultDatabase); err != nil {
		return nil, c.failure("creating database %q: %v", DefaultDatabase, err)
	}
	return c, nil
}

// DSN returns a libpq keyword/value connection string (accepted by pgx, psql
// and libpq) for database dbname as the superuser "postgres": the unix socket
// when the cluster has no TCP port, else 127.0.0.1:Port.
func (c *Cluster) DSN(dbname string) string {
	host := c.socketDir
	if c.tcp {
		host = "127.0.0.1"
	}
	// sslmode=disable: the server has no TLS; this skips a pointless
	// negotiation round trip and ignores a stray PGSSLMODE=require.
	return fmt.Sprintf("host=%s port=%d user=postgres dbname=%s sslmode=disable",
		quoteDSN(host), c.port, quoteDSN(dbname))
}

// Stop shuts the server down: SIGINT (Postgres' "fast" shutdown: abort open
// transactions, checkpoint, exit), then SIGKILL if it is not gone within
// 10 s. It is idempotent and returns the same result every time. It reports
// an error if the server had already died on its own.
func (c *Cluster) Stop() error {
	c.stopOnce.Do(func() { c.stopErr = c.stop() })
	return c.stopErr
}

func (c *Cluster) stop() error {
	var errs []error
	if c.cmd != nil {
		select {
		case <-c.exited:
			if c.waitErr != nil {
				errs = append(errs, fmt.Errorf("pgcluster: server had already exited: %w", c.waitErr))
			}
		default:
			_ = c.cmd.Process.Signal(os.Interrupt)
			select {
			case <-c.exited:
			case <-time.After(stopTimeout):
				_ = c.cmd.Process.Kill()
				<-c.exited
				errs = append(errs, fmt.Errorf("pgcluster: server did not shut down within %v; killed", stopTimeout))
			}
		}
	}
	if c.tmpSocketDir != "" {
		if err := os.RemoveAll(c.tmpSocketDir); err != nil {
			errs = append(errs, fmt.Errorf("pgcluster: %w", err))
		}
	}
	if c.logFile != nil {
		if err := c.logFile.Close(); err != nil {
			errs = append(errs, fmt.Errorf("pgcluster: %w", err))
		}
	}
	return errors.Join(errs...)
}

// setupSocketDir puts the socket in dir unless the resulting path would
// exceed the OS limit (deep test temp dirs on macOS easily do), in which case
// it uses a short private temp dir instead.
func (c *Cluster) setupSocketDir(dir string, cred *syscall.Credential) error {
	sock := ".s.PGSQL." + strconv.Itoa(c.port)
	if len(filepath.Join(dir, sock)) <= maxSocketPath {
		c.socketDir = dir
		return nil
	}
	for _, parent := range []string{"", "/tmp"} { // $TMPDIR first; /tmp if even that is too long
		d, err := os.MkdirTemp(parent, "fapg")
		if err != nil {
			return fmt.Errorf("pgcluster: socket dir: %w", err)
		}
		if len(filepath.Join(d, sock)) > maxSocketPath {
			os.Remove(d)
			continue
		}
		c.socketDir, c.tmpSocketDir = d, d
		if cred != nil {
			if err := os.Chown(d, int(cred.Uid), int(cred.Gid)); err != nil {
				return fmt.Errorf("pgcluster: socket dir: %w", err)
			}
		}
		return nil
	}
	return fmt.Errorf("pgcluster: no directory short enough for a unix socket (max %d bytes) for Dir %s", maxSocketPath, dir)
}

// setupLog decides where initdb and server output go and how to read back its
// tail for error messages.
func (c *Cluster) setupLog(dir string, logger io.Writer) (io.Writer, error) {
	if logger != nil {
		tail := &tailBuffer{}
		c.logTail = tail.String
		return teeWriter{tail: tail, dst: logger}, nil
	}
	name := filepath.Join(dir, "postgres.log")
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("pgcluster: %w", err)
	}
	c.logFile = f
	c.logTail = func() string { return fileTail(name) }
	// An *os.File is handed to the child as its stdout/stderr directly: no
	// pipe and copying goroutine that could stall the server's logging.
	return f, nil
}

// initdb creates the cluster unless Dir/pgdata already holds one (PG_VERSION
// is written last by initdb). It initializes into Dir/pgdata.initdb and
// renames that into place, so that an initdb killed half-way (e.g. by
// Pdeathsig) never leaves a pgdata that blocks every later start.
func (c *Cluster) initdb(ctx context.Context, dir, binDir string, durable bool, cred *syscall.Credential, out io.Writer) error {
	if _, err := os.Stat(filepath.Join(c.dataDir, "PG_VERSION")); err == nil {
		return nil
	}
	if entries, err := os.ReadDir(c.dataDir); err == nil {
		if len(entries) > 0 {
			return fmt.Errorf("pgcluster: %s is not empty but holds no PostgreSQL cluster (no PG_VERSION); refusing to touch it", c.dataDir)
		}
		if err := os.Remove(c.dataDir); err != nil {
			return fmt.Errorf("pgcluster: %w", err)
		}
	}
	tmp := filepath.Join(dir, "pgdata.initdb")
	if err := os.RemoveAll(tmp); err != nil { // leftover of an interrupted initdb
		return fmt.Errorf("pgcluster: %w", err)
	}
	args := []string{
		"-D", tmp,
		"-U", "postgres",
		"--auth=trust", // only reachable by the owner over the socket (see unix_socket_permissions) and by local TCP
		"--encoding=UTF8",
		// C locale: identical sorting on Linux and macOS, and immune to the
		// glibc collation changes that silently corrupt text indexes of a
		// persistent cluster after an OS upgrade.
		"--locale=C",
	}
	if !durable {
		args = append(args, "--no-sync")
	}
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "initdb"), args...)
	cmd.Dir = dir // our cwd may be unreadable for the postgres user (e.g. /root)
	cmd.Env = serverEnv()
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = sysProcAttr(cred)
	cmd.WaitDelay = time.Second
	if err := cmd.Run(); err != nil {
		os.RemoveAll(tmp)
		return c.failure("initdb failed: %v", err)
	}
	if err := os.Rename(tmp, c.dataDir); err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	return nil
}

// startServer runs postgres in the background; waitReady then waits for it.
func (c *Cluster) startServer(binDir string, durable bool, cred *syscall.Credential, out io.Writer) error {
	listen := "" // no TCP at all: nothing to collide with, nothing exposed
	if c.tcp {
		listen = "127.0.0.1"
	}
	args := []string{
		"-D", c.dataDir,
		"-k", c.socketDir,
		"-c", "listen_addresses=" + listen,
		"-c", "port=" + strconv.Itoa(c.port),
		// Trust auth: only the server's own user (and root) may use the socket.
		"-c", "unix_socket_permissions=0700",
	}
	if !durable {
		// Given on the command line rather than written into
		// postgresql.conf, so the same Dir can be started either way.
		args = append(args,
			"-c", "fsync=off",
			"-c", "synchronous_commit=off",
			"-c", "full_page_writes=off",
			// Dynamic shared memory as files in pgdata/pg_dynshmem instead
			// of POSIX shm (/dev/shm on Linux): a throwaway cluster whose
			// parent is killed then leaks nothing outside its Dir. (A
			// durable cluster cleans up its old segments on the next start.)
			"-c", "dynamic_shared_memory_type=mmap",
		)
	}
	cmd := exec.Command(filepath.Join(binDir, "postgres"), args...) // not CommandContext: the server outlives Start's ctx
	cmd.Dir = c.dataDir
	cmd.Env = serverEnv()
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = sysProcAttr(cred)
	// With a Logger the output goes through a pipe that the server's
	// children also hold; don't let a straggler hang Wait.
	cmd.WaitDelay = 2 * time.Second
	if err := cmd.Start(); err != nil {
		return c.failure("starting postgres: %v", err)
	}
	c.cmd = cmd
	go func() {
		c.waitErr = cmd.Wait()
		close(c.exited)
	}()
	return nil
}

// waitReady waits until the server accepts connections and returns one to
// the "postgres" database. It first watches postmaster.pid for the "ready"
// status (as pg_ctl does), so the log isn't filled with "the database system
// is starting up" from premature connection attempts.
func (c *Cluster) waitReady(ctx context.Context) (*pgx.Conn, error) {
	wctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	began := time.Now()
	for {
		// Fall back to plain connection attempts after a while, in case
		// the pid file's format differs (very old or future versions).
		if pidFileReady(c.dataDir, c.cmd.Process.Pid) || time.Since(began) > 3*time.Second {
			actx, acancel := context.WithTimeout(wctx, 2*time.Second)
			conn, err := pgx.Connect(actx, c.DSN("postgres"))
			acancel()
			if err == nil {
				return conn, nil
			}
		}
		select {
		case <-c.exited:
			return nil, c.failure("postgres exited during startup: %v", c.waitErr)
		case <-wctx.Done():
			if ctx.Err() != nil {
				return nil, c.failure("waiting for postgres to start: %v", ctx.Err())
			}
			return nil, c.failure("postgres did not accept connections within %v", startTimeout)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// failure builds a start-up error that quotes the end of the server log,
// where Postgres explains what went wrong (port in use, bad permissions, ...).
func (c *Cluster) failure(format string, args ...any) error {
	msg := fmt.Sprintf("pgcluster: "+format, args...)
	if c.logTail == nil {
		return errors.New(msg)
	}
	// The server's output may still be in flight when it has just died.
	time.Sleep(50 * time.Millisecond)
	tail := c.logTail()
	if tail == "" {
		return errors.New(msg)
	}
	where := "server output"
	if c.logFile != nil {
		where = c.logFile.Name()
	}
	return fmt.Errorf("%s\n--- last lines of %s ---\n%s", msg, where, tail)
}

func createDatabaseIfMissing(ctx context.Context, conn *pgx.Conn, name string) error {
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return err
	}
	if exists {
		return nil
	}
	_, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	return err
}

// removeStaleLockFiles deletes the lock files (postmaster.pid in the data
// dir, .s.PGSQL.<port>.lock next to the socket) left by a server that was
// killed, e.g. when the controller was SIGKILLed and Pdeathsig took the
// server with it. Postgres ignores a lock file whose pid is dead, but not one
// whose pid is a not-yet-reaped zombie or has been reused by another process,
// which after a reboot or container restart is likely. Lock files of a server
// that really is still running are left alone, so Postgres then refuses to
// start a second server on the same data. Postgres' shared-memory interlock
// (keyed by the data dir, not by these files) still stops a start while
// orphaned children of the killed server are alive.
func (c *Cluster) removeStaleLockFiles() error {
	for _, name := range []string{
		filepath.Join(c.dataDir, "postmaster.pid"),
		filepath.Join(c.socketDir, ".s.PGSQL."+strconv.Itoa(c.port)+".lock"),
	} {
		if err := removeStaleLockFile(name); err != nil {
			return err
		}
	}
	return nil
}

// removeStaleLockFile removes the lock file name if the server that wrote it
// is gone. Both kinds start "pid\ndata dir\nstart time (Unix seconds)\n".
func removeStaleLockFile(name string) error {
	b, err := os.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	lines := strings.Split(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(lines[0]))
	if err != nil || pid <= 0 {
		return nil // being written right now, or not ours to judge: let postgres decide
	}
	stale := !processAlive(pid)
	if !stale && len(lines) > 2 {
		// Line 3 is the server's start time; older than the last boot → stale.
		started, err := strconv.ParseInt(strings.TrimSpace(lines[2]), 10, 64)
		if boot, ok := bootTime(); ok && err == nil && started < boot {
			stale = true
		}
	}
	if !stale {
		return nil
	}
	if err := os.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("pgcluster: removing stale %s: %w", name, err)
	}
	return nil
}

func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	alive := err == nil || errors.Is(err, syscall.EPERM) // EPERM: exists, but belongs to someone else
	return alive && !isZombie(pid)
}

// pidFileReady reports whether postmaster.pid belongs to our server and says
// it is ready for connections (status line, PostgreSQL 10+).
func pidFileReady(dataDir string, pid int) bool {
	b, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return false
	}
	lines := strings.Split(string(b), "\n")
	return len(lines) > 7 &&
		strings.TrimSpace(lines[0]) == strconv.Itoa(pid) &&
		strings.TrimSpace(lines[7]) == "ready"
}

// postgresUser returns the credentials of the "postgres" system user, which
// the server runs as when we are root.
func postgresUser() (*syscall.Credential, error) {
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("pgcluster: running as root, and PostgreSQL refuses to run as root, but there is no postgres user to run it as (%v); create one (e.g. `useradd --system postgres`) or run as a normal user", err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("pgcluster: unexpected uid/gid %q/%q for user postgres", u.Uid, u.Gid)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// checkReachable fails early, with a useful message, when the postgres user
// cannot traverse the directories above dir (a root-owned 0700 parent such as
// the one testing.T.TempDir creates); otherwise initdb would fail with a
// bare "Permission denied".
func checkReachable(dir string, cred *syscall.Credential) error {
	for d := filepath.Dir(dir); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("pgcluster: %w", err)
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			perm := fi.Mode().Perm()
			var bit fs.FileMode = 0o001
			switch {
			case uint32(st.Uid) == cred.Uid:
				bit = 0o100
			case uint32(st.Gid) == cred.Gid:
				bit = 0o010
			}
			if perm&bit == 0 {
				return fmt.Errorf("pgcluster: running as root, so PostgreSQL runs as user postgres (uid %d), which cannot reach %s: %s has mode %v (owner uid %d); make it traversable (chmod o+x %s) or use another Dir",
					cred.Uid, dir, d, perm, st.Uid, d)
			}
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}

// chownTree gives dir and everything in it to the postgres user. Entries
// already owned correctly are skipped, so restarting a big cluster is cheap.
func chownTree(dir string, cred *syscall.Credential) error {
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && uint32(st.Uid) == cred.Uid && uint32(st.Gid) == cred.Gid {
			return nil
		}
		return os.Lchown(path, int(cred.Uid), int(cred.Gid))
	})
}

// serverEnv is our environment minus PG* variables: postgres and initdb read
// some (PGDATA, PGPORT, ...) as defaults, and we want only our flags to count.
func serverEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PG") {
			env = append(env, kv)
		}
	}
	return env
}

// quoteDSN quotes a keyword/value connection string value when needed.
func quoteDSN(v string) string {
	if v != "" && !strings.ContainsAny(v, " \t\n\r\v\f'\\") {
		return v
	}
	v = strings.ReplaceAll(v, `\`, `\\`)
	v = strings.ReplaceAll(v, `'`, `\'`)
	return "'" + v + "'"
}

// fileTail returns the last tailLines lines of the file.
func fileTail(name string) string {
	f, err := os.Open(name)
	if err != nil {
		return ""
	}
	defer f.Close()
	const chunk = 16 << 10
	var off int64
	if fi, err := f.Stat(); err == nil && fi.Size() > chunk {
		off = fi.Size() - chunk
	}
	b := make([]byte, chunk)
	n, _ := f.ReadAt(b, off)
	return lastLines(b[:n], tailLines)
}

func lastLines(b []byte, n int) string {
	b = bytes.TrimRight(b, "\n")
	for i, count := len(b)-1, 0; i >= 0; i-- {
		if b[i] == '\n' {
			if count++; count == n {
				return string(b[i+1:])
			}
		}
	}
	return string(b)
}

// tailBuffer keeps the end of the output written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	const keep = 16 << 10
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > 2*keep {
		t.buf = append([]byte(nil), t.buf[len(t.buf)-keep:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return lastLines(t.buf, tailLines)
}

// teeWriter copies to the tail buffer and the caller's Logger. It never
// fails: a broken Logger must not stop the copy from the server's pipe,
// which would block the server once the pipe fills.
type teeWriter struct {
	tail *tailBuffer
	dst  io.Writer
}

func (w teeWriter) Write(p []byte) (int, error) {
	w.tail.Write(p)
	w.dst.Write(p)
	return len(p), nil
}
