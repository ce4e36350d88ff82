package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// This file emulates the parts of swift-argument-parser that tart's users can
// observe: option syntax, the error texts and layout for usage errors
// (exit 64), and the "Error: " prefix for errors thrown from validate().

// exitError is what every command returns on failure: the exact text to print
// on stderr (without the final newline) and the exit code.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// runtimeErr mirrors tart's RuntimeError (HasExitCode): the message is printed
// as is, without a prefix.
func runtimeErr(code int, format string, a ...any) *exitError {
	return &exitError{code: code, msg: fmt.Sprintf(format, a...)}
}

// genericErr mirrors any other error reaching argument-parser's exit(withError:)
// (and any error thrown from a command's validate()): "Error: <message>", exit 1.
func genericErr(format string, a ...any) *exitError {
	return &exitError{code: 1, msg: "Error: " + fmt.Sprintf(format, a...)}
}

// vmDoesNotExist is RuntimeError.VMDoesNotExist (exit 2, no prefix).
func vmDoesNotExist(name string) *exitError {
	return runtimeErr(2, "the specified VM %q does not exist", name)
}

type optKind int

const (
	flagOpt optKind = iota
	valueOpt
)

type optSpec struct {
	long      string
	short     byte
	kind      optKind
	valueName string // defaults to long
	help      string
	repeat    bool // array option, may be given many times
	inversion bool // --[no-]long
	hidden    bool
}

func (o *optSpec) vname() string {
	if o.valueName != "" {
		return o.valueName
	}
	return o.long
}

// label is how argument-parser names an option in error messages.
func (o *optSpec) label() string {
	if o.kind == valueOpt {
		return "--" + o.long + " <" + o.vname() + ">"
	}
	return "--" + o.long
}

type argSpec struct {
	name   string
	help   string
	repeat bool // one or more
}

type cmdSpec struct {
	name     string
	abstract string
	args     []argSpec
	opts     []optSpec
	// validate runs during parsing, like ParsableCommand.validate(): its
	// errors get the "Error: " prefix (exit 1) unless they are usage errors.
	validate func(a *app, p *parsed) error
	run      func(a *app, p *parsed) error
	// noGC: tart skips the tmp/ garbage collection for pull and clone.
	noGC   bool
	hidden bool
}

type parsed struct {
	cmd  *cmdSpec
	pos  []string
	vals map[string][]string // value options, by long name
	flag map[string]bool     // flags, by long name
	seen map[string]bool
}

func (p *parsed) str(long string) (string, bool) {
	v := p.vals[long]
	if len(v) == 0 {
		return "", false
	}
	return v[len(v)-1], true
}

func (p *parsed) strDefault(long, def string) string {
	if v, ok := p.str(long); ok {
		return v
	}
	return def
}

// optional is the last value of an option, nil when it was not given.
func (p *parsed) optional(long string) *string {
	if v, ok := p.str(long); ok {
		return &v
	}
	return nil
}

func (p *parsed) has(long string) bool { return p.seen[long] }

// uint parses an unsigned option value the way argument-parser does for
// UInt16/UInt64 options, producing its "invalid value" usage error.
func (p *parsed) uint(long string, bits int) (uint64, bool, error) {
	s, ok := p.str(long)
	if !ok {
		return 0, false, nil
	}
	// Swift's FixedWidthInteger(_:) takes a leading '+'.
	n, err := strconv.ParseUint(strings.TrimPrefix(s, "+"), 10, bits)
	if strings.HasPrefix(s, "++") {
		err = strconv.ErrSyntax
	}
	if err != nil {
		o := p.cmd.opt(long)
		return 0, true, usageErr(p.cmd, fmt.Sprintf("The value '%s' is invalid for '%s'", s, o.label()), o.helpLine())
	}
	return n, true, nil
}

// enum checks an enum option (ExpressibleByArgument & CaseIterable with
// allValueStrings: Format, IPResolutionStrategy, DiskImageFormat) the way
// argument-parser 1.6 does while parsing, before validate(): "The value
// 'x' is invalid for '--opt <opt>'. Please provide one of 'a' and 'b'."
// (three or more: "'a', 'b' or 'c'"). fold: the type's init(argument:)
// lowercases first.
func (p *parsed) enum(long string, values []string, fold bool) error {
	s, ok := p.str(long)
	if !ok {
		return nil
	}
	v := s
	if fold {
		v = strings.ToLower(s)
	}
	if slices.Contains(values, v) {
		return nil
	}
	quoted := make([]string, len(values))
	for i, v := range values {
		quoted[i] = "'" + v + "'"
	}
	list := strings.Join(quoted, " and ")
	if len(quoted) > 2 {
		list = strings.Join(quoted[:len(quoted)-1], ", ") + " or " + quoted[len(quoted)-1]
	}
	o := p.cmd.opt(long)
	return usageErr(p.cmd, fmt.Sprintf("The value '%s' is invalid for '%s'. Please provide one of %s.", s, o.label(), list), o.helpLine())
}

func (c *cmdSpec) opt(long string) *optSpec {
	for i := range c.opts {
		if c.opts[i].long == long {
			return &c.opts[i]
		}
	}
	return nil
}

func (o *optSpec) helpLine() string {
	if o.help == "" {
		return ""
	}
	return o.label() + "  " + o.help
}

// synopsis renders argument-parser's usage string for a command.
func (c *cmdSpec) synopsis() string {
	parts := []string{"tart", c.name}
	for _, a := range c.args {
		s := "<" + a.name + ">"
		if a.repeat {
			s += " ..."
		}
		parts = append(parts, s)
	}
	for _, o := range c.opts {
		if o.hidden {
			continue
		}
		var s string
		switch {
		case o.inversion:
			s = "--[no-]" + o.long
		case o.kind == flagOpt:
			s = "--" + o.long
		default:
			s = "--" + o.long + " <" + o.vname() + ">"
		}
		if o.repeat {
			s += " ..."
		}
		parts = append(parts, "["+s+"]")
	}
	return strings.Join(parts, " ")
}

// usageErr builds argument-parser's validation failure (exit 64):
//
//	Error: <message>
//	Help:  <argument or option help>      (only for some parser errors)
//	Usage: tart <cmd> …
//	  See 'tart <cmd> --help' for more information.
//
// With cmd == nil the usage is the root command's, which is what tart prints
// for a ValidationError thrown from a command's run() (e.g. bad --dir syntax).
func usageErr(cmd *cmdSpec, msg, help string) *exitError {
	var b strings.Builder
	if msg != "" {
		b.WriteString("Error: " + msg + "\n")
	}
	if help != "" {
		b.WriteString("Help:  " + help + "\n")
	}
	if cmd == nil {
		b.WriteString("Usage: tart <subcommand>\n  See 'tart --help' for more information.")
	} else {
		b.WriteString("Usage: " + cmd.synopsis() + "\n  See 'tart " + cmd.name + " --help' for more information.")
	}
	return &exitError{code: 64, msg: b.String()}
}

// errHelp is returned by parse when --help was requested.
type errHelp struct{ text string }

func (e *errHelp) Error() string { return e.text }

func (c *cmdSpec) helpText() string {
	var b strings.Builder
	if c.abstract != "" {
		b.WriteString("OVERVIEW: " + c.abstract + "\n\n")
	}
	b.WriteString("USAGE: " + c.synopsis() + "\n")
	if len(c.args) > 0 {
		b.WriteString("\nARGUMENTS:\n")
		for _, a := range c.args {
			fmt.Fprintf(&b, "  %-28s %s\n", "<"+a.name+">", a.help)
		}
	}
	b.WriteString("\nOPTIONS:\n")
	for _, o := range c.opts {
		if o.hidden {
			continue
		}
		name := "--" + o.long
		if o.inversion {
			name = "--[no-]" + o.long
		}
		if o.short != 0 {
			name = "-" + string(o.short) + ", " + name
		}
		if o.kind == valueOpt {
			name += " <" + o.vname() + ">"
		}
		fmt.Fprintf(&b, "  %-28s %s\n", name, o.help)
	}
	fmt.Fprintf(&b, "  %-28s %s\n", "--version", "Show the version.")
	fmt.Fprintf(&b, "  %-28s %s\n", "-h, --help", "Show help information.")
	return b.String()
}

func (c *cmdSpec) parse(args []string) (*parsed, error) {
	p := &parsed{cmd: c, vals: map[string][]string{}, flag: map[string]bool{}, seen: map[string]bool{}}
	byLong := map[string]*optSpec{}
	byShort := map[byte]*optSpec{}
	for i := range c.opts {
		o := &c.opts[i]
		byLong[o.long] = o
		if o.short != 0 {
			byShort[o.short] = o
		}
	}
	for _, a := range args {
		if a == "--help" || a == "-h" {
			return nil, &errHelp{text: c.helpText()}
		}
		if a == "--" {
			break
		}
	}
	onlyPositional := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		if onlyPositional || a == "-" || !strings.HasPrefix(a, "-") {
			p.pos = append(p.pos, a)
			continue
		}
		if a == "--" {
			onlyPositional = true
			continue
		}
		var o *optSpec
		var inline *string
		negated := false
		if strings.HasPrefix(a, "--") {
			name := a[2:]
			if eq := strings.IndexByte(name, '='); eq >= 0 {
				v := name[eq+1:]
				inline = &v
				name = name[:eq]
			}
			o = byLong[name]
			if o == nil && strings.HasPrefix(name, "no-") {
				if inv := byLong[name[3:]]; inv != nil && inv.inversion {
					o, negated = inv, true
				}
			}
			if o == nil || (inline != nil && o.kind == flagOpt) {
				return nil, usageErr(c, fmt.Sprintf("Unknown option '%s'", a), "")
			}
		} else {
			if len(a) < 2 {
				return nil, usageErr(c, fmt.Sprintf("Unknown option '%s'", a), "")
			}
			o = byShort[a[1]]
			if o == nil {
				return nil, usageErr(c, fmt.Sprintf("Unknown option '%s'", a[:2]), "")
			}
			if len(a) > 2 {
				if o.kind == flagOpt {
					return nil, usageErr(c, fmt.Sprintf("Unknown option '%s'", a), "")
				}
				v := strings.TrimPrefix(a[2:], "=")
				inline = &v
			}
		}
		p.seen[o.long] = true
		if o.kind == flagOpt {
			p.flag[o.long] = !negated
			continue
		}
		var v string
		switch {
		case inline != nil:
			v = *inline
		case i+1 < len(args) && (!strings.HasPrefix(args[i+1], "-") || args[i+1] == "-" || isNegativeNumber(args[i+1])):
			i++
			v = args[i]
		default:
			return nil, usageErr(c, fmt.Sprintf("Missing value for '%s'", o.label()), o.helpLine())
		}
		p.vals[o.long] = append(p.vals[o.long], v)
	}
	// Positional arguments.
	need := 0
	variadic := false
	for _, a := range c.args {
		need++
		if a.repeat {
			variadic = true
		}
	}
	if len(p.pos) < need {
		a := c.args[len(p.pos)]
		help := ""
		if a.help != "" {
			help = "<" + a.name + ">  " + a.help
		}
		return nil, usageErr(c, fmt.Sprintf("Missing expected argument '<%s>'", a.name), help)
	}
	if !variadic && len(p.pos) > need {
		return nil, usageErr(c, fmt.Sprintf("Unexpected argument '%s'", p.pos[need]), "")
	}
	return p, nil
}

func isNegativeNumber(s string) bool {
	_, err := strconv.ParseFloat(s, 64)
	return err == nil && strings.HasPrefix(s, "-")
}
