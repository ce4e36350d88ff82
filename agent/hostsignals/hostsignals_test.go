package hostsignals

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func read(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func intp(n int) *int { return &n }

func TestParsePmsetBatt(t *testing.T) {
	for _, c := range []struct {
		file              string
		onBattery, laptop bool
		percent           *int
	}{
		{"pmset-batt-ac-charged.txt", false, true, intp(100)},
		{"pmset-batt-ac-charging.txt", false, true, intp(34)},
		{"pmset-batt-ac-not-charging.txt", false, true, intp(80)},
		{"pmset-batt-battery.txt", true, true, intp(78)},
		{"pmset-batt-battery-no-estimate.txt", true, true, intp(43)},
		{"pmset-batt-mac-mini.txt", false, false, nil},
		// A Mac mini carried by its UPS: on battery, and the UPS's charge is not the Mac's.
		{"pmset-batt-mac-mini-ups.txt", true, false, nil},
		// A laptop beside a UPS: the internal battery's charge counts.
		{"pmset-batt-laptop-with-ups.txt", true, true, intp(61)},
	} {
		p := ParsePmsetBatt(read(t, c.file))
		if !p.Known || p.OnBattery != c.onBattery || p.HasBattery != c.laptop || (p.Percent == nil) != (c.percent == nil) ||
			(p.Percent != nil && *p.Percent != *c.percent) {
			t.Errorf("%s: %+v (percent %v), want on battery %v, laptop %v, percent %v", c.file, p, deref(p.Percent), c.onBattery, c.laptop, deref(c.percent))
		}
	}
	if p := ParsePmsetBatt("pmset: command failed\n"); p.Known {
		t.Errorf("garbage parsed as a power source: %+v", p)
	}
}

func deref(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}

func TestParseIoregIdle(t *testing.T) {
	for file, want := range map[string]int64{
		"ioreg-iohidsystem.txt":      0, // 0.7 s: the owner is typing
		"ioreg-iohidsystem-away.txt": 1843,
		"ioreg-iohidsystem-two.txt":  45, // the most recent input of two HID systems
	} {
		got, ok := ParseIoregIdle(read(t, file))
		if !ok || got != want {
			t.Errorf("%s: %d s (ok %v), want %d s", file, got, ok, want)
		}
	}
	if _, ok := ParseIoregIdle(`+-o IOHIDSystem  <class IOHIDSystem>` + "\n{\n  \"IOClass\" = \"IOHIDSystem\"\n}\n"); ok {
		t.Error("no HIDIdleTime, yet a reading")
	}
}

func TestParsePmsetTherm(t *testing.T) {
	for file, want := range map[string]Thermal{
		"pmset-therm-none.txt":           ThermalNominal,
		"pmset-therm-nominal-cpu.txt":    ThermalNominal,
		"pmset-therm-speed-limit-62.txt": ThermalSerious,
		"pmset-therm-level-danger.txt":   ThermalSerious,
		"pmset-therm-crisis.txt":         ThermalCritical,
	} {
		if got := ParsePmsetTherm(read(t, file)); got != want {
			t.Errorf("%s: %q, want %q", file, got, want)
		}
	}
	if got := ParsePmsetTherm("CPU_Speed_Limit = 85\n"); got != ThermalFair {
		t.Errorf("speed limit 85: %q", got)
	}
	if got := ParsePmsetTherm("usage: pmset ...\n"); got != "" {
		t.Errorf("unknown output: %q", got)
	}
}

func TestMemoryPressureLevel(t *testing.T) {
	for in, want := range map[uint32]string{1: MemoryNormal, 2: MemoryWarn, 4: MemoryCritical, 0: "", 3: ""} {
		if got := MemoryPressureLevel(in); got != want {
			t.Errorf("%d: %q, want %q", in, got, want)
		}
	}
}

func TestReadPowerSupplies(t *testing.T) {
	supply := func(root, name string, files map[string]string) {
		dir := filepath.Join(root, name)
		os.MkdirAll(dir, 0o755)
		for k, v := range files {
			os.WriteFile(filepath.Join(dir, k), []byte(v+"\n"), 0o644)
		}
	}
	laptop := t.TempDir()
	supply(laptop, "AC", map[string]string{"type": "Mains", "online": "0"})
	supply(laptop, "BAT0", map[string]string{"type": "Battery", "capacity": "41", "status": "Discharging"})
	supply(laptop, "hidpp_battery_0", map[string]string{"type": "Battery", "scope": "Device", "capacity": "5", "status": "Discharging"})
	var s Signals
	if err := ReadPowerSupplies(laptop, &s); err != nil || !s.OnBattery || !s.HasBattery || s.BatteryPercent == nil || *s.BatteryPercent != 41 {
		t.Fatalf("laptop unplugged: %+v %v", s, err)
	}
	os.WriteFile(filepath.Join(laptop, "AC", "online"), []byte("1\n"), 0o644)
	s = Signals{}
	if err := ReadPowerSupplies(laptop, &s); err != nil || s.OnBattery || !s.HasBattery {
		t.Fatalf("laptop plugged in: %+v %v", s, err)
	}
	s = Signals{}
	if err := ReadPowerSupplies(filepath.Join(t.TempDir(), "none"), &s); err != nil || s.OnBattery || s.HasBattery {
		t.Fatalf("a server without supplies: %+v %v", s, err)
	}
}

func TestSystemReadsFreeDisk(t *testing.T) {
	if _, err := os.Stat("/usr/bin/pmset"); err == nil {
		t.Skip("macOS: the system readings are the Mac's")
	}
	sys := &System{DataDir: t.TempDir(), PowerSupplies: t.TempDir()}
	s, err := sys.Read(context.Background(), Rules{IdleMinutes: 10, PauseThermal: ThermalSerious})
	if err != nil || s.FreeDiskBytes == nil || *s.FreeDiskBytes == 0 || s.IdleSeconds != nil || s.Thermal != "" {
		t.Fatalf("%+v %v: want the free disk, and idle and thermal unknown", s, err)
	}
}

func TestFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "signals.json")
	os.WriteFile(path, []byte(`{"on_battery": true, "battery_percent": 30, "idle_seconds": 12, "thermal": "serious", "free_disk_bytes": 1073741824}`), 0o600)
	s, err := File{Path: path}.Read(context.Background(), Rules{})
	if err != nil || !s.OnBattery || !s.HasBattery || *s.BatteryPercent != 30 || *s.IdleSeconds != 12 || s.Thermal != ThermalSerious || *s.FreeDiskBytes != 1<<30 {
		t.Fatalf("%+v %v", s, err)
	}
	os.WriteFile(path, []byte(`{"thermal": "toasty"}`), 0o600)
	if _, err := (File{Path: path}).Read(context.Background(), Rules{}); err == nil || !strings.Contains(err.Error(), "nominal, fair, serious or critical") {
		t.Fatalf("a bad thermal state: %v", err)
	}
	os.WriteFile(path, []byte(strings.Repeat(" ", maxFile+1)), 0o600)
	if _, err := (File{Path: path}).Read(context.Background(), Rules{}); err == nil || !strings.Contains(err.Error(), "larger") {
		t.Fatalf("an oversized file: %v", err)
	}
}

func TestSchedule(t *testing.T) {
	s, err := ParseSchedule("Mon-Fri 22:00-07:00, Sat-Sun 00:00-24:00")
	if err != nil {
		t.Fatal(err)
	}
	at := func(day, hhmm string) time.Time {
		// 2026-11-23 is a Monday.
		d := map[string]int{"Mon": 23, "Tue": 24, "Wed": 25, "Thu": 26, "Fri": 27, "Sat": 28, "Sun": 29}[day]
		tm, err := time.ParseInLocation("2006-01-02 15:04", "2026-11-"+string(rune('0'+d/10))+string(rune('0'+d%10))+" "+hhmm, time.Local)
		if err != nil {
			t.Fatal(err)
		}
		return tm
	}
	for _, c := range []struct {
		day, at string
		open    bool
		next    string
	}{
		{"Mon", "21:59", false, "22:00–07:00"},
		{"Mon", "22:00", true, ""},
		{"Tue", "06:59", true, ""}, // Monday's window, past midnight
		{"Tue", "07:00", false, "22:00–07:00"},
		{"Tue", "12:00", false, "22:00–07:00"},
		{"Sat", "07:30", true, ""}, // Friday's window is over, Saturday's all-day one runs
		{"Sun", "23:59", true, ""},
		{"Mon", "06:00", false, "22:00–07:00"}, // Sunday's window ended at midnight; Sunday night is not Monday's
	} {
		now := at(c.day, c.at)
		if got := s.Open(now); got != c.open {
			t.Errorf("%s %s: open %v, want %v", c.day, c.at, got, c.open)
		}
		if !c.open {
			if got := s.Next(now); got != c.next {
				t.Errorf("%s %s: next %q, want %q", c.day, c.at, got, c.next)
			}
		}
	}
	if got := s.Next(at("Fri", "12:00")); got != "22:00–07:00" {
		t.Errorf("Friday noon: next %q", got)
	}
	if s2, _ := ParseSchedule("Fri-Mon 20:00-23:30"); !s2.Open(at("Sun", "21:00")) || s2.Open(at("Wed", "21:00")) {
		t.Error("a wrapping day range")
	}
	if s3, _ := ParseSchedule("Sat Sun 09:00–17:00"); !s3.Open(at("Sun", "09:00")) || s3.Open(at("Sun", "17:00")) {
		t.Error("listed days and an en dash")
	}
	if zero, _ := ParseSchedule("  "); !zero.IsZero() || !zero.Open(at("Tue", "12:00")) {
		t.Error("an empty schedule is always open")
	}
	for _, bad := range []string{"22:00-07:00", "Mon-Fri", "Mon-Fry 22:00-07:00", "Mon 25:00-07:00", "Mon 09:00-09:00", "Mon 24:00-07:00", "Mon 9:0-10:00"} {
		if _, err := ParseSchedule(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestRules(t *testing.T) {
	idle := func(s int64) *int64 { return &s }
	free := func(n uint64) *uint64 { return &n }
	night, _ := ParseSchedule("Mon-Fri 22:00-07:00")
	monNoon := time.Date(2026, 11, 23, 12, 0, 0, 0, time.Local)
	defaults := Rules{NoBuildsOnBattery: true, IdleMinutes: IdleAuto, PauseThermal: ThermalSerious, MinFreeBytes: 30 << 30}
	for _, c := range []struct {
		name  string
		rules Rules
		s     Signals
		want  string // joined reasons
	}{
		{"desktop on mains", defaults, Signals{FreeDiskBytes: free(100 << 30), IdleSeconds: idle(3)}, ""},
		{"laptop in use", defaults, Signals{HasBattery: true, IdleSeconds: idle(30)}, "you are using this Mac"},
		{"laptop left alone", defaults, Signals{HasBattery: true, IdleSeconds: idle(600)}, ""},
		{"idle unknown", defaults, Signals{HasBattery: true}, ""},
		{"idle rule off", Rules{IdleMinutes: 0}, Signals{HasBattery: true, IdleSeconds: idle(1)}, ""},
		{"desktop with an idle rule", Rules{IdleMinutes: 5}, Signals{IdleSeconds: idle(60)}, "you are using this Mac"},
		{"on battery", defaults, Signals{OnBattery: true, HasBattery: true, BatteryPercent: intp(90), IdleSeconds: idle(9000)}, "on battery"},
		{"battery allowed, low", Rules{MinBatteryPercent: 50}, Signals{OnBattery: true, BatteryPercent: intp(32)}, "on battery at 32% (below 50%)"},
		{"battery allowed, charged", Rules{MinBatteryPercent: 50}, Signals{OnBattery: true, BatteryPercent: intp(80)}, ""},
		{"thermal serious", defaults, Signals{Thermal: ThermalSerious}, "thermal: serious"},
		{"thermal fair", defaults, Signals{Thermal: ThermalFair}, ""},
		{"thermal ignored", Rules{}, Signals{Thermal: ThermalCritical}, ""},
		{"critical only", Rules{PauseThermal: ThermalCritical}, Signals{Thermal: ThermalSerious}, ""},
		{"memory", Rules{}, Signals{MemoryPressure: MemoryCritical}, "memory pressure: critical"},
		{"disk", defaults, Signals{FreeDiskBytes: free(12 << 30)}, "disk below 30 GB (12 GB free)"},
		{"schedule", Rules{Schedule: night}, Signals{}, "outside schedule 22:00–07:00"},
		{"all at once, most pressing first", defaults, Signals{OnBattery: true, HasBattery: true, Thermal: ThermalCritical, IdleSeconds: idle(1)},
			"on battery; thermal: critical; you are using this Mac"},
	} {
		if got := strings.Join(c.rules.Reasons(c.s, monNoon), "; "); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

func TestGate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "signals.json")
	night, _ := ParseSchedule("Daily 22:00-07:00")
	now := time.Date(2026, 11, 23, 21, 0, 0, 0, time.Local)
	g := &Gate{Reader: File{Path: path}, Rules: Rules{NoBuildsOnBattery: true, Schedule: night}, Now: func() time.Time { return now }}
	if got := g.PauseReason(context.Background()); got != "outside schedule 22:00–07:00" {
		t.Fatalf("before the window, no file: %q", got)
	}
	now = now.Add(90 * time.Minute)
	if got := g.PauseReason(context.Background()); got != "" {
		t.Fatalf("in the window: %q", got)
	}
	os.WriteFile(path, []byte(`{"on_battery": true}`), 0o600)
	if got := g.PauseReason(context.Background()); got != "on battery" {
		t.Fatalf("on battery: %q", got)
	}
	os.WriteFile(path, []byte(`{}`), 0o600)
	if got := g.PauseReason(context.Background()); got != "" {
		t.Fatalf("cleared: %q", got)
	}
}

// TestSlowReading: a settled reading is kept for its period, any other is
// read at every check, and a failed read is never kept.
func TestSlowReading(t *testing.T) {
	clock := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	r := slowReading[Thermal]{now: func() time.Time { return clock }}
	reads := 0
	next, nextErr := ThermalNominal, error(nil)
	read := func() (Thermal, error) { reads++; return next, nextErr }
	get := func(want Thermal, wantReads int) {
		t.Helper()
		got, err := r.get(30*time.Second, ThermalNominal, read)
		if got != want || reads != wantReads || (err != nil) != (want == "") {
			t.Fatalf("at %s: %q after %d reads (err %v), want %q after %d", clock.Format("15:04:05"), got, reads, err, want, wantReads)
		}
	}
	get(ThermalNominal, 1)
	clock = clock.Add(29 * time.Second)
	get(ThermalNominal, 1) // nominal, younger than 30 s: kept
	clock = clock.Add(time.Second)
	next = ThermalSerious
	get(ThermalSerious, 2) // 30 s old: read again
	clock = clock.Add(time.Second)
	next = ThermalFair
	get(ThermalFair, 3) // not settled: read at every check
	clock = clock.Add(time.Second)
	next, nextErr = "", errors.New("pmset failed")
	get("", 4)
	clock = clock.Add(time.Second)
	next, nextErr = ThermalNominal, nil
	get(ThermalNominal, 5) // a failure is not kept
	get(ThermalNominal, 5)
}

// rulesReader records the rules it was asked to read for.
type rulesReader struct{ got []Rules }

func (r *rulesReader) Read(_ context.Context, rules Rules) (Signals, error) {
	r.got = append(r.got, rules)
	return Signals{}, nil
}

// The gate reads for its current rules, so that the system reader can
// skip what they cannot use; an owner's change applies at the next check.
func TestGateReadsForItsRules(t *testing.T) {
	r := &rulesReader{}
	g := &Gate{Reader: r, Rules: Rules{IdleMinutes: IdleAuto, PauseThermal: ThermalSerious}}
	g.Check(context.Background())
	g.Rules = Rules{IdleMinutes: 0}
	g.Check(context.Background())
	if len(r.got) != 2 || r.got[0].IdleMinutes != IdleAuto || r.got[0].PauseThermal != ThermalSerious || r.got[1].PauseThermal != "" || r.got[1].IdleMinutes != 0 {
		t.Fatalf("the reader was asked for %+v", r.got)
	}
}
