package install

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
)

// ipa returns a zip of the named files, each holding a small plist.
func ipa(t *testing.T, names ...string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, n := range names {
		f, err := zw.Create(n)
		if err != nil {
			t.Fatal(err)
		}
		f.Write([]byte(`<?xml version="1.0"?><plist version="1.0"><dict><key>CFBundleIdentifier</key><string>com.example.` +
			strings.ReplaceAll(n, "/", ".") + `</string></dict></plist>`))
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// A directory header hidden after the directory the end record declares is
// never read: archive/zip alone would read on until a header fails to
// parse, a record per header, however many an archive hides there.
func TestReadAppInfoReadsOnlyTheDeclaredDirectory(t *testing.T) {
	raw := ipa(t, "Payload/A.app/readme", "Payload/A.app/Info.plist")
	end := bytes.LastIndex(raw, []byte(endSig))
	dirSize := binary.LittleEndian.Uint32(raw[end+12:])
	dirOffset := binary.LittleEndian.Uint32(raw[end+16:])
	// The first header alone: the second (the Info.plist's) now lies past the declared directory.
	first := bytes.Index(raw[dirOffset+4:], []byte("PK\x01\x02")) + 4
	binary.LittleEndian.PutUint16(raw[end+8:], 1)
	binary.LittleEndian.PutUint16(raw[end+10:], 1)
	binary.LittleEndian.PutUint32(raw[end+12:], uint32(first))
	if uint32(first) >= dirSize {
		t.Fatalf("test setup: first header %d of %d", first, dirSize)
	}
	_, err := ReadAppInfo(bytes.NewReader(raw), int64(len(raw)))
	if err == nil || !strings.Contains(err.Error(), "no Payload/<name>.app/Info.plist") {
		t.Fatalf("the hidden Info.plist was read: %v", err)
	}
	// The same archive, declared whole, is read.
	raw = ipa(t, "Payload/A.app/readme", "Payload/A.app/Info.plist")
	if info, err := ReadAppInfo(bytes.NewReader(raw), int64(len(raw))); err != nil || info.BundleID != "com.example.Payload.A.app.Info.plist" {
		t.Fatalf("a plain IPA: %+v, %v", info, err)
	}
}

// An end record announcing more entries than are read is refused before
// archive/zip preallocates for them.
func TestReadAppInfoRefusesHugeDirectories(t *testing.T) {
	raw := ipa(t, "Payload/A.app/Info.plist")
	end := bytes.LastIndex(raw, []byte(endSig))
	// zip64: an end record of 0xffff entries, a locator, and a zip64 end record claiming 2^40 entries.
	z64 := make([]byte, end64Len)
	copy(z64, end64Sig)
	binary.LittleEndian.PutUint64(z64[4:], end64Len-12)
	binary.LittleEndian.PutUint64(z64[24:], 1<<40)
	binary.LittleEndian.PutUint64(z64[32:], 1<<40)
	binary.LittleEndian.PutUint64(z64[40:], uint64(binary.LittleEndian.Uint32(raw[end+12:])))
	binary.LittleEndian.PutUint64(z64[48:], uint64(binary.LittleEndian.Uint32(raw[end+16:])))
	loc := make([]byte, end64LocLen)
	copy(loc, end64LocSig)
	binary.LittleEndian.PutUint64(loc[8:], uint64(end))
	binary.LittleEndian.PutUint32(loc[16:], 1)
	tailRec := append([]byte(nil), raw[end:]...)
	binary.LittleEndian.PutUint16(tailRec[8:], 0xffff)
	binary.LittleEndian.PutUint16(tailRec[10:], 0xffff)
	bomb := append(append(append(append([]byte(nil), raw[:end]...), z64...), loc...), tailRec...)
	_, err := ReadAppInfo(bytes.NewReader(bomb), int64(len(bomb)))
	if err == nil || !strings.Contains(err.Error(), "entries; at most 100000 are read") {
		t.Fatalf("an IPA announcing 2^40 entries: %v", err)
	}
	// The same layout announcing its one entry is read: the zip64 parsing is right.
	binary.LittleEndian.PutUint64(bomb[end+24:], 1)
	binary.LittleEndian.PutUint64(bomb[end+32:], 1)
	if info, err := ReadAppInfo(bytes.NewReader(bomb), int64(len(bomb))); err != nil || info.BundleID == "" {
		t.Fatalf("a zip64 IPA: %+v, %v", info, err)
	}
}
