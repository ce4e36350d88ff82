// Command mkapp assembles and checks FreeAgent.app; the Makefile's app and
// package-check targets drive it.
//
//	mkapp assemble --out DIR --version DESCRIBE --freeagent BIN --freeagent-vm BIN
//	mkapp validate [--arch arm64,amd64] [--signed] [--entitlements FILE] FreeAgent.app
//	mkapp minimum-macos
//	mkapp minos BIN...
//
// minimum-macos prints the bundle's LSMinimumSystemVersion, which make-app.sh
// exports as MACOSX_DEPLOYMENT_TARGET for the cgo build; minos checks that
// each Mach-O file needs no newer macOS than that.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/freeagent-build/freeagent/packaging/bundle"
)

const usage = `usage:
  mkapp assemble --out DIR --version DESCRIBE --freeagent BIN --freeagent-vm BIN
  mkapp validate [--arch arm64,amd64] [--signed] [--entitlements FILE] FreeAgent.app
  mkapp minimum-macos
  mkapp minos BIN...
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	fs := flag.NewFlagSet("mkapp "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	var err error
	switch args[0] {
	case "assemble":
		var s bundle.Spec
		fs.StringVar(&s.Dir, "out", "", "folder to create FreeAgent.app in")
		fs.StringVar(&s.Describe, "version", "", "the `git describe --tags --always --dirty` of the build")
		fs.StringVar(&s.Freeagent, "freeagent", "", "the host binary (thin or universal)")
		fs.StringVar(&s.FreeagentVM, "freeagent-vm", "", "the darwin/arm64 guest binary")
		if err = fs.Parse(args[1:]); err == nil {
			if s.Dir == "" || s.Freeagent == "" || s.FreeagentVM == "" || fs.NArg() != 0 {
				fmt.Fprint(stderr, usage)
				return 2
			}
			var app string
			if app, err = bundle.Assemble(s); err == nil {
				fmt.Fprintf(stdout, "assembled %s\n", app)
			}
		}
	case "validate":
		archs := fs.String("arch", "arm64,amd64", "architectures the host binary must hold, comma-separated")
		signed := fs.Bool("signed", false, "require a code signature on every binary")
		ents := fs.String("entitlements", "", "also check this entitlements file")
		if err = fs.Parse(args[1:]); err == nil {
			if fs.NArg() != 1 {
				fmt.Fprint(stderr, usage)
				return 2
			}
			err = bundle.Validate(fs.Arg(0), bundle.Check{Archs: strings.Split(*archs, ","), Signed: *signed})
			if *ents != "" {
				b, rerr := os.ReadFile(*ents)
				if rerr == nil {
					rerr = bundle.CheckEntitlements(b)
				}
				err = errors.Join(err, rerr)
			}
			if err == nil {
				fmt.Fprintf(stdout, "%s: layout, Info.plist, icon and binaries (%s) are valid\n", fs.Arg(0), *archs)
			}
		}
	case "minimum-macos":
		if err = fs.Parse(args[1:]); err == nil {
			if fs.NArg() != 0 {
				fmt.Fprint(stderr, usage)
				return 2
			}
			fmt.Fprintln(stdout, bundle.MinimumMacOS)
		}
	case "minos":
		if err = fs.Parse(args[1:]); err == nil {
			if fs.NArg() == 0 {
				fmt.Fprint(stderr, usage)
				return 2
			}
			var errs []error
			for _, bin := range fs.Args() {
				errs = append(errs, bundle.CheckMinimumOS(bin))
			}
			if err = errors.Join(errs...); err == nil {
				fmt.Fprintf(stdout, "%d binaries need macOS %s or older\n", fs.NArg(), bundle.MinimumMacOS)
			}
		}
	default:
		fmt.Fprint(stderr, usage)
		return 2
	}
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "mkapp %s: %v\n", args[0], err)
		return 1
	}
	return 0
}
