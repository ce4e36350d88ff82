package install

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/freeagent-build/freeagent/internal/plist"
)

// AppInfo is what an iOS manifest (and a store upload) says about the app.
type AppInfo struct {
	BundleID, Version, Title string
	// ShortVersion and BuildNumber are CFBundleShortVersionString and
	// CFBundleVersion as the plist has them (Version is the first, else
	// the second): App Store Connect takes an upload by the pair.
	ShortVersion, BuildNumber string
}

// What reading an IPA may cost, whatever its headers claim. The archive is
// build output, written by code the controller does not trust: its central
// directory is bounded in entries and bytes before archive/zip sees it (which
// keeps a record per entry and preallocates for the count the end record
// announces), and only the app's Info.plist is decompressed, within
// maxPlistBytes. A real app has a few thousand entries.
const (
	maxIPAEntries   = 100_000
	maxIPADirectory = 32 << 20
	maxPlistBytes   = 4 << 20
)

// ReadAppInfo reads the bundle id, version and name from an IPA's
// Payload/<name>.app/Info.plist (XML or binary), within the bounds above.
func ReadAppInfo(r io.ReaderAt, size int64) (AppInfo, error) {
	dir, err := readDirectoryBounds(r, size)
	if err != nil {
		return AppInfo{}, fmt.Errorf("read the IPA: %w", err)
	}
	if dir.entries > maxIPAEntries {
		return AppInfo{}, fmt.Errorf("the IPA lists %d entries; at most %d are read", dir.entries, maxIPAEntries)
	}
	if dir.size > maxIPADirectory {
		return AppInfo{}, fmt.Errorf("the IPA's central directory is %d bytes; at most %d MiB are read", dir.size, maxIPADirectory>>20)
	}
	zr, err := zip.NewReader(dir.only(r), size)
	if err != nil {
		return AppInfo{}, fmt.Errorf("read the IPA: %w", err)
	}
	for _, f := range zr.File {
		dir, file := path.Split(f.Name)
		if file != "Info.plist" || !strings.HasPrefix(dir, "Payload/") || strings.Count(dir, "/") != 2 || !strings.HasSuffix(dir, ".app/") {
			continue
		}
		if f.UncompressedSize64 > maxPlistBytes {
			return AppInfo{}, fmt.Errorf("the IPA's Info.plist is larger than %d MiB", maxPlistBytes>>20)
		}
		rc, err := f.Open()
		if err != nil {
			return AppInfo{}, fmt.Errorf("read the IPA's Info.plist: %w", err)
		}
		b, err := io.ReadAll(io.LimitReader(rc, maxPlistBytes+1))
		rc.Close()
		if err != nil {
			return AppInfo{}, fmt.Errorf("read the IPA's Info.plist: %w", err)
		}
		if len(b) > maxPlistBytes {
			return AppInfo{}, fmt.Errorf("the IPA's Info.plist decompresses to more than %d MiB", maxPlistBytes>>20)
		}
		var p struct {
			ID          string `plist:"CFBundleIdentifier"`
			Short       string `plist:"CFBundleShortVersionString"`
			Version     string `plist:"CFBundleVersion"`
			Name        string `plist:"CFBundleName"`
			DisplayName string `plist:"CFBundleDisplayName"`
		}
		if _, err := plist.Unmarshal(b, &p); err != nil {
			return AppInfo{}, fmt.Errorf("parse the IPA's Info.plist: %w", err)
		}
		if p.ID == "" {
			return AppInfo{}, errors.New("the IPA's Info.plist has no CFBundleIdentifier")
		}
		info := AppInfo{BundleID: p.ID, Version: p.Short, Title: p.DisplayName, ShortVersion: p.Short, BuildNumber: p.Version}
		if info.Version == "" {
			info.Version = p.Version
		}
		if info.Title == "" {
			info.Title = p.Name
		}
		if info.Title == "" {
			info.Title = strings.TrimSuffix(path.Base(dir), ".app")
		}
		return info, nil
	}
	return AppInfo{}, errors.New("the IPA has no Payload/<name>.app/Info.plist")
}

// directory is where a zip's central directory is, as its end records say.
type directory struct {
	entries, offset, size uint64
	end                   int64 // where the end records start
}

const (
	endSig         = "PK\x05\x06"
	end64LocSig    = "PK\x06\x07"
	end64Sig       = "PK\x06\x06"
	endLen         = 22
	end64LocLen    = 20
	end64Len       = 56
	maxCommentSize = 0xffff
)

// readDirectoryBounds reads the end of central directory record (and its
// zip64 form) the way archive/zip finds it: the last signature within the
// comment's reach of the end.
func readDirectoryBounds(r io.ReaderAt, size int64) (directory, error) {
	var d directory
	tail := min(size, endLen+maxCommentSize)
	buf := make([]byte, tail)
	if _, err := r.ReadAt(buf, size-tail); err != nil && !errors.Is(err, io.EOF) {
		return d, err
	}
	i := bytes.LastIndex(buf[:max(0, len(buf)-endLen+4)], []byte(endSig))
	if i < 0 {
		return d, zip.ErrFormat
	}
	e := buf[i:]
	d.end = size - tail + int64(i)
	d.entries = uint64(binary.LittleEndian.Uint16(e[10:]))
	d.size = uint64(binary.LittleEndian.Uint32(e[12:]))
	d.offset = uint64(binary.LittleEndian.Uint32(e[16:]))
	if d.entries != 0xffff && d.size != 0xffffffff && d.offset != 0xffffffff {
		return d, nil
	}
	// zip64: the locator right before the end record points at the zip64 end record.
	if d.end < end64LocLen {
		return d, zip.ErrFormat
	}
	loc := make([]byte, end64LocLen)
	if _, err := r.ReadAt(loc, d.end-end64LocLen); err != nil {
		return d, err
	}
	if string(loc[:4]) != end64LocSig {
		return d, nil // not zip64 after all: the values are what they say
	}
	at := binary.LittleEndian.Uint64(loc[8:])
	if at > uint64(d.end) || uint64(d.end)-at < end64Len {
		return d, zip.ErrFormat
	}
	rec := make([]byte, end64Len)
	if _, err := r.ReadAt(rec, int64(at)); err != nil {
		return d, err
	}
	if string(rec[:4]) != end64Sig {
		return d, zip.ErrFormat
	}
	d.end = int64(at)
	d.entries = binary.LittleEndian.Uint64(rec[32:])
	d.size = binary.LittleEndian.Uint64(rec[40:])
	d.offset = binary.LittleEndian.Uint64(rec[48:])
	return d, nil
}

// only returns r with the bytes between the central directory's declared
// end and the end records read as zeros: archive/zip reads directory
// headers until one fails to parse, so headers an archive hides past its
// declared directory would otherwise each cost a record.
func (d directory) only(r io.ReaderAt) io.ReaderAt {
	from := d.offset + d.size
	if d.offset > uint64(d.end) || d.size > uint64(d.end) || from >= uint64(d.end) {
		return r
	}
	return gapReader{r: r, from: int64(from), to: d.end}
}

type gapReader struct {
	r        io.ReaderAt
	from, to int64 // [from, to) reads as zeros
}

func (g gapReader) ReadAt(p []byte, off int64) (int, error) {
	n, err := g.r.ReadAt(p, off)
	lo, hi := max(off, g.from), min(off+int64(n), g.to)
	if lo < hi {
		clear(p[lo-off : hi-off])
	}
	return n, err
}
