package pgtest_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/freeagent-build/freeagent/controller/pgcluster"
	"github.com/freeagent-build/freeagent/controller/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func connect(t testing.TB, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func tableExists(t testing.TB, conn *pgx.Conn, name string) bool {
	t.Helper()
	var ok bool
	if err := conn.QueryRow(context.Background(), "SELECT to_regclass($1) IS NOT NULL", name).Scan(&ok); err != nil {
		t.Fatal(err)
	}
	return ok
}

// rendezvous lets the two parallel tests below check each other's database
// while both exist. If they cannot run at the same time (-parallel=1), they
// stop waiting after a while; TestIsolationSequential covers that case.
type rendezvous struct {
	mu      sync.Mutex
	arrived map[string]int
	cond    *sync.Cond
}

var meet = func() *rendezvous {
	r := &rendezvous{arrived: map[string]int{}}
	r.cond = sync.NewCond(&r.mu)
	return r
}()

func (r *rendezvous) wait(point string, n int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.arrived[point]++
	r.cond.Broadcast()
	deadline := time.Now().Add(5 * time.Second)
	go func() { time.Sleep(5 * time.Second); r.cond.Broadcast() }()
	for r.arrived[point] < n && time.Now().Before(deadline) {
		r.cond.Wait()
	}
	return r.arrived[point] >= n
}

func testParallelIsolation(t *testing.T, me, other string) {
	t.Parallel()
	dsn := pgtest.NewDatabase(t)
	conn := connect(t, dsn)
	ctx := context.Background()
	// "common" already existing would mean a shared database.
	for _, sql := range []string{"CREATE TABLE made_by_" + me + " (x int)", "CREATE TABLE common (who text)"} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := conn.Exec(ctx, "INSERT INTO common VALUES ($1)", me); err != nil {
		t.Fatal(err)
	}
	together := meet.wait("created", 2)
	if !together {
		t.Logf("tests did not overlap (-parallel=1?); checking isolation sequentially only")
	}
	if tableExists(t, conn, "made_by_"+other) {
		t.Errorf("table made_by_%s from the other test is visible in %s's database", other, me)
	}
	if !tableExists(t, conn, "made_by_"+me) {
		t.Errorf("own table missing")
	}
	var who []string
	rows, _ := conn.Query(ctx, "SELECT who FROM common")
	who, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(who) != 1 || who[0] != me {
		t.Errorf("common = %v, %v; want only %q", who, err, me)
	}
	if together {
		meet.wait("checked", 2) // neither database is dropped before both checked
	}
}

func TestParallelIsolationA(t *testing.T) { testParallelIsolation(t, "a", "b") }
func TestParallelIsolationB(t *testing.T) { testParallelIsolation(t, "b", "a") }

func TestIsolationSequential(t *testing.T) {
	first, second := pgtest.NewDatabase(t), pgtest.NewDatabase(t)
	if first == second {
		t.Fatalf("same DSN twice: %s", first)
	}
	c1, c2 := connect(t, first), connect(t, second)
	if _, err := c1.Exec(context.Background(), "CREATE TABLE only_in_first (x int)"); err != nil {
		t.Fatal(err)
	}
	if tableExists(t, c2, "only_in_first") {
		t.Fatal("table of the first database visible in the second")
	}
	var name string
	if err := c1.QueryRow(context.Background(), "SELECT current_database()").Scan(&name); err != nil {
		t.Fatal(err)
	}
	t.Logf("database %s via %s", name, first)
}

func TestDatabaseDroppedAtCleanup(t *testing.T) {
	var name string
	t.Run("user", func(t *testing.T) {
		conn := connect(t, pgtest.NewDatabase(t))
		// A session left open, as by a test that forgets to close its
		// pool: DROP ... WITH (FORCE) must still succeed.
		leak, err := pgx.Connect(context.Background(), conn.Config().ConnString())
		if err != nil {
			t.Fatal(err)
		}
		_ = leak
		if err := conn.QueryRow(context.Background(), "SELECT current_database()").Scan(&name); err != nil {
			t.Fatal(err)
		}
	})
	conn := connect(t, pgtest.NewDatabase(t))
	var n int
	if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM pg_database WHERE datname = $1", name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("database %s still exists after its test ended", name)
	}
}

// TestNewDatabaseTiming measures the per-test cost of NewDatabase (create +
// drop), sequentially and with parallel callers.
func TestNewDatabaseTiming(t *testing.T) {
	pgtest.NewDatabase(t) // make sure the cluster is up before timing
	const n = 20
	var create time.Duration
	t.Run("sequential", func(t *testing.T) {
		for i := 0; i < n; i++ {
			t.Run(fmt.Sprint(i), func(t *testing.T) {
				t0 := time.Now()
				pgtest.NewDatabase(t)
				create += time.Since(t0)
			})
		}
	})
	t.Logf("NewDatabase: %v per call (create only), sequential, n=%d", create/n, n)

	t0 := time.Now()
	t.Run("parallel", func(t *testing.T) {
		for i := 0; i < n; i++ {
			t.Run(fmt.Sprint(i), func(t *testing.T) {
				t.Parallel()
				connect(t, pgtest.NewDatabase(t)).Exec(context.Background(), "SELECT 1")
			})
		}
	})
	t.Logf("NewDatabase+connect+drop: %v wall for %d parallel subtests", time.Since(t0), n)
}

func BenchmarkNewDatabase(b *testing.B) {
	pgtest.NewDatabase(b) // start the cluster outside the timed loop
	for b.Loop() {
		pgtest.NewDatabase(b) // dropped at cleanup, outside the timing
	}
}

// TestWithTestDatabaseURL reruns TestIsolationSequential in a child test
// binary pointed at a server by TEST_DATABASE_URL (URL form), and checks it
// used that server and dropped what it created.
func TestWithTestDatabaseURL(t *testing.T) {
	if os.Getenv("TEST_DATABASE_URL") != "" {
		t.Skip("already running against TEST_DATABASE_URL")
	}
	dir := t.TempDir()
	if os.Geteuid() == 0 {
		os.Chmod(filepath.Dir(dir), 0o711) // let the postgres user in; see pgcluster's tests
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	c, err := pgcluster.Start(context.Background(), pgcluster.Options{Dir: dir, Port: port})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()

	url := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	cmd := exec.Command(os.Args[0], "-test.run=^TestIsolationSequential$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), "TEST_DATABASE_URL="+url)
	out, err := cmd.CombinedOutput()
	t.Logf("child output:\n%s", out)
	if err != nil {
		t.Fatalf("child: %v", err)
	}
	if !strings.Contains(string(out), fmt.Sprintf("127.0.0.1:%d/t_", port)) {
		t.Errorf("child did not use TEST_DATABASE_URL's server")
	}
	var left int
	if err := connect(t, c.DSN("postgres")).QueryRow(context.Background(),
		"SELECT count(*) FROM pg_database WHERE datname LIKE 't\\_%'").Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Errorf("%d test databases left on the server", left)
	}
}
