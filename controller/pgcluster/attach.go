//go:build unix

package pgcluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Attach returns a DSN for database dbname on a cluster that another process
// (a running controller) already serves from dir, read from its
// postmaster.pid. ok is false when no live, ready server runs there. It lets
// `keys create --data-dir` work while `serve` is up.
func Attach(dir, dbname string) (dsn string, ok bool) {
	b, err := os.ReadFile(filepath.Join(dir, "pgdata", "postmaster.pid"))
	if err != nil {
		return "", false
	}
	// Lines: pid, data dir, start time, port, socket dir, listen address, shmem key, status.
	lines := strings.Split(string(b), "\n")
	if len(lines) < 8 || strings.TrimSpace(lines[7]) != "ready" {
		return "", false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(lines[0]))
	if err != nil || !processAlive(pid) {
		return "", false
	}
	port, err := strconv.Atoi(strings.TrimSpace(lines[3]))
	if err != nil {
		return "", false
	}
	host := strings.TrimSpace(lines[4])
	if host == "" {
		host = strings.TrimSpace(lines[5])
	}
	if host == "" || host == "*" {
		host = "127.0.0.1"
	}
	return fmt.Sprintf("host=%s port=%d user=postgres dbname=%s sslmode=disable", quoteDSN(host), port, quoteDSN(dbname)), true
}
