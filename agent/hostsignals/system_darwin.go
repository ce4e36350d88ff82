package hostsignals

import (
	"context"
	"errors"
)

// Read implements Reader on macOS: the power source and charge from
// `pmset -g batt`, the time since the owner's last input from
// `ioreg -c IOHIDSystem`, the thermal state from `pmset -g therm`, memory
// pressure from sysctl and the free disk from statfs. None needs cgo or
// root.
func (sys System) Read(ctx context.Context) (Signals, error) {
	var s Signals
	var errs []error
	if out, err := output(ctx, "/usr/bin/pmset", "-g", "batt"); err != nil {
		errs = append(errs, err)
	} else if p := ParsePmsetBatt(out); p.Known {
		s.OnBattery, s.HasBattery, s.BatteryPercent = p.OnBattery, p.HasBattery, p.Percent
	}
	if out, err := output(ctx, "/usr/sbin/ioreg", "-c", "IOHIDSystem"); err != nil {
		errs = append(errs, err)
	} else if idle, ok := ParseIoregIdle(out); ok {
		s.IdleSeconds = &idle
	}
	if out, err := output(ctx, "/usr/bin/pmset", "-g", "therm"); err != nil {
		errs = append(errs, err)
	} else {
		s.Thermal = ParsePmsetTherm(out)
	}
	if out, err := output(ctx, "/usr/sbin/sysctl", "-n", "kern.memorystatus_vm_pressure_level"); err != nil {
		errs = append(errs, err)
	} else {
		s.MemoryPressure = ParseMemoryPressure(out)
	}
	errs = append(errs, sys.freeDisk(&s))
	return s, errors.Join(errs...)
}
