package faketarttest

import (
	"os"
	"path/filepath"
	"testing"
)

// A reader may catch a fake halfway through appending its record: the
// whole records are read and the unfinished one is left for later.
func TestReadLogLeavesARecordBeingWritten(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tart.log")
	whole := `{"event":"exit","pid":7,"cmd":"list","argv":["list"],"exit":0}` + "\n"
	partial := `{"event":"exit","pid":8,"cmd":"list","argv":["list","--format","json"],"stdout":"[\n  {\n    \"Source\" : \"lo`
	if err := os.WriteFile(path, []byte(whole+partial), 0o644); err != nil {
		t.Fatal(err)
	}
	got := ReadLog(t, path)
	if len(got) != 1 || got[0].PID != 7 || got[0].Cmd != "list" {
		t.Fatalf("ReadLog with a record being written = %+v, want only pid 7's", got)
	}
	if err := os.WriteFile(path, []byte(whole+partial[:len(partial)-2]+`"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := ReadLog(t, path); len(got) != 2 || got[1].PID != 8 {
		t.Fatalf("ReadLog once the record is whole = %+v, want pids 7 and 8", got)
	}
}
