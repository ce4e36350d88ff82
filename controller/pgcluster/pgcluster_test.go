//go:build unix

package pgcluster

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/freeagent-build/freeagent/internal/testsupport/syncbuf"
	"github.com/freeagent-build/freeagent/launchd/homebrew"
)

// clusterDir returns a fresh directory for a cluster. As root the server runs
// as user postgres, which cannot traverse the 0700 parent testing.T.TempDir
// creates, so open that parent up (it is ours and holds nothing else).
func clusterDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if os.Geteuid() == 0 {
		if err := os.Chmod(filepath.Dir(dir), 0o711); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func startCluster(t *testing.T, opts Options) *Cluster {
	t.Helper()
	c, err := Start(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Stop() })
	return c
}

func connect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatalf("connect %q: %v", dsn, err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func TestStartQueryStopRestart(t *testing.T) {
	dir := clusterDir(t)

	t0 := time.Now()
	c := startCluster(t, Options{Dir: dir})
	t.Logf("first start (initdb + start + create db): %v", time.Since(t0))

	conn := connect(t, c.DSN(DefaultDatabase))
	var one int
	if err := conn.QueryRow(context.Background(), "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("SELECT 1 = %d, %v", one, err)
	}
	var fsync string
	if err := conn.QueryRow(context.Background(), "SHOW fsync").Scan(&fsync); err != nil || fsync != "off" {
		t.Fatalf("fsync = %q, %v; want off for Durable=false", fsync, err)
	}
	var dsm string
	if err := conn.QueryRow(context.Background(), "SHOW dynamic_shared_memory_type").Scan(&dsm); err != nil || dsm != "mmap" {
		t.Fatalf("dynamic_shared_memory_type = %q, %v; want mmap for Durable=false", dsm, err)
	}
	if _, err := conn.Exec(context.Background(), "CREATE TABLE kept (v text); INSERT INTO kept VALUES ('survives restart')"); err != nil {
		t.Fatal(err)
	}
	conn.Close(context.Background())

	t0 = time.Now()
	if err := c.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	t.Logf("stop: %v", time.Since(t0))
	if err := c.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "pgdata", "postmaster.pid")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("postmaster.pid still there after Stop: %v", err)
	}

	t0 = time.Now()
	c2 := startCluster(t, Options{Dir: dir, Durable: true})
	t.Logf("restart on existing data: %v", time.Since(t0))
	conn = connect(t, c2.DSN(DefaultDatabase))
	var v string
	if err := conn.QueryRow(context.Background(), "SELECT v FROM kept").Scan(&v); err != nil || v != "survives restart" {
		t.Fatalf("after restart: %q, %v", v, err)
	}
	if err := conn.QueryRow(context.Background(), "SHOW fsync").Scan(&fsync); err != nil || fsync != "on" {
		t.Fatalf("fsync = %q, %v; want on for Durable=true", fsync, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "postgres.log")); err != nil {
		t.Fatalf("no default log file: %v", err)
	}
}

// deadPid returns the pid of a process that has exited and been reaped.
func deadPid(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

func writePidFile(t *testing.T, dataDir string, pid int, started int64) {
	t.Helper()
	// The format postgres writes: pid, data dir, start time, port, socket
	// dir, listen address, shmem key, status.
	content := fmt.Sprintf("%d\n%s\n%d\n5432\n/tmp\n\n  5432001     32768\nready   \n", pid, dataDir, started)
	if err := os.WriteFile(filepath.Join(dataDir, "postmaster.pid"), []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestStalePidFileDoesNotBlockStart(t *testing.T) {
	dir := clusterDir(t)
	c := startCluster(t, Options{Dir: dir})
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	dataDir := filepath.Join(dir, "pgdata")

	t.Run("dead pid", func(t *testing.T) {
		writePidFile(t, dataDir, deadPid(t), time.Now().Unix())
		c := startCluster(t, Options{Dir: dir})
		connect(t, c.DSN("postgres"))
		if err := c.Stop(); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("pid reused after reboot", func(t *testing.T) {
		if _, ok := bootTime(); !ok {
			t.Skip("boot time unknown on this OS")
		}
		// A live, unrelated process owns the recorded pid, but the file
		// says its server started before the last boot. Postgres alone
		// would refuse to start ("Is another postmaster running?").
		sleeper := exec.Command("sleep", "60")
		if err := sleeper.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { sleeper.Process.Kill(); sleeper.Wait() }()
		writePidFile(t, dataDir, sleeper.Process.Pid, 1)
		c := startCluster(t, Options{Dir: dir})
		connect(t, c.DSN("postgres"))
		if err := c.Stop(); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("live server is not touched", func(t *testing.T) {
		c := startCluster(t, Options{Dir: dir})
		_, err := Start(context.Background(), Options{Dir: dir})
		if err == nil {
			t.Fatal("second Start on a running cluster succeeded")
		}
		if !strings.Contains(err.Error(), "lock file") {
			t.Errorf("error does not quote the server's complaint:\n%v", err)
		}
		connect(t, c.DSN("postgres")) // the first server is unharmed
	})
}

// TestRestartAfterSIGKILL kills the server the hard way (as Pdeathsig does
// when the controller is SIGKILLed) and starts again on the same Dir.
func TestRestartAfterSIGKILL(t *testing.T) {
	dir := clusterDir(t)
	c := startCluster(t, Options{Dir: dir, Durable: true})
	conn := connect(t, c.DSN(DefaultDatabase))
	if _, err := conn.Exec(context.Background(), "CREATE TABLE kept AS SELECT 42 AS v"); err != nil {
		t.Fatal(err)
	}
	conn.Close(context.Background())
	c.cmd.Process.Kill()
	<-c.exited

	t0 := time.Now()
	c2 := startCluster(t, Options{Dir: dir, Durable: true})
	t.Logf("restart after SIGKILL (crash recovery): %v", time.Since(t0))
	var v int
	if err := connect(t, c2.DSN(DefaultDatabase)).QueryRow(context.Background(), "SELECT v FROM kept").Scan(&v); err != nil || v != 42 {
		t.Fatalf("after crash restart: %d, %v", v, err)
	}
	if err := c.Stop(); err == nil || !strings.Contains(err.Error(), "already exited") {
		t.Errorf("Stop of the killed cluster = %v, want an 'already exited' error", err)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func TestTCPPort(t *testing.T) {
	port := freePort(t)
	c := startCluster(t, Options{Dir: clusterDir(t), Port: port})
	dsn := c.DSN(DefaultDatabase)
	if !strings.Contains(dsn, "host=127.0.0.1") || !strings.Contains(dsn, "port="+strconv.Itoa(port)) {
		t.Fatalf("DSN = %q", dsn)
	}
	var addr string
	if err := connect(t, dsn).QueryRow(context.Background(), "SELECT inet_server_addr()::text").Scan(&addr); err != nil {
		t.Fatal(err)
	}
	if addr != "127.0.0.1/32" {
		t.Errorf("inet_server_addr = %q, want a TCP connection to 127.0.0.1", addr)
	}
}

func TestStartFailureQuotesServerLog(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port

	_, err = Start(context.Background(), Options{Dir: clusterDir(t), Port: port})
	if err == nil {
		t.Fatal("Start succeeded on a port that is in use")
	}
	t.Logf("error:\n%v", err)
	for _, want := range []string{"exited during startup", "last lines of", "could not"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q", want)
		}
	}
}

func TestLongDirUsesShortSocketDirAndLogger(t *testing.T) {
	dir := filepath.Join(clusterDir(t), strings.Repeat("long-directory-name-", 6))
	var log syncbuf.Buffer
	c := startCluster(t, Options{Dir: dir, Logger: &log})
	if c.tmpSocketDir == "" || c.socketDir != c.tmpSocketDir {
		t.Fatalf("socket dir %q for a %d-byte Dir; want a short temp dir", c.socketDir, len(dir))
	}
	connect(t, c.DSN(DefaultDatabase))
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(c.tmpSocketDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("temp socket dir not removed by Stop: %v", err)
	}
	if !strings.Contains(log.String(), "database system is ready to accept connections") {
		t.Errorf("Logger did not receive server output:\n%s", log.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "postgres.log")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("postgres.log written although a Logger was given")
	}
}

func TestUnreachableDirAsRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root hands the cluster to another user")
	}
	dir := t.TempDir() // parent is 0700 root: the postgres user can't get in
	_, err := Start(context.Background(), Options{Dir: dir})
	if err == nil || !strings.Contains(err.Error(), "cannot reach") {
		t.Fatalf("Start = %v, want a 'cannot reach' error", err)
	}
}

func TestFindBinDir(t *testing.T) {
	fake := func(dir string) string {
		t.Helper()
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"initdb", "postgres"} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}

	t.Run("none found", func(t *testing.T) {
		empty := t.TempDir()
		clientOnly := t.TempDir() // like Debian's /usr/bin: tools but no server
		os.WriteFile(filepath.Join(clientOnly, "postgres"), []byte("#!/bin/sh\n"), 0o755)
		_, err := findBinDir(candidateDirs(empty+string(os.PathListSeparator)+clientOnly, t.TempDir()))
		if !errors.Is(err, ErrNoBinaries) {
			t.Fatalf("err = %v, want ErrNoBinaries", err)
		}
		for _, want := range []string{
			"no PostgreSQL server binaries (initdb, postgres) found",
			"sudo apt-get install -y postgresql",
			"brew install postgresql@16",
			"Postgres.app",
			"DATABASE_URL",
		} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q lacks %q", err, want)
			}
		}
	})

	t.Run("highest version wins", func(t *testing.T) {
		root := t.TempDir()
		for _, v := range []string{"9.6", "15", "13"} {
			fake(filepath.Join(root, "usr/lib/postgresql", v, "bin"))
		}
		fake(filepath.Join(root, "opt/homebrew/opt/postgresql@17/bin"))
		got, err := findBinDir(candidateDirs("", root))
		if want := filepath.Join(root, "usr/lib/postgresql/15/bin"); err != nil || got != want {
			t.Fatalf("got %q, %v; want %q", got, err, want)
		}
		os.RemoveAll(filepath.Join(root, "usr"))
		got, err = findBinDir(candidateDirs("", root))
		if want := filepath.Join(root, "opt/homebrew/opt/postgresql@17/bin"); err != nil || got != want {
			t.Fatalf("got %q, %v; want %q", got, err, want)
		}
	})

	t.Run("HOMEBREW_PREFIX", func(t *testing.T) {
		// Homebrew outside its default prefixes: brew shellenv names it.
		t.Setenv(homebrew.PrefixEnv, "/Users/me/brew")
		root := t.TempDir()
		fake(filepath.Join(root, "opt/homebrew/opt/postgresql@16/bin"))
		fake(filepath.Join(root, "Users/me/brew/opt/postgresql@15/bin"))
		got, err := findBinDir(candidateDirs("", root))
		if want := filepath.Join(root, "Users/me/brew/opt/postgresql@15/bin"); err != nil || got != want {
			t.Fatalf("got %q, %v; want %q", got, err, want)
		}
	})

	t.Run("PATH first", func(t *testing.T) {
		root := t.TempDir()
		fake(filepath.Join(root, "usr/lib/postgresql/16/bin"))
		onPath := fake(t.TempDir())
		got, err := findBinDir(candidateDirs(onPath, root))
		if err != nil || got != onPath {
			t.Fatalf("got %q, %v; want %q", got, err, onPath)
		}
	})

	t.Run("this machine", func(t *testing.T) {
		dir, err := FindBinDir()
		t.Logf("FindBinDir() = %q, %v", dir, err)
	})
}

func TestDSNQuoting(t *testing.T) {
	c := &Cluster{socketDir: "/tmp/with space/it's", port: 5432}
	cfg, err := pgx.ParseConfig(c.DSN("db name"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "/tmp/with space/it's" || cfg.Database != "db name" || cfg.User != "postgres" || cfg.Port != 5432 {
		t.Fatalf("parsed %q → host %q db %q user %q port %d", c.DSN("db name"), cfg.Host, cfg.Database, cfg.User, cfg.Port)
	}
}

// TestServerDiesWithParent SIGKILLs a process that started a cluster and
// checks that the server goes too (Pdeathsig), then that a new Start on the
// same Dir works despite the leftover postmaster.pid: the "serve restarted
// after SIGKILL" case.
func TestServerDiesWithParent(t *testing.T) {
	if os.Getenv("PGCLUSTER_HELPER_DIR") != "" {
		t.Skip("helper process")
	}
	if runtime.GOOS != "linux" {
		t.Skip("Pdeathsig is Linux-only")
	}
	dir := clusterDir(t)
	helper := exec.Command(os.Args[0], "-test.run=^TestHelperStartAndHang$")
	helper.Env = append(os.Environ(), "PGCLUSTER_HELPER_DIR="+dir)
	helper.Stderr = os.Stderr
	out, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	defer helper.Process.Kill()
	sc := bufio.NewScanner(out)
	pgPid := 0
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "POSTMASTER "); ok {
			pgPid, _ = strconv.Atoi(rest)
			break
		}
	}
	if pgPid == 0 {
		helper.Process.Kill()
		helper.Wait()
		t.Fatal("helper did not report a postmaster pid")
	}
	helper.Process.Kill()
	helper.Wait()

	deadline := time.Now().Add(5 * time.Second)
	for !processGone(pgPid) {
		if time.Now().After(deadline) {
			syscall.Kill(pgPid, syscall.SIGKILL)
			t.Fatalf("postmaster %d survived its SIGKILLed parent", pgPid)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := os.Stat(filepath.Join(dir, "pgdata", "postmaster.pid")); err != nil {
		t.Fatalf("expected a leftover postmaster.pid: %v", err)
	}

	t0 := time.Now()
	c := startCluster(t, Options{Dir: dir})
	t.Logf("restart after parent SIGKILL: %v", time.Since(t0))
	connect(t, c.DSN(DefaultDatabase))
}

// processGone reports whether pid no longer runs (gone, or a zombie that a
// non-reaping init has not collected yet).
func processGone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) {
		return b[i+2] == 'Z' || b[i+2] == 'X'
	}
	return false
}

// TestHelperStartAndHang is the child of TestServerDiesWithParent.
func TestHelperStartAndHang(t *testing.T) {
	dir := os.Getenv("PGCLUSTER_HELPER_DIR")
	if dir == "" {
		t.Skip("helper process for TestServerDiesWithParent")
	}
	c, err := Start(context.Background(), Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("POSTMASTER %d\n", c.cmd.Process.Pid)
	time.Sleep(time.Hour) // until SIGKILLed
}
