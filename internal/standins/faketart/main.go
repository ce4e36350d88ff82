// Command faketart is a faithful fake of the `tart` CLI (Cirrus Labs' macOS
// VM tool) for Linux tests of the worker agent. It keeps real tart's
// subcommands, flags, exit codes, messages, JSON shapes and on-disk layout
// under TART_HOME, uses the same fcntl lock on config.json as the "running"
// marker, and "boots" a VM by starting a guest program on the host with the
// shared directories mapped into an emulated guest filesystem.
//
// See README.md in this directory for the behaviour and the FAKETART_*
// controls.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

const fakeVersion = "2.32.0"

type app struct {
	args  []string // os.Args[1:]
	cmd   string
	home  *tartHome
	out   io.Writer // stdout, teed into outBuf for the invocation log
	errw  io.Writer // stderr, teed into errBuf
	mu    sync.Mutex
	outB  bytes.Buffer
	errB  bytes.Buffer
	extra map[string]any // extra fields for the next log record
}

type teeWriter struct {
	a   *app
	w   io.Writer
	buf *bytes.Buffer
}

func (t teeWriter) Write(p []byte) (int, error) {
	t.a.mu.Lock()
	if t.buf.Len() < 64<<10 {
		t.buf.Write(p)
	}
	t.a.mu.Unlock()
	return t.w.Write(p)
}

func (a *app) println(format string, v ...any) {
	fmt.Fprintf(a.out, format+"\n", v...)
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "__fake" {
		os.Exit(fakeInternal(os.Args[2:]))
	}
	a := &app{args: os.Args[1:]}
	a.out = teeWriter{a, os.Stdout, &a.outB}
	a.errw = teeWriter{a, os.Stderr, &a.errB}
	a.finish(a.main())
}

// main returns the exit code.
func (a *app) main() int {
	if len(a.args) == 0 {
		fmt.Fprint(a.out, rootHelp())
		return 0
	}
	switch a.args[0] {
	case "--help", "-h", "help":
		if len(a.args) > 1 {
			if c := commands()[a.args[1]]; c != nil && !c.hidden {
				fmt.Fprint(a.out, c.helpText())
				return 0
			}
		}
		fmt.Fprint(a.out, rootHelp())
		return 0
	case "--version":
		a.println("%s", envOr("FAKETART_VERSION", fakeVersion))
		return 0
	}
	cmd := commands()[a.args[0]]
	if cmd == nil || cmd.hidden {
		return a.fail(&exitError{code: 64, msg: fmt.Sprintf("Error: Unexpected argument '%s'\nUsage: tart <subcommand>\n  See 'tart --help' for more information.", a.args[0])})
	}
	a.cmd = cmd.name
	p, err := cmd.parse(a.args[1:])
	if err != nil {
		var h *errHelp
		if errors.As(err, &h) {
			fmt.Fprint(a.out, h.text)
			return 0
		}
		return a.fail(err)
	}
	// Config() in real tart creates TART_HOME/{cache,tmp}; every command needs it.
	home, err := openHome()
	if err != nil {
		return a.fail(genericErr("TART_HOME is invalid: %v", err))
	}
	a.home = home
	if cmd.validate != nil {
		if err := cmd.validate(a, p); err != nil {
			var ee *exitError
			if errors.As(err, &ee) && ee.code == 64 {
				return a.fail(ee)
			}
			// Errors thrown from validate() go through argument-parser: "Error: " prefix, exit 1.
			msg := err.Error()
			if !strings.HasPrefix(msg, "Error: ") {
				msg = "Error: " + msg
			}
			return a.fail(&exitError{code: 1, msg: msg})
		}
	}
	if cmd.name != "run" {
		a.cancelOnSIGINT()
	}
	if !cmd.noGC {
		if err := home.gc(); err != nil {
			fmt.Fprintf(a.errw, "Failed to perform garbage collection!\n%v\n", err)
		}
	}
	if code, msg, ok := a.injectedFailure(cmd.name); ok {
		if code == 0 {
			if msg != "" {
				fmt.Fprintln(a.out, msg)
			}
			return 0
		}
		return a.fail(&exitError{code: code, msg: msg})
	}
	if err := cmd.run(a, p); err != nil {
		return a.fail(err)
	}
	return 0
}

func (a *app) fail(err error) int {
	var ee *exitError
	if !errors.As(err, &ee) {
		ee = genericErr("%v", err)
	}
	if ee.msg != "" {
		fmt.Fprintln(a.errw, ee.msg)
	}
	return ee.code
}

// cancelOnSIGINT emulates tart's handling of Ctrl+C / `kill -INT` outside
// `run`: the command's task is cancelled, in-progress temporary directories
// (clone, pull, create) are removed by the cancellation handlers, and the
// CancellationError ends the process with exit 1. (SIGKILL leaves them for
// the next tmp/ garbage collection.)
func (a *app) cancelOnSIGINT() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGINT)
	go func() {
		<-ch
		tmpDirs.Lock()
		for p := range tmpDirs.paths {
			_ = os.RemoveAll(p)
		}
		a.finish(a.fail(genericErr("CancellationError()")))
	}()
}

// tmpDirs are the tmp/<uuid> directories this process is filling.
var tmpDirs = struct {
	sync.Mutex
	paths map[string]bool
}{paths: map[string]bool{}}

func trackTmp(p string) {
	tmpDirs.Lock()
	tmpDirs.paths[p] = true
	tmpDirs.Unlock()
}

// finishMu is never unlocked: the first finish wins, a concurrent second one
// (SIGINT cancellation vs. normal completion) blocks until the process exits.
var finishMu sync.Mutex

func (a *app) finish(code int) {
	finishMu.Lock()
	a.writeLog("exit", &code)
	os.Exit(code)
}

// injectedFailure implements FAKETART_FAIL_<CMD>="<exit>:<message>" and the
// optional FAKETART_FAIL_<CMD>_TIMES=N (fail only the first N invocations,
// counted in $TART_HOME/.faketart-fail-<cmd>).
func (a *app) injectedFailure(cmd string) (int, string, bool) {
	key := "FAKETART_FAIL_" + strings.ToUpper(cmd)
	spec, ok := os.LookupEnv(key)
	if !ok || spec == "" {
		return 0, "", false
	}
	if times := os.Getenv(key + "_TIMES"); times != "" && a.home != nil {
		limit, err := strconv.Atoi(times)
		if err == nil {
			counter := a.home.dir + "/.faketart-fail-" + cmd
			f, _, err := flockPath(a.home.dir, true)
			if err == nil {
				data, _ := os.ReadFile(counter)
				n, _ := strconv.Atoi(strings.TrimSpace(string(data)))
				if n >= limit {
					f.Close()
					return 0, "", false
				}
				_ = os.WriteFile(counter, []byte(strconv.Itoa(n+1)), 0o644)
				f.Close()
			}
		}
	}
	code := 1
	msg := spec
	if i := strings.IndexByte(spec, ':'); i >= 0 {
		if n, err := strconv.Atoi(spec[:i]); err == nil {
			code, msg = n, spec[i+1:]
		}
	}
	return code, msg, true
}

// ---- invocation log ------------------------------------------------------

// writeLog appends one JSON line to $FAKETART_LOG. event is "exit" for the
// one record every invocation writes when it ends, and "boot" for the extra
// record `run` writes once the VM has booted (so a later SIGKILL of `run`,
// which leaves no exit record, is still visible).
func (a *app) writeLog(event string, code *int) {
	path := os.Getenv("FAKETART_LOG")
	if path == "" {
		return
	}
	env := map[string]string{}
	for _, e := range os.Environ() {
		k, v, _ := strings.Cut(e, "=")
		if strings.HasPrefix(k, "TART_") || strings.HasPrefix(k, "FAKETART_") || k == "CI" {
			env[k] = v
		}
	}
	cwd, _ := os.Getwd()
	a.mu.Lock()
	rec := map[string]any{
		"time":   time.Now().UTC().Format(time.RFC3339Nano),
		"event":  event,
		"pid":    os.Getpid(),
		"cmd":    a.cmd,
		"argv":   a.args,
		"cwd":    cwd,
		"env":    env,
		"stdout": a.outB.String(),
		"stderr": a.errB.String(),
	}
	a.mu.Unlock()
	if code != nil {
		rec["exit"] = *code
	} else {
		rec["exit"] = nil
	}
	for k, v := range a.extra {
		rec[k] = v
	}
	line, err := json.Marshal(rec)
	if err != nil {
		return
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	// One write(2) per record: O_APPEND keeps concurrent writers' lines whole.
	_, _ = f.Write(append(line, '\n'))
	f.Close()
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// parseDelay accepts a Go duration ("250ms", "2s") or a number of seconds.
func parseDelay(s string) (time.Duration, bool) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, true
	}
	if d, err := time.ParseDuration(s); err == nil {
		return d, true
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		return time.Duration(f * float64(time.Second)), true
	}
	return 0, false
}

func rootHelp() string {
	var b strings.Builder
	b.WriteString("OVERVIEW: A fake of Tart for tests (faketart)\n\nUSAGE: tart <subcommand>\n\nOPTIONS:\n  --version               Show the version.\n  -h, --help              Show help information.\n\nSUBCOMMANDS:\n")
	for _, name := range commandOrder {
		c := commands()[name]
		if c.hidden {
			continue
		}
		fmt.Fprintf(&b, "  %-22s %s\n", name, c.abstract)
	}
	b.WriteString("\n  See 'tart help <subcommand>' for detailed help.\n")
	return b.String()
}
