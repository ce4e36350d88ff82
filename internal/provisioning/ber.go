package provisioning

import (
	"bytes"
	"errors"
	"fmt"
)

// Apple signs provisioning profiles as CMS SignedData in BER, with
// indefinite lengths and the plist split into a constructed OCTET STRING;
// encoding/asn1 reads only DER, so this file holds a small BER reader
// that accepts both.

// berNode is one BER element: a primitive one keeps its content, a
// constructed one its children.
type berNode struct {
	class       byte // 0 universal, 1 application, 2 context-specific, 3 private
	constructed bool
	tag         int
	content     []byte
	children    []berNode
}

// Universal tags this package looks at.
const (
	tagInteger     = 2
	tagOctetString = 4
	tagOID         = 6
	tagSequence    = 16
	tagSet         = 17
)

// BER limits: real profiles nest about ten deep and hold a few hundred
// elements (one per device and certificate).
const (
	maxBERDepth = 32
	maxBERNodes = 1 << 16
)

var errTruncated = errors.New("truncated")

// berReader parses with a budget of elements so that no input, however
// it nests, costs more than maxBERNodes allocations.
type berReader struct {
	nodes int
}

// parseOne reads one element from b and returns it and the bytes after it.
func (r *berReader) parseOne(b []byte, depth int) (berNode, []byte, error) {
	var n berNode
	if depth > maxBERDepth {
		return n, nil, fmt.Errorf("nested deeper than %d", maxBERDepth)
	}
	if r.nodes++; r.nodes > maxBERNodes {
		return n, nil, fmt.Errorf("more than %d elements", maxBERNodes)
	}
	if len(b) < 2 {
		return n, nil, errTruncated
	}
	n.class = b[0] >> 6
	n.constructed = b[0]&0x20 != 0
	n.tag = int(b[0] & 0x1f)
	b = b[1:]
	if n.tag == 0x1f { // high tag number form
		n.tag = 0
		for i := 0; ; i++ {
			if len(b) == 0 {
				return n, nil, errTruncated
			}
			if i == 3 {
				return n, nil, errors.New("tag number too large")
			}
			c := b[0]
			b = b[1:]
			n.tag = n.tag<<7 | int(c&0x7f)
			if c&0x80 == 0 {
				break
			}
		}
	}
	if len(b) == 0 {
		return n, nil, errTruncated
	}
	l := int(b[0])
	b = b[1:]
	if l == 0x80 {
		if !n.constructed {
			return n, nil, errors.New("indefinite length on a primitive element")
		}
		for {
			if len(b) >= 2 && b[0] == 0 && b[1] == 0 {
				return n, b[2:], nil
			}
			if len(b) == 0 {
				return n, nil, errors.New("indefinite length without its end-of-contents")
			}
			child, rest, err := r.parseOne(b, depth+1)
			if err != nil {
				return n, nil, err
			}
			n.children = append(n.children, child)
			b = rest
		}
	}
	if l > 0x80 {
		size := l & 0x7f
		if size > 4 {
			return n, nil, fmt.Errorf("length of %d bytes", size)
		}
		if len(b) < size {
			return n, nil, errTruncated
		}
		l = 0
		for _, c := range b[:size] {
			l = l<<8 | int(c)
		}
		b = b[size:]
	}
	if l < 0 || l > len(b) {
		return n, nil, errTruncated
	}
	content, rest := b[:l], b[l:]
	if !n.constructed {
		n.content = content
		return n, rest, nil
	}
	for len(content) > 0 {
		child, after, err := r.parseOne(content, depth+1)
		if err != nil {
			return n, nil, err
		}
		n.children = append(n.children, child)
		content = after
	}
	return n, rest, nil
}

func (n berNode) is(class byte, constructed bool, tag int) bool {
	return n.class == class && n.constructed == constructed && n.tag == tag
}

// octets returns an OCTET STRING's bytes, joining the segments of a
// constructed one.
func (n berNode) octets(limit int) ([]byte, error) {
	if n.class != 0 || n.tag != tagOctetString {
		return nil, errors.New("not an OCTET STRING")
	}
	if !n.constructed {
		return n.content, nil
	}
	var out []byte
	var walk func(berNode) error
	walk = func(s berNode) error {
		if s.class != 0 || s.tag != tagOctetString {
			return errors.New("a constructed OCTET STRING holds something else")
		}
		if !s.constructed {
			if len(out)+len(s.content) > limit {
				return fmt.Errorf("content larger than %d bytes", limit)
			}
			out = append(out, s.content...)
			return nil
		}
		for _, c := range s.children {
			if err := walk(c); err != nil {
				return err
			}
		}
		return nil
	}
	return out, walk(n)
}

// DER encodings of the object identifiers of CMS content types.
var (
	oidSignedData = []byte{0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x07, 0x02} // 1.2.840.113549.1.7.2
	oidData       = []byte{0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x07, 0x01} // 1.2.840.113549.1.7.1
)

// signedContent returns the encapsulated content of a CMS SignedData
// (RFC 5652): ContentInfo{signedData, [0] SignedData{version,
// digestAlgorithms, encapContentInfo{data, [0] OCTET STRING}, ...}}. The
// signature is not verified: codesign and xcodebuild do that on the Mac.
func signedContent(raw []byte) ([]byte, error) {
	var r berReader
	top, rest, err := r.parseOne(raw, 0)
	if err != nil {
		return nil, fmt.Errorf("not a CMS envelope: %w", err)
	}
	// Trailing zero bytes pad some files; anything else is not a profile.
	if len(bytes.TrimRight(rest, "\x00")) != 0 {
		return nil, fmt.Errorf("not a CMS envelope: %d bytes after its end", len(rest))
	}
	if !top.is(0, true, tagSequence) || len(top.children) < 2 {
		return nil, errors.New("not a CMS envelope: no ContentInfo SEQUENCE")
	}
	ct := top.children[0]
	if !ct.is(0, false, tagOID) || !bytes.Equal(ct.content, oidSignedData) {
		return nil, errors.New("not CMS SignedData: the content type is not 1.2.840.113549.1.7.2")
	}
	wrapper := top.children[1]
	if !wrapper.is(2, true, 0) || len(wrapper.children) != 1 {
		return nil, errors.New("CMS SignedData without its [0] content")
	}
	sd := wrapper.children[0]
	if !sd.is(0, true, tagSequence) || len(sd.children) < 3 ||
		!sd.children[0].is(0, false, tagInteger) || !sd.children[1].is(0, true, tagSet) {
		return nil, errors.New("malformed CMS SignedData (version, digestAlgorithms)")
	}
	eci := sd.children[2]
	if !eci.is(0, true, tagSequence) || len(eci.children) < 1 || !eci.children[0].is(0, false, tagOID) {
		return nil, errors.New("malformed CMS SignedData: no encapContentInfo")
	}
	if !bytes.Equal(eci.children[0].content, oidData) {
		return nil, errors.New("CMS SignedData encapsulates something other than data")
	}
	if len(eci.children) < 2 {
		return nil, errors.New("CMS SignedData with a detached signature: the profile's content is not in the file")
	}
	ec := eci.children[1]
	if !ec.is(2, true, 0) || len(ec.children) != 1 {
		return nil, errors.New("malformed CMS SignedData: eContent is not [0] EXPLICIT")
	}
	content, err := ec.children[0].octets(len(raw))
	if err != nil {
		return nil, fmt.Errorf("malformed CMS SignedData eContent: %w", err)
	}
	return content, nil
}
