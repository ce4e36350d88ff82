package buildphase

import (
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2025, 5, 1, 10, 0, 0, 0, time.UTC)

func sampleLog() string {
	return strings.Join([]string{
		"booting",
		Marker(Source, t0.Add(20*time.Second)),
		"▸ downloaded the source",
		Marker(Install, t0.Add(25*time.Second)),
		"npm ci",
		"added 1200 packages",
		Marker(Build, t0.Add(85*time.Second)),
		"> Task :app:compileReleaseKotlin FAILED",
		"e: Unresolved reference: foo",
		"▸ `gradlew :app:assembleRelease` failed with exit status 1",
	}, "\n") + "\n"
}

func TestMarkerRoundTrip(t *testing.T) {
	line := Marker(Install, t0.Add(1500*time.Millisecond))
	if line != "##[phase install 2025-05-01T10:00:01.5Z] Install dependencies" {
		t.Errorf("marker %q", line)
	}
	id, at, ok := ParseMarker(line + "\r")
	if !ok || id != Install || !at.Equal(t0.Add(1500*time.Millisecond)) {
		t.Errorf("parsed %v %v %v", id, at, ok)
	}
	for _, bad := range []string{"##[phase install] x", "##[phase  2025-05-01T10:00:01Z] x", "##[phase install yesterday] x",
		" ##[phase install 2025-05-01T10:00:01Z] x", "##[phase install 2025-05-01T10:00:01Z x", "plain line"} {
		if _, _, ok := ParseMarker(bad); ok {
			t.Errorf("%q parsed as a marker", bad)
		}
	}
}

func TestPhasesOfAFailedBuild(t *testing.T) {
	log := sampleLog()
	// Fed a byte at a time or all at once, the split is the same.
	for _, step := range []int{1, 7, len(log)} {
		p := NewParser(t0)
		for i := 0; i < len(log); i += step {
			p.Write([]byte(log[i:min(len(log), i+step)]))
		}
		ph := p.Phases(t0.Add(100*time.Second), Failed)
		if len(ph) != 4 {
			t.Fatalf("step %d: %d phases: %+v", step, len(ph), ph)
		}
		want := []struct {
			id     ID
			status Status
			took   time.Duration
			lines  int
		}{{SpinUp, Succeeded, 20 * time.Second, 1}, {Source, Succeeded, 5 * time.Second, 1}, {Install, Succeeded, time.Minute, 2}, {Build, Failed, 15 * time.Second, 3}}
		for i, w := range want {
			if ph[i].ID != w.id || ph[i].Status != w.status || ph[i].Duration(time.Time{}) != w.took || len(ph[i].Lines) != w.lines {
				t.Errorf("step %d phase %d: %+v, want %+v", step, i, ph[i], w)
			}
		}
		// Offsets and lengths cover the log exactly.
		var total int64
		for i, x := range ph {
			if x.Offset != total {
				t.Errorf("step %d phase %d starts at %d, want %d", step, i, x.Offset, total)
			}
			total += x.Bytes
		}
		if total != int64(len(log)) {
			t.Errorf("step %d: phases cover %d of %d bytes", step, total, len(log))
		}
		if ph[3].Lines[1] != "e: Unresolved reference: foo" || ph[3].Title != "Build (Gradle / pods and Xcode)" {
			t.Errorf("build phase %+v", ph[3])
		}
	}
}

func TestRunningAndBounded(t *testing.T) {
	p := NewParser(t0)
	p.KeepLines, p.MaxLine = 3, 10
	p.Write([]byte(Marker(Install, t0.Add(time.Second)) + "\n"))
	for i := range 10 {
		p.Write([]byte(strings.Repeat("x", i) + "\n"))
	}
	p.Write([]byte(strings.Repeat("y", 50))) // a line not ended yet
	ph := p.Phases(time.Time{}, Succeeded)
	// The empty spin-up (the first marker came at once) is left out.
	if len(ph) != 1 || ph[0].ID != Install || ph[0].Status != Running || !ph[0].End.IsZero() {
		t.Fatalf("phases %+v", ph)
	}
	l := ph[0].Lines
	// The last three whole lines, and the one being written, cut.
	if ph[0].Omitted != 7 || len(l) != 4 || l[0] != "xxxxxxx" || l[2] != "xxxxxxxxx" || l[3] != "yyyyyyyyyy…" {
		t.Errorf("kept %d lines, omitted %d: %q", len(l), ph[0].Omitted, l)
	}
	if d := ph[0].Duration(t0.Add(time.Minute)); d != 59*time.Second {
		t.Errorf("running duration %v", d)
	}
	// A marker of an unknown phase still splits, titled by its id.
	p.Write([]byte("\n" + Marker("custom_step", t0.Add(2*time.Minute)) + "\n"))
	if ph := p.Phases(t0.Add(3*time.Minute), Cancelled); len(ph) != 2 || ph[1].Title != "custom_step" || ph[1].Status != Cancelled || ph[0].Status != Succeeded {
		t.Errorf("phases %+v", ph)
	}
}
