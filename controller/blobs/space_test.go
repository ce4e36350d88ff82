package blobs

import (
	"errors"
	"strings"
	"testing"
)

func TestParseFloor(t *testing.T) {
	for in, want := range map[string]Floor{
		"5GiB": {Bytes: 5 << 30}, "500MB": {Bytes: 500e6}, "1073741824": {Bytes: 1 << 30}, "1.5 GiB": {Bytes: 3 << 29},
		"5%": {Percent: 5}, "0.5%": {Percent: 0.5}, "0": {}, "0%": {},
	} {
		if got, err := ParseFloor(in); err != nil || got != want {
			t.Errorf("ParseFloor(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "lots", "-1GiB", "100%", "5 parsecs", "1e30TiB"} {
		if _, err := ParseFloor(in); err == nil {
			t.Errorf("ParseFloor(%q) accepted", in)
		}
	}
}

// The floor is checked against the real disk of the file store: a floor
// above the disk's size refuses, naming the setting; a tiny one passes.
func TestCheckFloorOnTheFileStore(t *testing.T) {
	s, err := Open(t.TempDir(), make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	err = s.CheckFloor(Floor{Bytes: 1 << 62}, "--min-free-disk")
	if !errors.Is(err, ErrNoSpace) || !strings.Contains(err.Error(), "--min-free-disk") || !strings.Contains(err.Error(), "free") {
		t.Fatalf("above the disk: %v", err)
	}
	if err := s.CheckFloor(Floor{Bytes: 1}, "--min-free-disk"); err != nil {
		t.Fatalf("a 1-byte floor: %v", err)
	}
	if err := s.CheckFloor(Floor{}, "--min-free-disk"); err != nil {
		t.Fatalf("no floor: %v", err)
	}
}
