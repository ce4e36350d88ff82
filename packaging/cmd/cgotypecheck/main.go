// Command cgotypecheck type-checks the Go side of the darwin+cgo code (the
// Keychain, the menu bar) on any machine: `go list` resolves the files and
// imports for GOOS=darwin GOARCH=arm64 CGO_ENABLED=1 without running cgo,
// and go/types checks them, with their tests, with a stand-in for
// `import "C"`. A misspelled
// go-keychain or systray call then fails CI instead of a Mac owner's build.
// Errors on the C side (the preambles) can only show up on a Mac.
//
//	cgotypecheck [packages]   (default ./...)
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

func main() {
	patterns := os.Args[1:]
	if len(patterns) == 0 {
		patterns = []string{"./..."}
	}
	res, err := check(".", patterns)
	if err != nil {
		fmt.Fprintf(os.Stderr, "cgotypecheck: %v\n", err)
		os.Exit(2)
	}
	for _, e := range res.errs {
		fmt.Fprintln(os.Stderr, e)
	}
	if len(res.errs) > 0 {
		fmt.Fprintf(os.Stderr, "cgotypecheck: %d type errors in the darwin/arm64 cgo build\n", len(res.errs))
		os.Exit(1)
	}
	fmt.Printf("cgotypecheck: %d packages type-check for darwin/arm64 with cgo (%d of them import \"C\")\n", res.checked, len(res.cgo))
}

// listed is the part of `go list -json` output the checker uses.
type listed struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	CgoFiles   []string
	ImportMap  map[string]string
	Standard   bool
	Module     *struct{ Main bool }
	Error      *struct{ Err string }
	ForTest    string // set on a package recompiled with its tests
}

type result struct {
	checked int      // packages of the main module checked in full (test variants not counted)
	cgo     []string // those that import "C"
	errs    []string // "file:line:col: message", sorted
}

// check lists patterns (relative to dir) for darwin/arm64 with cgo and
// type-checks them: the main module's packages and their test variants in
// full, their dependencies without function bodies (only their API matters
// here).
func check(dir string, patterns []string) (result, error) {
	cmd := exec.Command("go", append([]string{"list", "-e", "-deps", "-test", "-json=ImportPath,Dir,GoFiles,CgoFiles,ImportMap,Standard,Module,Error,ForTest"}, patterns...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOOS=darwin", "GOARCH=arm64", "CGO_ENABLED=1")
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return result{}, fmt.Errorf("go list: %w: %s", err, stderr.String())
	}
	var pkgs []listed
	for dec := json.NewDecoder(&out); ; {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return result{}, fmt.Errorf("read go list output: %w", err)
		}
		pkgs = append(pkgs, p)
	}

	var res result
	fset := token.NewFileSet()
	done := map[string]*types.Package{"unsafe": types.Unsafe}
	// go list -deps prints every package after its dependencies.
	for _, p := range pkgs {
		// "unsafe" is built in; "p.test" is the generated test main.
		if p.ImportPath == "unsafe" || strings.HasSuffix(p.ImportPath, ".test") {
			continue
		}
		target := !p.Standard && p.Module != nil && p.Module.Main
		if p.Error != nil {
			if target {
				res.errs = append(res.errs, fmt.Sprintf("%s: %s", p.ImportPath, p.Error.Err))
			}
			continue
		}
		var files []*ast.File
		for _, name := range append(append([]string{}, p.GoFiles...), p.CgoFiles...) {
			f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, parser.SkipObjectResolution)
			if err != nil {
				res.errs = append(res.errs, err.Error())
				continue
			}
			files = append(files, f)
		}
		conf := types.Config{
			FakeImportC:      true,
			IgnoreFuncBodies: !target,
			Sizes:            types.SizesFor("gc", "arm64"),
			Importer: importerFunc(func(path string) (*types.Package, error) {
				if mapped, ok := p.ImportMap[path]; ok {
					path = mapped
				}
				if pkg, ok := done[path]; ok {
					return pkg, nil
				}
				return nil, fmt.Errorf("%s is not among the listed dependencies", path)
			}),
			// Collect every error rather than stopping at the first. Errors
			// in dependencies are not ours to report (their bodies are
			// skipped, and go/types may disagree with cgo on std internals).
			Error: func(err error) {
				if target {
					res.errs = append(res.errs, err.Error())
				}
			},
		}
		pkg, _ := conf.Check(p.ImportPath, fset, files, nil)
		done[p.ImportPath] = pkg
		if target && p.ForTest == "" {
			res.checked++
			if len(p.CgoFiles) > 0 {
				res.cgo = append(res.cgo, p.ImportPath)
			}
		}
	}
	// A test variant repeats its package's files, and so their errors.
	sort.Strings(res.errs)
	res.errs = slices.Compact(res.errs)
	if res.checked == 0 && len(res.errs) == 0 {
		return res, fmt.Errorf("%s matched no package of this module: %s", strings.Join(patterns, " "), strings.TrimSpace(stderr.String()))
	}
	return res, nil
}

type importerFunc func(path string) (*types.Package, error)

func (f importerFunc) Import(path string) (*types.Package, error) { return f(path) }
