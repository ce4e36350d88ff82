package vmbootstrap

import (
	"bytes"
	"strings"
)

// redactedMark replaces every occurrence of a secret in the build log.
const redactedMark = "[REDACTED]"

// minSecretLen: shorter "secrets" (a 3-character p12 password) would blank
// out ordinary text all over the log and protect nothing.
const minSecretLen = 4

// redactor removes known secrets from a byte stream that arrives in
// arbitrary pieces: a secret split across two writes is still caught,
// because a tail that could be the start of a secret is held back until the
// next write (or the end of the stream). Not safe for concurrent use.
type redactor struct {
	secrets [][]byte
	held    []byte
}

// add registers a secret; short or already known ones are ignored.
func (r *redactor) add(secret string) {
	if len(secret) < minSecretLen || strings.ContainsAny(secret, "\n") {
		// A secret with a newline cannot be split over the log's lines
		// the way it is written; its lines are registered separately.
		for _, line := range strings.Split(secret, "\n") {
			if len(line) >= minSecretLen && line != secret {
				r.add(line)
			}
		}
		return
	}
	for _, s := range r.secrets {
		if string(s) == secret {
			return
		}
	}
	r.secrets = append(r.secrets, []byte(secret))
	// Longest first, so a secret containing another is replaced whole.
	for i := len(r.secrets) - 1; i > 0 && len(r.secrets[i]) > len(r.secrets[i-1]); i-- {
		r.secrets[i], r.secrets[i-1] = r.secrets[i-1], r.secrets[i]
	}
}

// write returns the part of held+p that is safe to emit now.
func (r *redactor) write(p []byte) []byte {
	if len(r.secrets) == 0 {
		if len(r.held) == 0 {
			return p
		}
		out := append(r.held, p...)
		r.held = nil
		return out
	}
	data := append(r.held, p...)
	r.held = nil
	data = r.replace(data)
	keep := r.partialSuffix(data)
	if keep > 0 {
		r.held = append([]byte(nil), data[len(data)-keep:]...)
		data = data[:len(data)-keep]
	}
	return data
}

// flush returns whatever is held back (the stream ended).
func (r *redactor) flush() []byte {
	out := r.replace(r.held)
	r.held = nil
	return out
}

func (r *redactor) replace(data []byte) []byte {
	for _, s := range r.secrets {
		if bytes.Contains(data, s) {
			data = bytes.ReplaceAll(data, s, []byte(redactedMark))
		}
	}
	return data
}

// partialSuffix is the length of the longest suffix of data that is a
// proper prefix of a secret.
func (r *redactor) partialSuffix(data []byte) int {
	best := 0
	for _, s := range r.secrets {
		n := min(len(s)-1, len(data))
		for k := n; k > best; k-- {
			if bytes.HasPrefix(s, data[len(data)-k:]) {
				best = k
				break
			}
		}
	}
	return best
}

// tail keeps the last lines of a stream for error reports.
type tail struct {
	max     int
	lines   []string // ring, oldest first after ordering
	start   int
	partial []byte
}

const maxTailLine = 2000

func newTail(lines int) *tail { return &tail{max: lines} }

func (t *tail) write(p []byte) {
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			t.partial = appendCapped(t.partial, p)
			return
		}
		t.partial = appendCapped(t.partial, p[:i])
		t.push(string(bytes.TrimRight(t.partial, "\r")))
		t.partial = t.partial[:0]
		p = p[i+1:]
	}
}

func appendCapped(dst, p []byte) []byte {
	if room := maxTailLine - len(dst); room < len(p) {
		p = p[:max(room, 0)]
	}
	return append(dst, p...)
}

func (t *tail) push(line string) {
	if t.max <= 0 {
		return
	}
	if len(t.lines) < t.max {
		t.lines = append(t.lines, line)
		return
	}
	t.lines[t.start] = line
	t.start = (t.start + 1) % t.max
}

// String returns the kept lines, the unfinished one last.
func (t *tail) String() string {
	var b strings.Builder
	for i := range t.lines {
		b.WriteString(t.lines[(t.start+i)%len(t.lines)])
		b.WriteByte('\n')
	}
	b.Write(t.partial)
	return strings.TrimRight(b.String(), "\n")
}
