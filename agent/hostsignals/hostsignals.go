// Package hostsignals reads what the Mac's owner would notice a build doing
// to their machine — running on battery, heating it, filling its disk,
// competing with them while they use it — and decides, from the owner's
// rules, whether the worker may start a build now. A running build is never
// judged: the rules only hold back the next one.
//
// The readings come from the system (Read: pmset, ioreg, sysctl(3) and
// statfs on macOS; /sys on Linux) or, when FREEAGENT_HOST_SIGNALS names a JSON
// file, from that file, re-read at every check (tests, and owners who want
// to script it). A reading that is not available is unknown, and an unknown
// reading never holds a build back.
package hostsignals

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
)

// Thermal is the host's thermal state, in the words of macOS's
// NSProcessInfo.thermalState; "" is unknown.
type Thermal string

const (
	ThermalNominal  Thermal = "nominal"
	ThermalFair     Thermal = "fair"
	ThermalSerious  Thermal = "serious"
	ThermalCritical Thermal = "critical"
)

// rank orders the states; unknown ranks lowest.
func (t Thermal) rank() int {
	switch t {
	case ThermalFair:
		return 1
	case ThermalSerious:
		return 2
	case ThermalCritical:
		return 3
	}
	return 0
}

// AtLeast reports whether t is limit or worse; an unknown t is not.
func (t Thermal) AtLeast(limit Thermal) bool {
	return limit != "" && t != "" && t.rank() >= limit.rank()
}

// Memory pressure levels (kern.memorystatus_vm_pressure_level); "" is unknown.
const (
	MemoryNormal   = "normal"
	MemoryWarn     = "warn"
	MemoryCritical = "critical"
)

// Signals is one reading of the host. Pointer fields are nil when unknown.
// Its JSON form is the FREEAGENT_HOST_SIGNALS file's.
type Signals struct {
	// OnBattery: the Mac runs on its battery or a UPS (not on the mains).
	OnBattery bool `json:"on_battery"`
	// HasBattery: the Mac has an internal battery (a laptop). A file that
	// gives battery_percent has one.
	HasBattery     bool    `json:"has_battery,omitempty"`
	BatteryPercent *int    `json:"battery_percent,omitempty"`
	IdleSeconds    *int64  `json:"idle_seconds,omitempty"` // since the last keyboard, mouse or trackpad input
	Thermal        Thermal `json:"thermal,omitempty"`
	FreeDiskBytes  *uint64 `json:"free_disk_bytes,omitempty"` // on the disk that holds the builds
	MemoryPressure string  `json:"memory_pressure,omitempty"`
}

// Reader reads the host's signals. It may leave unknown a signal that
// rules cannot use (the idle time when the idle rule is off, the thermal
// state when heat pauses nothing), to spare the host reading it.
type Reader interface {
	Read(ctx context.Context, rules Rules) (Signals, error)
}

// File reads the signals from a JSON file, afresh at every Read.
type File struct{ Path string }

// maxFile bounds the signals file: it is a handful of fields.
const maxFile = 64 << 10

// Read implements Reader; the file gives what it gives, whatever the rules.
func (f File) Read(context.Context, Rules) (Signals, error) {
	fh, err := os.Open(f.Path)
	if err != nil {
		return Signals{}, fmt.Errorf("read the host signals file (FREEAGENT_HOST_SIGNALS): %w", err)
	}
	defer fh.Close()
	b, err := io.ReadAll(io.LimitReader(fh, maxFile+1))
	if err != nil {
		return Signals{}, fmt.Errorf("read the host signals file %s: %w", f.Path, err)
	}
	if len(b) > maxFile {
		return Signals{}, fmt.Errorf("the host signals file %s is larger than %d KiB", f.Path, maxFile>>10)
	}
	var s Signals
	if err := json.Unmarshal(b, &s); err != nil {
		return Signals{}, fmt.Errorf("the host signals file %s is not valid JSON (want on_battery, battery_percent, idle_seconds, thermal, free_disk_bytes): %w", f.Path, err)
	}
	switch s.Thermal {
	case "", ThermalNominal, ThermalFair, ThermalSerious, ThermalCritical:
	default:
		return Signals{}, fmt.Errorf("the host signals file %s: thermal %q: want nominal, fair, serious or critical", f.Path, s.Thermal)
	}
	if s.BatteryPercent != nil {
		s.HasBattery = true
	}
	return s, nil
}

// ForHost is the reader of this host: the file when path is set
// (FREEAGENT_HOST_SIGNALS), else the system's readings, with the free disk
// measured on dataDir.
func ForHost(path, dataDir string) Reader {
	if path != "" {
		return File{Path: path}
	}
	return &System{DataDir: dataDir}
}
