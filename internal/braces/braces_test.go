package braces

import (
	"slices"
	"strings"
	"testing"
)

func TestExpand(t *testing.T) {
	for in, want := range map[string][]string{
		"a/{b,c{d,e}}/*.{apk,aab}": {"a/b/*.apk", "a/b/*.aab", "a/cd/*.apk", "a/cd/*.aab", "a/ce/*.apk", "a/ce/*.aab"},
		"apps/*":                   {"apps/*"},
		"{a}/x":                    {"{a}/x"},        // no alternatives: literal, as micromatch
		"{1..3}":                   {"{1..3}"},       // a range is not expanded here
		"a/{b,c":                   {"a/{b,c"},       // unclosed: literal
		"{a}{b,c}":                 {"{a}b", "{a}c"}, // the first group with alternatives
		"{,x}y":                    {"y", "xy"},      // an empty alternative
		"{a,b}/{c,d}":              {"a/c", "a/d", "b/c", "b/d"},
	} {
		got, err := Expand(in, 64)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("Expand(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := Expand(strings.Repeat("{a,b}", 7), 64); err == nil || !strings.Contains(err.Error(), "more than 64") {
		t.Errorf("128 alternatives with a limit of 64: %v", err)
	}
	if got, err := Expand(strings.Repeat("{a,b}", 6), 64); err != nil || len(got) != 64 {
		t.Errorf("64 alternatives with a limit of 64: %d, %v", len(got), err)
	}
}
