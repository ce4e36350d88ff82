package serve

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// ErrDataDirInUse is returned by Start when another controller already
// serves the data directory with the built-in PostgreSQL.
var ErrDataDirInUse = errors.New("the data directory is in use")

// dataDirLock is the serving controller's claim on a data directory whose
// built-in PostgreSQL it runs: an flock on DataDir/controller.lock, held
// while it serves, and released by the kernel however the process ends (a
// killed controller leaves no lock behind, only a file whose content no
// longer counts). The file says who holds it: its pid, then its URL once it
// listens, so a second start can name the controller that is running.
//
// Without it a second `serve` on the same directory attaches to the first
// one's database and serves beside it, and the workers of both knock each
// other off.
type dataDirLock struct{ f *os.File }

const dataDirLockFile = "controller.lock"

func lockDataDir(dir string) (*dataDirLock, error) {
	name := filepath.Join(dir, dataDirLockFile)
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", name, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := io.ReadAll(io.LimitReader(f, 4096))
		f.Close()
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("lock %s: %w", name, err)
		}
		return nil, fmt.Errorf("%w: %s; stop it first, use it, or give this controller another --data-dir", ErrDataDirInUse, describeHolder(string(holder), dir))
	}
	l := &dataDirLock{f: f}
	if err := l.write(""); err != nil {
		l.release()
		return nil, err
	}
	return l, nil
}

// describeHolder turns the lock file's content ("pid\nURL\n") into words.
func describeHolder(content, dir string) string {
	pid, url, _ := strings.Cut(strings.TrimSpace(content), "\n")
	who := "another controller"
	if _, err := strconv.Atoi(pid); err == nil {
		who += " (pid " + pid + ")"
	}
	where := "is starting"
	if url = strings.TrimSpace(url); url != "" {
		where = "listens on " + url
	}
	return fmt.Sprintf("%s already serves %s with its built-in PostgreSQL and %s", who, dir, where)
}

// write records this process and, once known, its URL.
func (l *dataDirLock) write(url string) error {
	if err := l.f.Truncate(0); err != nil {
		return fmt.Errorf("write %s: %w", l.f.Name(), err)
	}
	if _, err := l.f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"+url+"\n"), 0); err != nil {
		return fmt.Errorf("write %s: %w", l.f.Name(), err)
	}
	return nil
}

func (l *dataDirLock) release() {
	if l != nil {
		l.f.Close() // closing the last descriptor drops the flock
	}
}
