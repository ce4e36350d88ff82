// Package configtest checks that a binary reads every duration and size
// setting with the shared syntax (package config): the same spellings
// accepted, meaning the same, and the same refused, from a flag and from
// the environment alike.
package configtest

import (
	"flag"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/internal/config"
)

// Durations are spellings every duration setting accepts, with their value.
var Durations = []struct {
	In   string
	Want time.Duration
}{
	{"7200", 2 * time.Hour},
	{"2h", 2 * time.Hour},
	{"90s", 90 * time.Second},
	{"1h30m", 90 * time.Minute},
	{"1500ms", 1500 * time.Millisecond},
	{"30d", 30 * 24 * time.Hour},
	{" 45m ", 45 * time.Minute},
}

// BadDurations are spellings every duration setting refuses.
var BadDurations = []string{"-5s", "-1", "-1d", "abc", "2 hours", "1.5d", "5x", "1e3"}

// Sizes are spellings every size setting accepts, with their value.
var Sizes = []struct {
	In   string
	Want int64
}{
	{"1048576", 1 << 20},
	{"64KiB", 64 << 10},
	{"2MiB", 2 << 20},
	{"10GiB", 10 << 30},
	{"10gib", 10 << 30},
	{"512M", 512 << 20},
	{"4G", 4 << 30},
	{"500MB", 500e6},
	{"5GB", 5e9},
	{"1.5GiB", 3 << 29},
	{"100B", 100},
}

// BadSizes are spellings every size setting refuses.
var BadSizes = []string{"-1", "-5GiB", "lots", "5 GiBs", "GiB", "0x10", "1e400", "9999999TiB"}

// Parse parses args with env as the whole environment and returns the flag
// set it registered the settings on (nil with an error before that).
type Parse func(args []string, env map[string]string) (*flag.FlagSet, error)

// Check tries every spelling on every duration and size setting of the
// flag set parse registers, as a flag and as its environment variable.
// It returns how many settings it checked, so a caller can insist on its
// list.
func Check(t *testing.T, parse Parse) []config.Setting {
	t.Helper()
	fs, err := parse(nil, nil)
	if err != nil {
		t.Fatalf("defaults: %v", err)
	}
	var checked []config.Setting
	for _, st := range config.Settings(fs) {
		var good map[string]string
		var bad []string
		switch st.Kind {
		case config.KindDuration:
			good, bad = spellings(Durations, config.FormatDuration, BadDurations, st.ZeroOK, "0s")
		case config.KindSize:
			good, bad = spellings(Sizes, config.FormatSize, BadSizes, st.ZeroOK, "0GiB")
		default:
			continue
		}
		checked = append(checked, st)
		for in, want := range good {
			for src, try := range sources(st, in) {
				fs, err := try(parse)
				if err != nil {
					t.Errorf("%s %q: %v", src, in, err)
					continue
				}
				if got := fs.Lookup(st.Flag).Value.String(); got != want {
					t.Errorf("%s %q = %s, want %s", src, in, got, want)
				}
			}
		}
		for _, in := range bad {
			for src, try := range sources(st, in) {
				_, err := try(parse)
				if err == nil {
					t.Errorf("%s %q accepted", src, in)
					continue
				}
				// The error names where the value came from, the
				// value, and what would do.
				for _, s := range []string{strings.TrimPrefix(src, "--"), strconv.Quote(in), "want"} {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("%s %q: error %q does not say %q", src, in, err, s)
					}
				}
			}
		}
	}
	return checked
}

// spellings are the accepted spellings with the value each shows as, and
// the refused ones, of a setting that may be 0 or not.
func spellings[T any](ok []struct {
	In   string
	Want T
}, format func(T) string, refused []string, zeroOK bool, zero string) (map[string]string, []string) {
	good := map[string]string{}
	for _, c := range ok {
		good[c.In] = format(c.Want)
	}
	bad := slices.Clone(refused)
	if zeroOK {
		good["0"] = "0"
	} else {
		bad = append(bad, "0", zero)
	}
	return good, bad
}

func sources(st config.Setting, v string) map[string]func(Parse) (*flag.FlagSet, error) {
	m := map[string]func(Parse) (*flag.FlagSet, error){
		"--" + st.Flag: func(p Parse) (*flag.FlagSet, error) { return p([]string{"--" + st.Flag + "=" + v}, nil) },
	}
	if st.Env != "" {
		m[st.Env] = func(p Parse) (*flag.FlagSet, error) { return p(nil, map[string]string{st.Env: v}) }
	}
	return m
}
