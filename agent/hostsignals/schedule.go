package hostsignals

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Schedule is the weekly times the owner lends the Mac to builds, in local
// time: windows such as "Mon-Fri 22:00-07:00, Sat-Sun 00:00-24:00". A
// window that ends at or before its start crosses midnight into the next
// day; it belongs to the day it starts. The zero Schedule is always open.
type Schedule struct {
	windows []window
	text    string
}

type window struct {
	days       [7]bool // by time.Weekday
	start, end int     // minutes since midnight; end may be 24*60
}

func (w window) length() time.Duration {
	d := w.end - w.start
	if d <= 0 {
		d += 24 * 60
	}
	return time.Duration(d) * time.Minute
}

var dayNames = map[string]time.Weekday{"sun": time.Sunday, "mon": time.Monday, "tue": time.Tuesday,
	"wed": time.Wednesday, "thu": time.Thursday, "fri": time.Friday, "sat": time.Saturday}

// ParseSchedule reads a schedule: windows separated by commas, each some
// days (Mon, Mon-Fri, Fri-Mon, "Sat Sun", or daily) and a time range
// HH:MM-HH:MM (24:00 ends a day). Empty text is the zero Schedule.
func ParseSchedule(text string) (Schedule, error) {
	s := Schedule{text: strings.TrimSpace(text)}
	if s.text == "" {
		return Schedule{}, nil
	}
	for _, part := range strings.Split(s.text, ",") {
		fields := strings.Fields(part)
		if len(fields) < 2 {
			return Schedule{}, fmt.Errorf("schedule %q: window %q: want days and a time range, e.g. \"Mon-Fri 22:00-07:00\"", text, strings.TrimSpace(part))
		}
		var w window
		for _, d := range fields[:len(fields)-1] {
			if err := w.addDays(d); err != nil {
				return Schedule{}, fmt.Errorf("schedule %q: %w", text, err)
			}
		}
		if err := w.setTimes(fields[len(fields)-1]); err != nil {
			return Schedule{}, fmt.Errorf("schedule %q: %w", text, err)
		}
		s.windows = append(s.windows, w)
	}
	return s, nil
}

func (w *window) addDays(spec string) error {
	spec = strings.ToLower(spec)
	if spec == "daily" || spec == "every-day" {
		for i := range w.days {
			w.days[i] = true
		}
		return nil
	}
	from, to, isRange := strings.Cut(spec, "-")
	a, ok1 := dayNames[from]
	b, ok2 := dayNames[to]
	if !isRange {
		b, ok2 = a, ok1
	}
	if !ok1 || !ok2 {
		return fmt.Errorf("days %q: use Mon, Tue, Wed, Thu, Fri, Sat, Sun, a range such as Mon-Fri, or daily", spec)
	}
	for d := a; ; d = (d + 1) % 7 {
		w.days[d] = true
		if d == b {
			return nil
		}
	}
}

func (w *window) setTimes(spec string) error {
	spec = strings.ReplaceAll(spec, "–", "-") // the en dash the menu shows
	from, to, ok := strings.Cut(spec, "-")
	var err1, err2 error
	w.start, err1 = clock(from, false)
	w.end, err2 = clock(to, true)
	switch {
	case !ok || err1 != nil || err2 != nil:
		return fmt.Errorf("times %q: want HH:MM-HH:MM, e.g. 22:00-07:00", spec)
	case w.start == w.end:
		return fmt.Errorf("times %q: the window is empty; 00:00-24:00 is a whole day", spec)
	}
	return nil
}

// clock reads HH:MM as minutes since midnight; 24:00 only as an end.
func clock(s string, end bool) (int, error) {
	h, m, ok := strings.Cut(s, ":")
	hh, err1 := strconv.Atoi(h)
	mm, err2 := strconv.Atoi(m)
	if !ok || err1 != nil || err2 != nil || len(m) != 2 || hh < 0 || mm < 0 || mm > 59 || hh > 24 || (hh == 24 && (mm != 0 || !end)) {
		return 0, fmt.Errorf("bad time %q", s)
	}
	return hh*60 + mm, nil
}

// IsZero reports whether the schedule is always open.
func (s Schedule) IsZero() bool { return len(s.windows) == 0 }

// String is the schedule as the owner wrote it.
func (s Schedule) String() string { return s.text }

// Open reports whether now falls in a window.
func (s Schedule) Open(now time.Time) bool {
	if s.IsZero() {
		return true
	}
	for _, w := range s.windows {
		for back := 0; back <= 1; back++ { // a window that began yesterday may still run
			start := w.startOn(now.AddDate(0, 0, -back), now.Location())
			if start.IsZero() {
				continue
			}
			if !now.Before(start) && now.Before(start.Add(w.length())) {
				return true
			}
		}
	}
	return false
}

// startOn is the window's start on day's date, or zero when it does not
// run that day.
func (w window) startOn(day time.Time, loc *time.Location) time.Time {
	if !w.days[day.Weekday()] {
		return time.Time{}
	}
	y, m, d := day.Date()
	return time.Date(y, m, d, w.start/60, w.start%60, 0, 0, loc)
}

// Next is the next window to open after now (for "outside schedule
// 22:00–07:00"), as its times; "" when the schedule is always open.
func (s Schedule) Next(now time.Time) string {
	var best time.Time
	var times string
	for _, w := range s.windows {
		for ahead := 0; ahead <= 7; ahead++ {
			start := w.startOn(now.AddDate(0, 0, ahead), now.Location())
			if start.IsZero() || !start.After(now) {
				continue
			}
			if best.IsZero() || start.Before(best) {
				best, times = start, fmt.Sprintf("%02d:%02d–%02d:%02d", w.start/60, w.start%60, w.end/60, w.end%60)
			}
			break
		}
	}
	return times
}
