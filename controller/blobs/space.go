package blobs

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/freeagent-build/freeagent/internal/bytesize"
	"github.com/freeagent-build/freeagent/internal/config"
)

// ErrNoSpace is returned when the file store's disk is below its
// free-space floor: new builds are refused rather than filling the disk
// (and the built-in database on the same volume with it).
var ErrNoSpace = errors.New("insufficient storage")

// Floor is the least free space the file store keeps: Bytes, or Percent of
// its file system. The zero Floor keeps none.
type Floor struct {
	Bytes   uint64
	Percent float64
}

// ParseFloor reads a free-space floor: a size (config.ParseSize: "5GiB", "500MB", "1073741824")
// or a share of the disk ("5%"); "0" turns the floor off.
func ParseFloor(s string) (Floor, error) {
	s = strings.TrimSpace(s)
	if p, ok := strings.CutSuffix(s, "%"); ok {
		v, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil || v < 0 || v >= 100 {
			return Floor{}, fmt.Errorf("%q: want a percentage of the disk from 0%% to 99%%, such as 5%%", s)
		}
		return Floor{Percent: v}, nil
	}
	n, err := config.ParseSize(s)
	if err != nil {
		return Floor{}, fmt.Errorf("%w, or a percentage of the disk such as 5%%", err)
	}
	return Floor{Bytes: uint64(n)}, nil
}

func (f Floor) String() string {
	if f.Percent > 0 {
		return strconv.FormatFloat(f.Percent, 'f', -1, 64) + "%"
	}
	return bytesize.IEC(int64(f.Bytes))
}

// Of is the floor in bytes on a file system of total bytes.
func (f Floor) Of(total uint64) uint64 {
	if f.Percent > 0 {
		return uint64(float64(total) * f.Percent / 100)
	}
	return f.Bytes
}

// SpaceReporter is a Backend on a disk of this machine (Dir) that reports
// the space left on it.
type SpaceReporter interface {
	// Space returns the bytes available to this process and the file
	// system's size.
	Space() (avail, total uint64, err error)
}

// CheckFloor returns ErrNoSpace, naming the setting, when the store's disk
// has less than floor free; stores that report no space (S3) always pass.
func (s *Store) CheckFloor(floor Floor, setting string) error {
	sr, ok := s.b.(SpaceReporter)
	if !ok || floor == (Floor{}) {
		return nil
	}
	avail, total, err := sr.Space()
	if err != nil {
		return fmt.Errorf("check the file store's free space: %w", err)
	}
	if min := floor.Of(total); avail < min {
		return fmt.Errorf("%w: the file store's disk has %s free, below the floor of %s (%s); no new builds are taken until old files are deleted (--retain-artifacts, --retain-sources) or the disk grows",
			ErrNoSpace, bytesize.IEC(int64(avail)), floor, setting)
	}
	return nil
}
