//go:build !freeagent_noaudit

package store

// auditLog is true in every real build. The freeagent_noaudit build tag
// exists only so the benchmark can measure what the audit log costs.
const auditLog = true
