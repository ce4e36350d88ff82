package hostsignals

import (
	"context"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// Read implements Reader on macOS: the power source and charge from
// `pmset -g batt`, the time since the owner's last input from
// `ioreg -c IOHIDSystem` when the idle rule is on, the thermal state from
// `pmset -g therm` when heat pauses builds (kept for thermalEvery while
// nominal), memory pressure from sysctl(3) and the free disk from statfs.
// None needs cgo or root. A check starts one to three processes: one on a
// Mac mini with the defaults (no battery, so no idle rule), two on a
// laptop, and `pmset -g therm` every 30 s while the Mac is cool.
func (sys *System) Read(ctx context.Context, rules Rules) (Signals, error) {
	var s Signals
	var errs []error
	if out, err := output(ctx, "/usr/bin/pmset", "-g", "batt"); err != nil {
		errs = append(errs, err)
	} else if p := ParsePmsetBatt(out); p.Known {
		s.OnBattery, s.HasBattery, s.BatteryPercent = p.OnBattery, p.HasBattery, p.Percent
	}
	if rules.idleMinutes(s) > 0 { // s knows the battery by now, which decides "auto"
		if out, err := output(ctx, "/usr/sbin/ioreg", "-c", "IOHIDSystem"); err != nil {
			errs = append(errs, err)
		} else if idle, ok := ParseIoregIdle(out); ok {
			s.IdleSeconds = &idle
		}
	}
	if rules.PauseThermal != "" {
		thermal, err := sys.thermal.get(thermalEvery, ThermalNominal, func() (Thermal, error) {
			out, err := output(ctx, "/usr/bin/pmset", "-g", "therm")
			return ParsePmsetTherm(out), err
		})
		s.Thermal = thermal
		errs = append(errs, err)
	}
	if level, err := unix.SysctlUint32("kern.memorystatus_vm_pressure_level"); err != nil {
		errs = append(errs, fmt.Errorf("sysctl kern.memorystatus_vm_pressure_level: %w", err))
	} else {
		s.MemoryPressure = MemoryPressureLevel(level)
	}
	errs = append(errs, sys.freeDisk(&s))
	return s, errors.Join(errs...)
}
