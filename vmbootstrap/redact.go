package vmbootstrap

import (
	"bytes"
	"cmp"
	"slices"
	"strings"
)

// redactedMark replaces every occurrence of a secret in the build log.
const redactedMark = "[REDACTED]"

// minSecretLen: shorter "secrets" (a 3-character p12 password) would blank
// out ordinary text all over the log, and where they were blanked would
// spell them out: they are masked in no form at all (the farm refuses such
// variables; see api.MinSecretLength).
const minSecretLen = 4

// redactor removes known secrets, in every form a build's tools print them
// (see secretForms), from a byte stream that arrives in arbitrary pieces: a
// form split across two writes is still caught, because a tail that could
// be the start of one is held back until the next write (or the end of the
// stream). Not safe for concurrent use.
type redactor struct {
	forms [][]byte // longest first
	held  []byte
}

// add registers a secret in all its forms; short or known ones are ignored.
func (r *redactor) add(secret string) {
	if len(secret) < minSecretLen {
		return
	}
	for _, form := range secretForms(secret) {
		r.addForm(form)
	}
}

func (r *redactor) addForm(form string) {
	if strings.Contains(form, "\n") {
		// A form with a newline (only the raw one has any) is written over
		// several log lines; each line is registered.
		for _, line := range strings.Split(form, "\n") {
			r.addForm(line)
		}
		return
	}
	if len(form) < minSecretLen {
		return
	}
	for _, f := range r.forms {
		if string(f) == form {
			return
		}
	}
	r.forms = append(r.forms, []byte(form))
	// Longest first, so a form containing another is replaced whole.
	for i := len(r.forms) - 1; i > 0 && len(r.forms[i]) > len(r.forms[i-1]); i-- {
		r.forms[i], r.forms[i-1] = r.forms[i-1], r.forms[i]
	}
}

// write returns the part of held+p that is safe to emit now: masked, and
// ending before anything that may yet become part of a form (a form may
// hold a shorter one, such as a value's base64 its embedded part: the
// shorter is not masked alone while the longer may still complete).
func (r *redactor) write(p []byte) []byte {
	if len(r.forms) == 0 {
		return p
	}
	data := append(r.held, p...)
	r.held = nil
	spans := r.matches(data)
	cut := len(data) - r.partialSuffix(data)
	for _, s := range spans { // sorted and disjoint: at most one crosses the cut
		if s.start < cut && s.end > cut {
			cut = s.start
		}
	}
	r.held = append([]byte(nil), data[cut:]...)
	return mask(data[:cut], spans)
}

// flush returns whatever is held back (the stream ended).
func (r *redactor) flush() []byte {
	out := mask(r.held, r.matches(r.held))
	r.held = nil
	return out
}

// span is where a form occurs in the data: [start, end).
type span struct{ start, end int }

// matches returns where forms occur in data, overlapping occurrences
// merged, in order.
func (r *redactor) matches(data []byte) []span {
	var spans []span
	for _, f := range r.forms {
		for off := 0; ; {
			i := bytes.Index(data[off:], f)
			if i < 0 {
				break
			}
			spans = append(spans, span{off + i, off + i + len(f)})
			off += i + 1
		}
	}
	if len(spans) == 0 {
		return nil
	}
	slices.SortFunc(spans, func(a, b span) int { return cmp.Or(a.start-b.start, b.end-a.end) })
	merged := spans[:1]
	for _, s := range spans[1:] {
		if last := &merged[len(merged)-1]; s.start < last.end {
			last.end = max(last.end, s.end)
			continue
		}
		merged = append(merged, s)
	}
	return merged
}

// mask replaces the spans of data (those that end within it) with the mark.
func mask(data []byte, spans []span) []byte {
	if len(spans) == 0 {
		return data
	}
	out := make([]byte, 0, len(data))
	prev := 0
	for _, s := range spans {
		if s.end > len(data) {
			break
		}
		out = append(append(out, data[prev:s.start]...), redactedMark...)
		prev = s.end
	}
	return append(out, data[prev:]...)
}

// partialSuffix is the length of the longest suffix of data that is a
// proper prefix of a secret's form.
func (r *redactor) partialSuffix(data []byte) int {
	best := 0
	for _, s := range r.forms {
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
