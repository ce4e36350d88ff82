// Package plist reads and writes Apple property lists: the one reader of
// the module, for the lists a developer or a build sends (provisioning
// profiles, an .ipa's Info.plist, Expo.plist, ExportOptions.plist) and the
// system's own (launchd jobs, vmnet's DHCP leases).
//
// Decoding is howett.net/plist's (XML, binary and OpenStep text), behind
// two guards it lacks: nesting deeper than MaxDepth is refused before it is
// decoded (its parsers recurse once per level, and its binary parser scans
// every open container at each level), and a fault inside it is an error,
// never a crash of the process reading someone else's file.
//
// An Xcode project (project.pbxproj) is edited in place by internal/xcode,
// which keeps each value's place in the text; that is an editor, not a
// second reader.
package plist

import (
	"bytes"
	"encoding/binary"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"howett.net/plist"
)

// MaxDepth bounds nesting: a profile's plist is three levels deep, an
// Info.plist rarely more than five.
const MaxDepth = 64

// Format is a property list's encoding.
type Format int

// The formats Unmarshal reads; Marshal writes XML.
const (
	XML      Format = plist.XMLFormat
	Binary   Format = plist.BinaryFormat
	OpenStep Format = plist.OpenStepFormat
	GNUStep  Format = plist.GNUStepFormat
)

// Unmarshal decodes data into v as howett.net/plist's Unmarshal does (struct
// fields by `plist:"Key"` tags), once its nesting is known to be at most
// MaxDepth.
func Unmarshal(data []byte, v any) (f Format, err error) {
	if err := checkDepth(data); err != nil {
		return 0, fmt.Errorf("property list: %w", err)
	}
	defer func() {
		if r := recover(); r != nil {
			f, err = 0, fmt.Errorf("property list: malformed (%v)", r)
		}
	}()
	n, err := plist.Unmarshal(data, v)
	if err != nil {
		return 0, err // "plist: error parsing XML property list: …"
	}
	return Format(n), nil
}

// Parse decodes data into plain values: dict → map[string]any, array →
// []any, string → string, integer → int64, real → float64, boolean →
// bool, date → time.Time, data → []byte. An integer beyond int64 is an
// error.
func Parse(data []byte) (any, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, errors.New("property list: empty")
	}
	var v any
	if _, err := Unmarshal(data, &v); err != nil {
		return nil, err
	}
	return plain(v)
}

// plain turns howett's integers (uint64 unless negative) into int64.
func plain(v any) (any, error) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			p, err := plain(e)
			if err != nil {
				return nil, err
			}
			x[k] = p
		}
	case []any:
		for i, e := range x {
			p, err := plain(e)
			if err != nil {
				return nil, err
			}
			x[i] = p
		}
	case uint64:
		if x > math.MaxInt64 {
			return nil, fmt.Errorf("property list: integer %d is out of range", x)
		}
		return int64(x), nil
	case nil:
		return nil, errors.New("property list: no value")
	case string, int64, float64, bool, time.Time, []byte:
	default:
		return nil, fmt.Errorf("property list: unexpected value of type %T", v)
	}
	return v, nil
}

// Marshal encodes v as an XML property list indented with tabs, as Xcode
// and launchd write them.
func Marshal(v any) ([]byte, error) {
	b, err := plist.MarshalIndent(v, plist.XMLFormat, "\t")
	if err != nil {
		return nil, fmt.Errorf("property list: %w", err)
	}
	return b, nil
}

// MarshalBinary encodes v as a binary property list, as Xcode leaves an
// app's Info.plist.
func MarshalBinary(v any) ([]byte, error) {
	b, err := plist.Marshal(v, plist.BinaryFormat)
	if err != nil {
		return nil, fmt.Errorf("property list: %w", err)
	}
	return b, nil
}

// checkDepth refuses a list nested deeper than MaxDepth, reading it in the
// format the decoder will choose: binary after its magic, else XML, else
// OpenStep text.
func checkDepth(data []byte) error {
	if bytes.HasPrefix(data, []byte("bplist")) {
		return binaryDepth(data)
	}
	if err := xmlDepth(data); err == nil || !errors.Is(err, errNotXML) {
		return err
	}
	return textDepth(data)
}

var (
	errTooDeep = fmt.Errorf("nested deeper than %d levels", MaxDepth)
	errNotXML  = errors.New("not XML")
)

// xmlDepth counts open elements (<plist> and the value elements).
func xmlDepth(data []byte) error {
	d := xml.NewDecoder(bytes.NewReader(data))
	depth, sawElement := 0, false
	for {
		tok, err := d.RawToken()
		if err == io.EOF {
			if !sawElement {
				return errNotXML
			}
			return nil
		}
		if err != nil {
			return errNotXML // the decoder falls back to the text formats
		}
		switch tok.(type) {
		case xml.StartElement:
			sawElement = true
			if depth++; depth > MaxDepth+2 { // <plist>, the containers, a leaf
				return errTooDeep
			}
		case xml.EndElement:
			depth--
		}
	}
}

// textDepth counts the open dictionaries and arrays of an OpenStep or
// GNUstep list, outside its quoted strings and comments.
func textDepth(data []byte) error {
	depth := 0
	for i := 0; i < len(data); i++ {
		switch c := data[i]; c {
		case '{', '(':
			if depth++; depth > MaxDepth {
				return errTooDeep
			}
		case '}', ')':
			depth--
		case '"', '\'':
			for i++; i < len(data) && data[i] != c; i++ {
				if data[i] == '\\' {
					i++
				}
			}
		case '/':
			switch {
			case i+1 < len(data) && data[i+1] == '/':
				for i < len(data) && data[i] != '\n' {
					i++
				}
			case i+1 < len(data) && data[i+1] == '*':
				end := bytes.Index(data[i+2:], []byte("*/"))
				if end < 0 {
					return nil // unterminated: the decoder refuses it
				}
				i += 2 + end + 1
			}
		}
	}
	return nil
}

// binaryDepth walks a binary list's containers from its top object, each
// object once (an object shared by several containers is measured once; a
// container inside itself is refused, as the decoder would). A list too
// malformed to walk is left to the decoder's own errors.
func binaryDepth(data []byte) error {
	if len(data) < 8+32 {
		return nil
	}
	t := data[len(data)-32:]
	offSize, refSize := int(t[6]), int(t[7])
	count, top, table := binary.BigEndian.Uint64(t[8:]), binary.BigEndian.Uint64(t[16:]), binary.BigEndian.Uint64(t[24:])
	if offSize < 1 || offSize > 8 || refSize < 1 || refSize > 8 || count == 0 || top >= count ||
		table >= uint64(len(data)) || count > (uint64(len(data))-table)/uint64(offSize) {
		return nil
	}
	be := func(b []byte) uint64 {
		var v uint64
		for _, c := range b {
			v = v<<8 | uint64(c)
		}
		return v
	}
	// children returns the object references of container i (nil for
	// anything else or anything out of bounds).
	children := func(i uint64) []uint64 {
		at := table + i*uint64(offSize)
		off := be(data[at : at+uint64(offSize)])
		if off >= table {
			return nil
		}
		marker := data[off]
		kind, n := marker>>4, uint64(marker&0x0f)
		if kind != 0xa && kind != 0xc && kind != 0xd {
			return nil
		}
		pos := off + 1
		if n == 0x0f { // the count follows as an integer object
			if pos >= table || data[pos]>>4 != 0x1 {
				return nil
			}
			size := uint64(1) << (data[pos] & 0x0f)
			if size > 8 || pos+1+size > table {
				return nil
			}
			n, pos = be(data[pos+1:pos+1+size]), pos+1+size
		}
		if kind == 0xd {
			n *= 2 // keys, then values
		}
		if n > (table-pos)/uint64(refSize) {
			return nil
		}
		refs := make([]uint64, 0, n)
		for j := uint64(0); j < n; j++ {
			r := be(data[pos+j*uint64(refSize) : pos+(j+1)*uint64(refSize)])
			if r < count {
				refs = append(refs, r)
			}
		}
		return refs
	}
	// An explicit stack (no recursion on someone else's nesting); done
	// holds each finished container's height.
	const open = -1
	done := map[uint64]int{}
	type frame struct {
		obj      uint64
		refs     []uint64
		next, hi int
	}
	stack := []frame{{obj: top, refs: children(top)}}
	done[top] = open
	for len(stack) > 0 {
		f := &stack[len(stack)-1]
		if f.next == len(f.refs) {
			h := f.hi + 1
			done[f.obj] = h
			stack = stack[:len(stack)-1]
			if len(stack) > 0 {
				p := &stack[len(stack)-1]
				p.hi = max(p.hi, h)
			}
			continue
		}
		c := f.refs[f.next]
		f.next++
		switch h, seen := done[c]; {
		case seen && h == open:
			return errors.New("a container holds itself")
		case seen:
			if len(stack)+h > MaxDepth {
				return errTooDeep
			}
			f.hi = max(f.hi, h)
		default:
			refs := children(c)
			if refs == nil {
				continue
			}
			if len(stack) >= MaxDepth {
				return errTooDeep
			}
			done[c] = open
			stack = append(stack, frame{obj: c, refs: refs})
		}
	}
	return nil
}
