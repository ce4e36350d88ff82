// Package buildphase is the one definition of a build's phases (spin up,
// download source, install dependencies, prebuild, credentials, Gradle or
// pods + Xcode, upload, clean up) and of how a build log marks them.
// freeagent-vm writes a marker line as each phase starts; the dashboard's
// build page and expo-build's logs and status split the log with the same
// Parser, so they never disagree about where a phase begins or how long
// it took.
//
// A marker is a line of its own:
//
//	##[phase install 2025-05-01T10:00:03.25Z] Install dependencies
//
// The time is the VM's clock when the phase started. What the log holds
// before the first marker (the VM booting, the bootstrap authenticating) is
// the spin-up phase, which starts when the attempt started.
package buildphase

import (
	"bytes"
	"strings"
	"time"
)

// ID names a phase.
type ID string

// The phases, in the order a build usually runs them.
const (
	SpinUp       ID = "spin_up"
	Credentials  ID = "credentials"
	Source       ID = "source"
	Install      ID = "install"
	Prebuild     ID = "prebuild"
	Build        ID = "build"
	Upload       ID = "upload"
	CleanUp      ID = "clean_up"
	markerPrefix    = "##[phase "
)

var titles = map[ID]string{
	SpinUp:      "Spin up",
	Credentials: "Credentials",
	Source:      "Download source",
	Install:     "Install dependencies",
	Prebuild:    "Prebuild",
	Build:       "Build (Gradle / pods and Xcode)",
	Upload:      "Upload artifacts",
	CleanUp:     "Clean up",
}

// Title is how people read a phase; an unknown id reads as itself.
func (id ID) Title() string {
	if t, ok := titles[id]; ok {
		return t
	}
	return string(id)
}

// TailSeparator divides a failed build's error message from the last lines
// of its log, which the worker appends (the dashboard shows the lines from
// the log itself instead).
const TailSeparator = "\n--- last lines of the log ---\n"

// Marker is the log line (without its newline) that starts phase id at t.
func Marker(id ID, t time.Time) string {
	return markerPrefix + string(id) + " " + t.UTC().Format(time.RFC3339Nano) + "] " + id.Title()
}

// ParseMarker reads a marker line (without its newline).
func ParseMarker(line string) (ID, time.Time, bool) {
	rest, ok := strings.CutPrefix(strings.TrimRight(line, "\r"), markerPrefix)
	if !ok {
		return "", time.Time{}, false
	}
	head, _, ok := strings.Cut(rest, "]")
	if !ok {
		return "", time.Time{}, false
	}
	id, ts, ok := strings.Cut(head, " ")
	if !ok || id == "" || len(id) > 40 {
		return "", time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return "", time.Time{}, false
	}
	return ID(id), t, true
}

// Status is how a phase went.
type Status string

const (
	Running   Status = "running"
	Succeeded Status = "succeeded"
	Failed    Status = "failed"
	Cancelled Status = "cancelled"
)

// Phase is one phase of a build's log.
type Phase struct {
	ID    ID
	Title string
	// Start is when it started; End when the next one started (or the
	// build ended); End is zero while it runs.
	Start, End time.Time
	Status     Status
	// Offset is the byte offset of its first line in the log; Bytes its
	// length there.
	Offset, Bytes int64
	// Lines are its last lines (all of them unless Omitted > 0).
	Lines   []string
	Omitted int // earlier lines not kept
}

// Duration is how long the phase took (so far, at now, while it runs).
func (p Phase) Duration(now time.Time) time.Duration {
	end := p.End
	if end.IsZero() {
		end = now
	}
	if end.Before(p.Start) {
		return 0 // clocks of the host and the VM disagree
	}
	return end.Sub(p.Start)
}

// Parser splits a log into phases as it is written, keeping the last
// KeepLines lines of each, so a log of any size is read in bounded memory.
type Parser struct {
	// KeepLines bounds the lines kept per phase; 0 means 200.
	KeepLines int
	// MaxLine bounds a kept line's length; longer ones are cut. 0 means 4096.
	MaxLine int

	phases    []Phase
	partial   []byte // the line being read (bounded)
	offset    int64  // bytes written
	lineStart int64  // where the line being read starts
}

// NewParser starts a log whose spin-up phase began at start.
func NewParser(start time.Time) *Parser {
	return &Parser{phases: []Phase{{ID: SpinUp, Title: SpinUp.Title(), Start: start}}}
}

// Write takes the next bytes of the log. It never fails.
func (p *Parser) Write(b []byte) (int, error) {
	n := len(b)
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			p.hold(b)
			p.offset += int64(len(b))
			break
		}
		p.hold(b[:i])
		p.line(string(p.partial), p.lineStart)
		p.partial = p.partial[:0]
		p.offset += int64(i + 1)
		p.lineStart = p.offset
		b = b[i+1:]
	}
	return n, nil
}

// hold keeps b as part of the line being read, up to one byte past
// MaxLine (which cut then marks), and never less than a marker's length.
func (p *Parser) hold(b []byte) {
	room := max(p.maxLine(), 128) + 1 - len(p.partial)
	p.partial = append(p.partial, b[:max(0, min(len(b), room))]...)
}

func (p *Parser) maxLine() int {
	if p.MaxLine > 0 {
		return p.MaxLine
	}
	return 4096
}

func (p *Parser) keep() int {
	if p.KeepLines > 0 {
		return p.KeepLines
	}
	return 200
}

// line takes one whole line that started at byte offset at.
func (p *Parser) line(s string, at int64) {
	cur := &p.phases[len(p.phases)-1]
	if id, t, ok := ParseMarker(s); ok {
		cur.End, cur.Status = t, Succeeded
		cur.Bytes = at - cur.Offset
		p.phases = append(p.phases, Phase{ID: id, Title: id.Title(), Start: t, Offset: at})
		return
	}
	cur.Lines = append(cur.Lines, p.cut(strings.TrimRight(s, "\r")))
	if over := len(cur.Lines) - p.keep(); over > 0 {
		cur.Lines = append(cur.Lines[:0:0], cur.Lines[over:]...)
		cur.Omitted += over
	}
}

// cut bounds a kept line, marking where it was cut.
func (p *Parser) cut(s string) string {
	if len(s) > p.maxLine() {
		return s[:p.maxLine()] + "…"
	}
	return s
}

// Phases returns the phases so far. ended is when the build ended (zero
// while it runs); status is how it ended: the last phase takes it (Failed,
// Cancelled or Succeeded), or is Running. A phase with neither lines nor
// time (a spin-up the VM's first marker followed at once) is left out.
func (p *Parser) Phases(ended time.Time, status Status) []Phase {
	out := make([]Phase, 0, len(p.phases))
	for i, ph := range p.phases {
		if len(p.partial) > 0 && i == len(p.phases)-1 {
			ph.Lines = append(append([]string(nil), ph.Lines...), p.cut(string(p.partial)))
		}
		if i == len(p.phases)-1 {
			ph.Bytes = p.offset - ph.Offset
			ph.Status, ph.End = Running, time.Time{}
			if !ended.IsZero() {
				ph.Status, ph.End = status, ended
			}
		}
		if i == 0 && len(p.phases) > 1 && len(ph.Lines) == 0 && ph.Omitted == 0 && ph.Bytes == 0 {
			continue
		}
		out = append(out, ph)
	}
	return out
}
