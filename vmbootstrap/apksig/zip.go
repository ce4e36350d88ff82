package apksig

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
)

const (
	eocdSig       = 0x06054b50
	eocdSize      = 22
	zip64LocSig   = 0x07064b50
	zip64LocSize  = 20
	maxCommentLen = 0xffff

	blockMagic = "APK Sig Block 42"
	blockIDv2  = 0x7109871a
	blockIDv3  = 0xf05368c0

	// maxBlockBytes bounds the APK signing block read into memory: real
	// ones are a few kilobytes (a few hundred with verity padding).
	maxBlockBytes = 16 << 20
)

// zipLayout is where an APK's sections are: the entries, the signing
// block (if any), the central directory and the end record.
type zipLayout struct {
	r          io.ReaderAt
	size       int64
	eocdOffset int64
	eocd       []byte // the end of central directory record, comment included
	cdOffset   int64
	cdSize     int64
	// blockOffset is where the APK signing block starts; cdOffset when
	// there is none.
	blockOffset int64
}

// locateZip finds the end of central directory record (the last one whose
// comment runs exactly to the end of the file) and the central directory.
func locateZip(r io.ReaderAt, size int64) (*zipLayout, error) {
	if size < eocdSize {
		return nil, fmt.Errorf("%w: %d bytes, shorter than a ZIP end record", ErrNotZip, size)
	}
	tailLen := min(size, eocdSize+maxCommentLen)
	tail, err := readAt(r, size-tailLen, tailLen)
	if err != nil {
		return nil, err
	}
	at := -1
	for i := len(tail) - eocdSize; i >= 0; i-- {
		if binary.LittleEndian.Uint32(tail[i:]) == eocdSig && i+eocdSize+int(binary.LittleEndian.Uint16(tail[i+20:])) == len(tail) {
			at = i
			break
		}
	}
	if at < 0 {
		return nil, fmt.Errorf("%w: no end of central directory record", ErrNotZip)
	}
	z := &zipLayout{r: r, size: size, eocdOffset: size - tailLen + int64(at), eocd: tail[at:]}
	z.cdSize = int64(binary.LittleEndian.Uint32(z.eocd[12:]))
	z.cdOffset = int64(binary.LittleEndian.Uint32(z.eocd[16:]))
	if z.eocdOffset >= zip64LocSize {
		loc, err := readAt(r, z.eocdOffset-zip64LocSize, 4)
		if err != nil {
			return nil, err
		}
		if binary.LittleEndian.Uint32(loc) == zip64LocSig {
			return nil, fmt.Errorf("a ZIP64 archive: Android does not install those")
		}
	}
	if z.cdOffset+z.cdSize != z.eocdOffset {
		return nil, fmt.Errorf("%w: the central directory (offset %d, %d bytes) does not end where the end record starts (%d)", ErrNotZip, z.cdOffset, z.cdSize, z.eocdOffset)
	}
	z.blockOffset = z.cdOffset
	return z, nil
}

// signingBlock returns the ID-value pairs of the APK signing block that
// sits right before the central directory, or none when there is none.
//
// The block: uint64 size (of what follows it), the pairs (each a uint64
// length, a uint32 ID and the value), the same uint64 size, and the magic.
func (z *zipLayout) signingBlock() (map[uint32][]byte, error) {
	const footer = 8 + len(blockMagic)
	if z.cdOffset < int64(footer) {
		return nil, nil
	}
	foot, err := readAt(z.r, z.cdOffset-int64(footer), int64(footer))
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(foot[8:], []byte(blockMagic)) {
		return nil, nil
	}
	size := binary.LittleEndian.Uint64(foot)
	if size < uint64(footer) || size > maxBlockBytes || size+8 > uint64(z.cdOffset) {
		return nil, fmt.Errorf("APK signing block of impossible size %d before the central directory at %d", size, z.cdOffset)
	}
	start := z.cdOffset - int64(size) - 8
	block, err := readAt(z.r, start, int64(size)+8)
	if err != nil {
		return nil, err
	}
	if binary.LittleEndian.Uint64(block) != size {
		return nil, fmt.Errorf("APK signing block's two sizes differ (%d and %d)", binary.LittleEndian.Uint64(block), size)
	}
	z.blockOffset = start
	pairs := block[8 : len(block)-footer]
	values := map[uint32][]byte{}
	for len(pairs) > 0 {
		if len(pairs) < 8 {
			return nil, fmt.Errorf("APK signing block: %d stray bytes after its last pair", len(pairs))
		}
		n := binary.LittleEndian.Uint64(pairs)
		pairs = pairs[8:]
		if n < 4 || n > uint64(len(pairs)) {
			return nil, fmt.Errorf("APK signing block: a pair of %d bytes with %d left", n, len(pairs))
		}
		id := binary.LittleEndian.Uint32(pairs)
		if _, dup := values[id]; !dup {
			values[id] = pairs[4:n]
		}
		pairs = pairs[n:]
	}
	return values, nil
}
