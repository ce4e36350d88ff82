//go:build !darwin

package power

// ForHost is None: only macOS sleeps under a worker (Linux runs the local
// driver, for development).
func ForHost() Assertion { return None{} }
