// Package braces expands "{a,b}" alternatives in glob patterns as
// micromatch and fast-glob do, for the globs eas.json, package.json
// workspaces and pnpm-workspace.yaml hold.
package braces

import "fmt"

// Expand expands the alternatives of pattern, nested ones too, first
// group first. As in micromatch, a group without a top-level comma ("{a}",
// a range "{1..3}") and an unclosed "{" stay literal. More than limit
// results is an error: patterns come from projects, and "{a,b}" ten times
// over is a thousand globs.
func Expand(pattern string, limit int) ([]string, error) {
	var out []string
	var expand func(s string) error
	expand = func(s string) error {
		for i := 0; i < len(s); i++ {
			if s[i] != '{' {
				continue
			}
			depth, commas, end := 0, []int{}, -1
			for j := i; j < len(s) && end < 0; j++ {
				switch s[j] {
				case '{':
					depth++
				case '}':
					depth--
					if depth == 0 {
						end = j
					}
				case ',':
					if depth == 1 {
						commas = append(commas, j)
					}
				}
			}
			if end < 0 {
				break // unclosed: literal
			}
			if len(commas) == 0 {
				continue // no alternatives: literal
			}
			start := i + 1
			for _, c := range append(commas, end) {
				if err := expand(s[:i] + s[start:c] + s[end+1:]); err != nil {
					return err
				}
				start = c + 1
			}
			return nil
		}
		if len(out) == limit {
			return fmt.Errorf("%q expands to more than %d patterns", pattern, limit)
		}
		out = append(out, s)
		return nil
	}
	if err := expand(pattern); err != nil {
		return nil, err
	}
	return out, nil
}
