package hostsignals

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
)

// Defaults of the owner's rules.
const (
	// DefaultIdleMinutes is how long a laptop's owner must have left it
	// alone before a build starts. Desktops (no battery) default to 0: a
	// Mac mini in a cupboard is "used" by nobody.
	DefaultIdleMinutes = 10
	// DefaultMinBatteryPercent is the charge below which no build starts on
	// battery, once the owner allows building on battery at all.
	DefaultMinBatteryPercent = 50
)

// IdleAuto asks for the default idle rule: DefaultIdleMinutes on a Mac
// with a battery, off on one without.
const IdleAuto = -1

// Rules are the owner's conditions for starting a build (agent.conf and
// Preferences). The zero Rules start builds on battery at any charge and
// hold nothing back.
type Rules struct {
	// NoBuildsOnBattery: no build starts while the Mac runs on its battery.
	NoBuildsOnBattery bool
	// MinBatteryPercent: on battery, builds start only at this charge or
	// more (when NoBuildsOnBattery is false).
	MinBatteryPercent int
	// IdleMinutes: builds start only when the owner has not touched the Mac
	// for this long; 0 is off, IdleAuto the default for the host.
	IdleMinutes int
	// PauseThermal: no build starts at this thermal state or worse; ""
	// ignores the thermal state.
	PauseThermal Thermal
	// MinFreeBytes: no build starts with less free disk than this.
	MinFreeBytes uint64
	// Schedule: builds start only inside it (zero: any time).
	Schedule Schedule
}

// idleMinutes resolves IdleAuto for the host.
func (r Rules) idleMinutes(s Signals) int {
	if r.IdleMinutes != IdleAuto {
		return r.IdleMinutes
	}
	if s.HasBattery {
		return DefaultIdleMinutes
	}
	return 0
}

// Reasons says why no build may start now, most pressing first; none
// when one may. An unknown signal never holds a build back.
func (r Rules) Reasons(s Signals, now time.Time) []string {
	var out []string
	switch {
	case !s.OnBattery:
	case r.NoBuildsOnBattery:
		out = append(out, "on battery")
	case s.BatteryPercent != nil && *s.BatteryPercent < r.MinBatteryPercent:
		out = append(out, fmt.Sprintf("on battery at %d%% (below %d%%)", *s.BatteryPercent, r.MinBatteryPercent))
	}
	if s.Thermal.AtLeast(r.PauseThermal) {
		out = append(out, "thermal: "+string(s.Thermal))
	}
	if s.MemoryPressure == MemoryCritical {
		out = append(out, "memory pressure: critical")
	}
	if s.FreeDiskBytes != nil && *s.FreeDiskBytes < r.MinFreeBytes {
		out = append(out, fmt.Sprintf("disk below %s (%s free)", gb(r.MinFreeBytes), gb(*s.FreeDiskBytes)))
	}
	if m := r.idleMinutes(s); m > 0 && s.IdleSeconds != nil && *s.IdleSeconds < int64(m)*60 {
		out = append(out, "you are using this Mac")
	}
	if !r.Schedule.Open(now) {
		out = append(out, "outside schedule "+r.Schedule.Next(now))
	}
	return out
}

// gb writes a size as the disk check does: whole GB when exact.
func gb(n uint64) string {
	if n%(1<<30) == 0 {
		return fmt.Sprintf("%d GB", n>>30)
	}
	return fmt.Sprintf("%.1f GB", float64(n)/(1<<30))
}

// Gate applies the rules to fresh readings: the agent asks it, every few
// seconds, whether a build may start.
type Gate struct {
	Reader Reader
	Rules  Rules
	Now    func() time.Time // nil: time.Now (tests set a fake clock)
	Log    logrus.FieldLogger

	mu      sync.Mutex
	lastErr string
}

// Verdict is one check: what was read and why no build may start.
type Verdict struct {
	Signals Signals
	Reasons []string
	Err     error // readings that failed (they count as unknown)
}

// Check reads the host and applies the rules.
func (g *Gate) Check(ctx context.Context) Verdict {
	s, err := g.Reader.Read(ctx, g.Rules)
	now := time.Now()
	if g.Now != nil {
		now = g.Now()
	}
	return Verdict{Signals: s, Reasons: g.Rules.Reasons(s, now), Err: err}
}

// PauseReason is the most pressing reason no build may start now, "" when
// one may. A failed reading is logged once per change of the error.
func (g *Gate) PauseReason(ctx context.Context) string {
	v := g.Check(ctx)
	msg := ""
	if v.Err != nil {
		msg = v.Err.Error()
	}
	g.mu.Lock()
	changed := msg != g.lastErr
	g.lastErr = msg
	g.mu.Unlock()
	if changed && msg != "" && g.Log != nil {
		g.Log.WithError(v.Err).Warn("could not read some host signals; they are treated as unknown and hold no build back")
	}
	if len(v.Reasons) == 0 {
		return ""
	}
	return v.Reasons[0]
}

// ParseIdleMinutes reads the idle rule as agent.conf and Preferences write
// it: a whole number of minutes (0: off), or "auto" or "" (IdleAuto).
func ParseIdleMinutes(s string) (int, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "auto" {
		return IdleAuto, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > 24*60 {
		return 0, fmt.Errorf("idle minutes %q: want a whole number of minutes from 0 (off) to 1440, or auto", s)
	}
	return n, nil
}

// ParseThermalLimit reads the thermal rule: serious, critical, or off
// ("", never pause for heat). Empty is the default, serious.
func ParseThermalLimit(s string) (Thermal, error) {
	switch t := Thermal(strings.TrimSpace(s)); t {
	case "", ThermalSerious:
		return ThermalSerious, nil
	case ThermalCritical:
		return t, nil
	case "off":
		return "", nil
	}
	return "", fmt.Errorf("thermal limit %q: use serious, critical or off", s)
}
