//go:build !darwin

package tart

import "context"

// virtualizationVMs counts the VMs Virtualization.framework runs: none off
// macOS, where the fake Tart's VMs all show in `tart list`.
func virtualizationVMs(context.Context) (int, error) { return 0, nil }
