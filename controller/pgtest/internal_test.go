package pgtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestWithDatabase(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"postgres://u:p@h:5433/postgres?sslmode=disable", "postgres://u:p@h:5433/t_1?sslmode=disable"},
		{"postgresql://h/?dbname=other", "postgresql://h/t_1"},
		{"host=/tmp port=5432 dbname=postgres", "host=/tmp port=5432 dbname=postgres dbname=t_1"},
		{"host=/tmp", "host=/tmp dbname=t_1"},
	} {
		got := withDatabase(tc.in, "t_1")
		if got != tc.want {
			t.Errorf("withDatabase(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if cfg, err := pgx.ParseConfig(got); err != nil || cfg.Database != "t_1" {
			t.Errorf("%q parses to database %v, %v", got, cfg.Database, err)
		}
	}
}

func TestSweepLeakedDirs(t *testing.T) {
	parent := t.TempDir()
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	leaked := filepath.Join(parent, "pgtest-"+itoa(dead.Process.Pid)+"-123")
	mine := filepath.Join(parent, "pgtest-"+itoa(os.Getpid())+"-456")
	other := filepath.Join(parent, "pgtestish")
	for _, d := range []string{leaked, mine, other} {
		if err := os.MkdirAll(filepath.Join(d, "pgdata"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	sweepLeakedDirs(parent)
	if _, err := os.Stat(leaked); !os.IsNotExist(err) {
		t.Errorf("leaked dir of dead pid not removed")
	}
	for _, d := range []string{mine, other} {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("%s removed: %v", d, err)
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
