package serve

import (
	"errors"
	"fmt"

	"github.com/freeagent-build/freeagent/internal/datadirlock"
)

// ErrDataDirInUse is returned by Start when another controller already
// serves the data directory with the built-in PostgreSQL.
var ErrDataDirInUse = errors.New("the data directory is in use")

// dataDirLockFile is the serving controller's claim on a data directory
// whose built-in PostgreSQL it runs (datadirlock), held while it serves.
// It notes the controller's URL once it listens, so a second start can name
// the controller that is running.
//
// Without it a second `serve` on the same directory attaches to the first
// one's database and serves beside it, and the workers of both knock each
// other off.
const dataDirLockFile = "controller.lock"

func lockDataDir(dir string) (*datadirlock.Lock, error) {
	l, err := datadirlock.Acquire(dir, dataDirLockFile)
	var held *datadirlock.HeldError
	if errors.As(err, &held) {
		return nil, fmt.Errorf("%w: %s; stop it first, use it, or give this controller another --data-dir", ErrDataDirInUse, describeHolder(held, dir))
	}
	return l, err
}

// describeHolder puts the holder of the lock into words.
func describeHolder(held *datadirlock.HeldError, dir string) string {
	who := "another controller"
	if held.PID > 0 {
		who += fmt.Sprintf(" (pid %d)", held.PID)
	}
	where := "is starting"
	if held.Note != "" {
		where = "listens on " + held.Note
	}
	return fmt.Sprintf("%s already serves %s with its built-in PostgreSQL and %s", who, dir, where)
}
