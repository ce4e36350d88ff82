//go:build freeagent_noaudit

package store

// auditLog is off: a benchmark-only build (see audit_on.go).
const auditLog = false
