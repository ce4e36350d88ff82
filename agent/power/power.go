// Package power keeps the Mac awake while builds run. The agent reports
// when it becomes busy (its first build starts) and idle (its last build
// ends); on macOS the host then holds a power assertion, elsewhere nothing
// happens. A Mac that idles to sleep mid-build stalls the VM, misses the
// build's heartbeats and loses the build.
package power

// Assertion is told whether builds are running. SetBusy is idempotent: only
// a change from idle to busy or back does anything.
type Assertion interface {
	SetBusy(busy bool) error
}

// None is the Assertion of hosts that need none (Linux, with the local
// driver).
type None struct{}

// SetBusy does nothing.
func (None) SetBusy(bool) error { return nil }
