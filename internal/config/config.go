// Package config reads a binary's settings in layers — a flag, else its
// environment variable, else its line in a settings file, else the
// default — with one syntax for every duration (ParseDuration) and every
// size (ParseSize), so FREEAGENT_BUILD_TIMEOUT=7200 means the same to the
// controller, the worker and freeagent-vm.
//
// A Set registers each setting on a flag.FlagSet, with the environment's
// (or the file's) value as the flag's default: parsing the flags then
// gives flag > environment > file > default, and -h shows the value in
// force. A bad value names where it came from: the flag, the variable, or
// the file and line.
package config

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// File is a settings file's values by name, with the line each came from
// (for errors).
type File struct {
	Path   string
	Values map[string]string
	Lines  map[string]int
}

// Set registers settings on a flag set, reading their environment
// variables and file lines as it goes. Check Err after registering and
// before parsing the flags.
type Set struct {
	fs      *flag.FlagSet
	env     func(string) (string, bool)
	file    File
	errs    []error
	sources map[string]string
}

// New returns a Set registering on fs. lookupEnv reads the environment
// (os.LookupEnv; nil: none); file holds the settings file's values (zero:
// none).
func New(fs *flag.FlagSet, lookupEnv func(string) (string, bool), file File) *Set {
	if lookupEnv == nil {
		lookupEnv = func(string) (string, bool) { return "", false }
	}
	return &Set{fs: fs, env: lookupEnv, file: file, sources: map[string]string{}}
}

// NonEmptyEnv adapts getenv to a lookup for which an empty variable is
// unset (as freeagent-vm has always read its environment).
func NonEmptyEnv(getenv func(string) string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v := getenv(k)
		return v, v != ""
	}
}

// Err reports every bad environment or file value met so far.
func (s *Set) Err() error { return errors.Join(s.errs...) }

// Given reports whether the setting name was set by its flag, environment
// variable or file line rather than left at its default.
func (s *Set) Given(name string) bool { return s.sources[name] != "" }

// Var registers v as the setting name (flag --name, environment variable
// env, file key name; env "" for none). v holds the default; the
// environment's or the file's value, when there is one, is set on it now.
func (s *Set) Var(v flag.Value, name, env, help string) {
	s.register(v, name, env, help, "")
}

// register is Var with a note naming the value's kind, whose backquoted
// word -h shows as flag's placeholder ("a `duration`": "-lease-ttl
// duration"); without one, flag would show "value" for every setting.
func (s *Set) register(v flag.Value, name, env, help, kind string) {
	if raw, src, ok := s.lookup(name, env); ok {
		if err := v.Set(raw); err != nil {
			s.errs = append(s.errs, fmt.Errorf("%s: %w", src, err))
		} else {
			s.sources[name] = src
		}
	}
	var notes []string
	if kind != "" {
		notes = append(notes, kind)
	}
	if env != "" {
		notes = append(notes, "env "+env)
	}
	if len(notes) > 0 {
		help += " (" + strings.Join(notes, "; ") + ")"
	}
	s.fs.Var(&tracked{Value: v, env: env, given: func() { s.sources[name] = "--" + name }}, name, help)
}

// Kind is what syntax a setting takes.
type Kind string

const (
	KindDuration Kind = "duration" // ParseDuration's
	KindSize     Kind = "size"     // ParseSize's
	KindOther    Kind = "other"
)

// Setting describes a registered setting.
type Setting struct {
	Flag, Env string
	Kind      Kind
	ZeroOK    bool // a duration or size that may be 0
}

// Settings lists the settings a Set registered on fs, and the flags
// registered with a DurationValue or SizeValue, in flag order, so a
// binary's tests can check each of them against the shared syntax.
func Settings(fs *flag.FlagSet) []Setting {
	var out []Setting
	fs.VisitAll(func(f *flag.Flag) {
		st := Setting{Flag: f.Name, Kind: KindOther}
		v := f.Value
		if t, ok := v.(*tracked); ok {
			st.Env, v = t.env, t.Value
		}
		switch v := v.(type) {
		case *DurationValue:
			st.Kind, st.ZeroOK = KindDuration, v.ZeroOK
		case *SizeValue:
			st.Kind, st.ZeroOK = KindSize, v.ZeroOK
		default:
			if _, ok := f.Value.(*tracked); !ok {
				return // not a setting
			}
		}
		out = append(out, st)
	})
	return out
}

func (s *Set) lookup(name, env string) (raw, src string, ok bool) {
	if env != "" {
		if v, ok := s.env(env); ok {
			return v, fmt.Sprintf("%s=%q", env, v), true
		}
	}
	if v, ok := s.file.Values[name]; ok {
		return v, fmt.Sprintf("%s:%d: %s = %q", s.file.Path, s.file.Lines[name], name, v), true
	}
	return "", "", false
}

// String registers a text setting.
func (s *Set) String(p *string, name, env, def, help string) {
	*p = def
	s.register((*stringValue)(p), name, env, help, "`string`")
}

// Bool registers a true/false setting (1, 0, true, false, …).
func (s *Set) Bool(p *bool, name, env string, def bool, help string) {
	*p = def
	s.Var((*boolValue)(p), name, env, help)
}

// Int registers a whole-number setting of at least least.
func (s *Set) Int(p *int, name, env string, def, least int, help string) {
	*p = def
	s.register(&intValue{p: p, least: least}, name, env, help, "`int`")
}

// Float registers a number setting of at least 0.
func (s *Set) Float(p *float64, name, env string, def float64, help string) {
	*p = def
	s.register((*floatValue)(p), name, env, help, "`float`")
}

// Duration registers a positive duration (ParseDuration's syntax).
func (s *Set) Duration(p *time.Duration, name, env string, def time.Duration, help string) {
	*p = def
	s.register(&DurationValue{P: p}, name, env, help, "a `duration`")
}

// DurationOrZero registers a duration that may be 0; help says what 0 means.
func (s *Set) DurationOrZero(p *time.Duration, name, env string, def time.Duration, help string) {
	*p = def
	s.register(&DurationValue{P: p, ZeroOK: true}, name, env, help, "a `duration`")
}

// Size registers a positive size in bytes (ParseSize's syntax).
func (s *Set) Size(p *int64, name, env string, def int64, help string) {
	*p = def
	s.register(&SizeValue{P: p}, name, env, help, "a `size`")
}

// tracked records that a flag was given on the command line.
type tracked struct {
	flag.Value
	env   string
	given func()
}

func (t *tracked) Set(v string) error {
	if err := t.Value.Set(v); err != nil {
		return err
	}
	t.given()
	return nil
}

// String is the value's; flag's -h calls it on a zero tracked to learn
// what a zero default looks like.
func (t *tracked) String() string {
	if t == nil || t.Value == nil {
		return ""
	}
	return t.Value.String()
}

func (t *tracked) IsBoolFlag() bool {
	b, ok := t.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// DurationValue is a flag.Value of ParseDuration's syntax: positive, or
// also 0 with ZeroOK.
type DurationValue struct {
	P      *time.Duration
	ZeroOK bool
}

// Set parses v.
func (d *DurationValue) Set(v string) error {
	return setQuantity(d.P, v, d.ZeroOK, parseDuration, DurationSyntax)
}

func (d *DurationValue) String() string {
	if d == nil || d.P == nil {
		return "0"
	}
	return FormatDuration(*d.P)
}

// SizeValue is a flag.Value of ParseSize's syntax: positive, or also 0
// with ZeroOK.
type SizeValue struct {
	P      *int64
	ZeroOK bool
}

// Set parses v.
func (z *SizeValue) Set(v string) error { return setQuantity(z.P, v, z.ZeroOK, parseSize, SizeSyntax) }

func (z *SizeValue) String() string {
	if z == nil || z.P == nil {
		return "0"
	}
	return FormatSize(*z.P)
}

// setQuantity parses v into *p, refusing 0 unless zeroOK.
func setQuantity[T int64 | time.Duration](p *T, v string, zeroOK bool, parse func(string) (T, error), syntax string) error {
	n, err := parse(v)
	if err != nil {
		return err
	}
	if n == 0 && !zeroOK {
		return errors.New("must be more than 0; want " + syntax)
	}
	*p = n
	return nil
}

type stringValue string

func (v *stringValue) Set(s string) error { *v = stringValue(s); return nil }
func (v *stringValue) String() string {
	if v == nil {
		return ""
	}
	return string(*v)
}

type boolValue bool

func (v *boolValue) Set(s string) error {
	b, err := strconv.ParseBool(strings.TrimSpace(s))
	if err != nil {
		return errors.New("want true or false (1 or 0)")
	}
	*v = boolValue(b)
	return nil
}

func (v *boolValue) String() string   { return strconv.FormatBool(v != nil && bool(*v)) }
func (v *boolValue) IsBoolFlag() bool { return true }

type intValue struct {
	p     *int
	least int
}

func (v *intValue) Set(s string) error {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < v.least {
		return fmt.Errorf("want a whole number of at least %d", v.least)
	}
	*v.p = n
	return nil
}

func (v *intValue) String() string {
	if v == nil || v.p == nil {
		return "0"
	}
	return strconv.Itoa(*v.p)
}

type floatValue float64

func (v *floatValue) Set(s string) error {
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || f < 0 || math.IsNaN(f) {
		return errors.New("want a number of at least 0")
	}
	*v = floatValue(f)
	return nil
}

func (v *floatValue) String() string {
	if v == nil {
		return "0"
	}
	return strconv.FormatFloat(float64(*v), 'g', -1, 64)
}
