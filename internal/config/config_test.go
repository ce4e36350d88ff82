package config

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"
)

func TestParseDuration(t *testing.T) {
	for _, c := range []struct {
		in   string
		want time.Duration
	}{
		{"0", 0}, {"7200", 2 * time.Hour}, {"2h", 2 * time.Hour}, {"90s", 90 * time.Second},
		{"1h30m", 90 * time.Minute}, {"30d", 720 * time.Hour}, {"0d", 0}, {" 5m\t", 5 * time.Minute},
	} {
		got, err := ParseDuration(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	for _, in := range []string{"", "-1", "-5s", "-2d", "abc", "1.5d", "2 h", "9223372037", "106752d", "d"} {
		if d, err := ParseDuration(in); err == nil {
			t.Errorf("ParseDuration(%q) = %v, want an error", in, d)
		} else if !strings.Contains(err.Error(), "7200") || !strings.Contains(err.Error(), in) {
			t.Errorf("ParseDuration(%q): error %q gives no example or hides the value", in, err)
		}
	}
}

func TestFormatDurationRoundTrips(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0"}, {2 * time.Hour, "2h"}, {90 * time.Minute, "1h30m"}, {45 * time.Second, "45s"},
		{720 * time.Hour, "30d"}, {1500 * time.Millisecond, "1.5s"}, {61 * time.Minute, "1h1m"},
	} {
		got := FormatDuration(c.d)
		if got != c.want {
			t.Errorf("FormatDuration(%v) = %q, want %q", c.d, got, c.want)
		}
		if back, err := ParseDuration(got); err != nil || back != c.d {
			t.Errorf("ParseDuration(FormatDuration(%v)) = %v, %v", c.d, back, err)
		}
	}
}

func TestParseSize(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
	}{
		{"0", 0}, {"512", 512}, {"64KiB", 64 << 10}, {"64kib", 64 << 10}, {"2MiB", 2 << 20}, {"10GiB", 10 << 30},
		{"1TiB", 1 << 40}, {"16K", 16 << 10}, {"512M", 512 << 20}, {"4G", 4 << 30}, {"10 GiB", 10 << 30},
		{"1kB", 1000}, {"500MB", 500e6}, {"5GB", 5e9}, {"2TB", 2e12}, {"1.5GiB", 3 << 29}, {"100B", 100}, {"0.5KiB", 512},
	} {
		got, err := ParseSize(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
	for _, in := range []string{"", "-1", "-1GiB", "GiB", "abc", "5 GiBs", "0x10", "1e400", "NaN", "Inf", "9999999TiB", "9223372036854775808"} {
		if n, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) = %d, want an error", in, n)
		} else if !strings.Contains(err.Error(), "10GiB") {
			t.Errorf("ParseSize(%q): error %q gives no example", in, err)
		}
	}
}

func TestFormatSizeRoundTrips(t *testing.T) {
	for _, n := range []int64{0, 1, 1000, 1024, 64 << 10, 10 << 30, 3 << 29, 5e9, 1 << 40} {
		if back, err := ParseSize(FormatSize(n)); err != nil || back != n {
			t.Errorf("ParseSize(FormatSize(%d) = %q) = %d, %v", n, FormatSize(n), back, err)
		}
	}
}

// settings registers one of each kind on a fresh flag set.
type settings struct {
	timeout, retain time.Duration
	max             int64
	name            string
	on              bool
	n               int
	rate            float64
}

func register(env map[string]string, file File) (*Set, *flag.FlagSet, *settings) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	s := New(fs, func(k string) (string, bool) { v, ok := env[k]; return v, ok }, file)
	v := &settings{}
	s.Duration(&v.timeout, "timeout", "T_TIMEOUT", time.Hour, "")
	s.DurationOrZero(&v.retain, "retain", "T_RETAIN", 0, "")
	s.Size(&v.max, "max", "T_MAX", 1<<20, "")
	s.String(&v.name, "name", "T_NAME", "def", "")
	s.Bool(&v.on, "on", "T_ON", false, "")
	s.Int(&v.n, "n", "T_N", 1, 1, "")
	s.Float(&v.rate, "rate", "", 2.5, "")
	return s, fs, v
}

func TestPrecedence(t *testing.T) {
	file := File{Path: "/etc/t.conf", Values: map[string]string{"timeout": "3h", "name": "file", "max": "2MiB", "on": "true"},
		Lines: map[string]int{"timeout": 1, "name": 2, "max": 3, "on": 4}}
	env := map[string]string{"T_TIMEOUT": "7200", "T_MAX": "1GiB"}
	s, fs, v := register(env, file)
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if err := fs.Parse([]string{"--max", "5GB", "-on=false"}); err != nil {
		t.Fatal(err)
	}
	want := settings{timeout: 2 * time.Hour, max: 5e9, name: "file", on: false, n: 1, rate: 2.5}
	if *v != want {
		t.Errorf("got %+v, want %+v (flag > env > file > default)", *v, want)
	}
	for name, given := range map[string]bool{"timeout": true, "max": true, "name": true, "on": true, "retain": false, "n": false} {
		if s.Given(name) != given {
			t.Errorf("Given(%q) = %v, want %v", name, !given, given)
		}
	}
	// The flag's default is the value in force before the command line.
	if got := fs.Lookup("timeout").DefValue; got != "2h" {
		t.Errorf("timeout's default shows %q, want 2h", got)
	}
}

func TestErrorsNameTheirSource(t *testing.T) {
	file := File{Path: "/etc/t.conf", Values: map[string]string{"timeout": "soon", "n": "0"}, Lines: map[string]int{"timeout": 7, "n": 9}}
	s, fs, _ := register(map[string]string{"T_MAX": "-1", "T_ON": "maybe"}, file)
	err := s.Err()
	if err == nil {
		t.Fatal("bad values accepted")
	}
	for _, want := range []string{`/etc/t.conf:7: timeout = "soon": want a duration`, `/etc/t.conf:9: n = "0": want a whole number of at least 1`,
		`T_MAX="-1": negative; want a size`, `T_ON="maybe": want true or false`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	err = fs.Parse([]string{"--retain", "-3d"})
	if err == nil || !strings.Contains(err.Error(), `invalid value "-3d" for flag -retain: negative; want a duration`) {
		t.Errorf("flag error = %v", err)
	}
}

func TestSettingsListsKinds(t *testing.T) {
	_, fs, _ := register(nil, File{})
	got := map[string]Setting{}
	for _, st := range Settings(fs) {
		got[st.Flag] = st
	}
	for name, want := range map[string]Setting{
		"timeout": {Flag: "timeout", Env: "T_TIMEOUT", Kind: KindDuration},
		"retain":  {Flag: "retain", Env: "T_RETAIN", Kind: KindDuration, ZeroOK: true},
		"max":     {Flag: "max", Env: "T_MAX", Kind: KindSize},
		"rate":    {Flag: "rate", Kind: KindOther},
	} {
		if got[name] != want {
			t.Errorf("Settings: %s = %+v, want %+v", name, got[name], want)
		}
	}
	if len(got) != 7 {
		t.Errorf("Settings lists %d settings, want 7", len(got))
	}
}

// -h names each setting's kind and shows the default in force, and shows
// it without tripping over the flag package's probe of zero values.
func TestHelpShowsKindsAndDefaults(t *testing.T) {
	_, fs, _ := register(map[string]string{"T_TIMEOUT": "7200"}, File{})
	var b strings.Builder
	fs.SetOutput(&b)
	fs.PrintDefaults()
	help := b.String()
	for _, want := range []string{"-timeout duration", "(a duration; env T_TIMEOUT) (default 2h)", "-max size", "(a size; env T_MAX) (default 1MiB)",
		"-name string", "(string; env T_NAME) (default def)", "-n int", "-rate float"} {
		if !strings.Contains(help, want) {
			t.Errorf("help does not say %q:\n%s", want, help)
		}
	}
	if strings.Contains(help, "panic") || strings.Contains(help, " value\n") {
		t.Errorf("help (no panic, and a kind for every setting, never flag's \"value\"):\n%s", help)
	}
}
