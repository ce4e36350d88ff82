// Package pgtest gives tests real, isolated PostgreSQL databases: one
// throwaway cluster per test binary (started on first use), and a fresh empty
// database per test.
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
//
//	func TestX(t *testing.T) {
//		t.Parallel()
//		dsn := pgtest.NewDatabase(t)
//		...
//	}
//
// With TEST_DATABASE_URL set, the databases are created on that server
// instead (CI with a service container, or a developer's own server). Without
// it, PostgreSQL server binaries must be installed (see pgcluster.FindBinDir);
// if they are missing, tests asking for a database fail with install
// instructions, or are skipped when PGTEST_SKIP_IF_MISSING=1.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/freeagent-build/freeagent/controller/pgcluster"
	"github.com/freeagent-build/freeagent/internal/testsupport/testtool"
)

// Package state is unavoidable here: NewDatabase(t) has no handle, and the
// cluster must be shared by all tests of the binary and stopped by Main.
var (
	mu         sync.Mutex
	mainCalled bool
	started    bool                // the lazy setup ran (successfully or not)
	setupErr   error               // its error, returned to every later caller
	adminDSN   string              // server to run CREATE/DROP DATABASE on
	dsnFor     func(string) string // DSN of a database on that server
	cluster    *pgcluster.Cluster
	clusterDir string

	dbCounter atomic.Int64
	// dbPrefix makes database names unique across test binaries sharing
	// one TEST_DATABASE_URL server (`go test ./...` runs packages in parallel).
	dbPrefix = "t_" + randomHex(4) + "_"
)

// Main runs the tests and then stops the cluster (if a test started one) and
// removes its directory. Use it as os.Exit(pgtest.Main(m)) in TestMain.
func Main(m *testing.M) int {
	mu.Lock()
	mainCalled = true
	mu.Unlock()

	code := m.Run()

	mu.Lock()
	defer mu.Unlock()
	if cluster != nil {
		if err := cluster.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: stopping test cluster: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
		cluster = nil
	}
	if clusterDir != "" {
		if err := os.RemoveAll(clusterDir); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: removing %s: %v\n", clusterDir, err)
		}
		clusterDir = ""
	}
	return code
}

// NewDatabase creates a fresh, empty database for this test and returns a
// DSN for it (keyword/value or URL form, whichever the server's DSN uses).
// The database is dropped, disconnecting any remaining sessions, when the
// test ends. Safe for parallel tests.
func NewDatabase(t testing.TB) (dsn string) {
	t.Helper()
	admin, dbDSN, err := setup()
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}

	name := fmt.Sprintf("%s%d", dbPrefix, dbCounter.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// template0 is never connected to, so parallel CREATE DATABASEs don't
	// trip over "source database is being accessed by other users", and it
	// is guaranteed pristine.
	if err := adminExec(ctx, admin, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()+" TEMPLATE template0"); err != nil {
		t.Fatalf("pgtest: creating database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		// FORCE (PostgreSQL 13+): a test that forgot to close a pool must
		// not make cleanup fail.
		if err := adminExec(ctx, admin, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Errorf("pgtest: dropping database %s: %v", name, err)
		}
	})
	return dbDSN(name)
}

// setup returns the admin DSN and how to make a database's DSN, starting
// the cluster on the first call. A failure is remembered, so a missing
// installation costs one attempt, not one per test.
func setup() (string, func(string) string, error) {
	mu.Lock()
	defer mu.Unlock()
	if started {
		return adminDSN, dsnFor, setupErr
	}
	if !mainCalled {
		// Without Main nobody would stop the cluster or remove its files.
		return "", nil, errors.New("pgtest.NewDatabase needs pgtest.Main: add `func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }` to the package's tests")
	}
	started = true
	if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
		if _, err := pgx.ParseConfig(u); err != nil {
			setupErr = fmt.Errorf("TEST_DATABASE_URL: %w", err)
			return "", nil, setupErr
		}
		adminDSN = u
		dsnFor = func(name string) string { return withDatabase(u, name) }
		return adminDSN, dsnFor, nil
	}

	parent := fastTempParent()
	sweepLeakedDirs(parent)
	dir, err := os.MkdirTemp(parent, fmt.Sprintf("pgtest-%d-", os.Getpid()))
	if err != nil {
		setupErr = err
		return "", nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := pgcluster.Start(ctx, pgcluster.Options{Dir: dir}) // Durable false, socket only
	if err != nil {
		os.RemoveAll(dir)
		if errors.Is(err, pgcluster.ErrNoBinaries) {
			err = fmt.Errorf("%w (run %s, or set TEST_DATABASE_URL to a server the tests may create databases on)", err, testtool.Install)
		}
		setupErr = err
		return "", nil, err
	}
	cluster, clusterDir = c, dir
	adminDSN, dsnFor = c.DSN("postgres"), c.DSN
	return adminDSN, dsnFor, nil
}

// sweepLeakedDirs removes cluster dirs of test binaries that died without
// running Main's cleanup (e.g. killed by `go test -timeout`; Pdeathsig took
// their server down). The pid in the name tells whether the owner is gone.
// Only done on tmpfs, where leaks eat RAM until reboot; a shared /tmp may be
// seen by other pid namespaces (containers), whose pids would look dead.
func sweepLeakedDirs(parent string) {
	if parent == "" {
		return
	}
	matches, _ := filepath.Glob(filepath.Join(parent, "pgtest-*-*"))
	for _, d := range matches {
		fields := strings.SplitN(filepath.Base(d), "-", 3)
		pid, err := strconv.Atoi(fields[1])
		if err != nil || pid <= 0 || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			os.RemoveAll(d)
		}
	}
}

// adminExec runs one statement on a short-lived connection. CREATE/DROP
// DATABASE can't run in a transaction and a shared connection would serialize
// parallel tests; a unix-socket connection costs ~1 ms.
func adminExec(ctx context.Context, dsn, sql string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

// withDatabase returns dsn with its database replaced by dbname.
func withDatabase(dsn, dbname string) string {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		if u, err := url.Parse(dsn); err == nil {
			u.Path = "/" + dbname
			u.RawPath = ""
			q := u.Query()
			if q.Has("dbname") { // would override the path
				q.Del("dbname")
				u.RawQuery = q.Encode()
			}
			return u.String()
		}
	}
	// Keyword/value form: a later keyword overrides an earlier one.
	return dsn + " dbname=" + dbname // names are [a-z0-9_], no quoting needed
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
