//go:build !darwin

package hostsignals

import (
	"context"
	"errors"
)

// Read implements Reader off macOS (Linux, with the local driver): the
// power source and charge from the power-supply class in /sys, and the
// free disk. The owner's idle time and the thermal state are unknown,
// which never holds a build back.
func (sys *System) Read(ctx context.Context, _ Rules) (Signals, error) {
	var s Signals
	dir := sys.PowerSupplies
	if dir == "" {
		dir = "/sys/class/power_supply"
	}
	err := ReadPowerSupplies(dir, &s)
	return s, errors.Join(err, sys.freeDisk(&s))
}
