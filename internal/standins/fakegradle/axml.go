package main

import (
	"bytes"
	"encoding/binary"
	"unicode/utf16"
)

// Android's binary XML (what aapt2 compiles AndroidManifest.xml into in an
// APK): a string pool, the resource ids of the android: attributes, then
// namespace and element chunks. Attributes in the android namespace are
// matched by resource id, so each must be in androidAttrIDs.

const androidNS = "http://schemas.android.com/apk/res/android"

// androidAttrIDs are the framework's ids (android.R.attr) of the
// attributes a merged manifest of the template carries.
var androidAttrIDs = map[string]uint32{
	"label":                     0x01010001,
	"icon":                      0x01010002,
	"name":                      0x01010003,
	"exported":                  0x01010010,
	"scheme":                    0x01010027,
	"value":                     0x01010024,
	"minSdkVersion":             0x0101020c,
	"versionCode":               0x0101021b,
	"versionName":               0x0101021c,
	"maxSdkVersion":             0x01010271,
	"targetSdkVersion":          0x01010270,
	"allowBackup":               0x01010280,
	"compileSdkVersion":         0x01010572,
	"compileSdkVersionCodename": 0x01010573,
	"supportsRtl":               0x010103af,
}

// xmlAttr is an attribute: a string, an integer or a boolean.
type xmlAttr struct {
	android bool // in the android namespace
	name    string
	str     string
	num     int
	kind    byte // typeString, typeInt, typeBool
}

const (
	typeString = 0x03
	typeInt    = 0x10
	typeBool   = 0x12
)

func strAttr(name, v string) xmlAttr {
	return xmlAttr{android: true, name: name, str: v, kind: typeString}
}
func intAttr(name string, v int) xmlAttr {
	return xmlAttr{android: true, name: name, num: v, kind: typeInt}
}
func boolAttr(name string, v bool) xmlAttr {
	a := xmlAttr{android: true, name: name, kind: typeBool}
	if v {
		a.num = -1
	}
	return a
}

// xmlElem is an element of the manifest.
type xmlElem struct {
	name     string
	attrs    []xmlAttr
	children []*xmlElem
}

// encodeAXML encodes root, declaring the android namespace on it.
func encodeAXML(root *xmlElem) []byte {
	// The pool: android attribute names first, in the order of their ids
	// in the resource map, then every other string.
	var pool []string
	index := map[string]int{}
	var resIDs []uint32
	add := func(s string) {
		if _, ok := index[s]; !ok {
			index[s] = len(pool)
			pool = append(pool, s)
		}
	}
	var walk func(e *xmlElem, f func(*xmlElem))
	walk = func(e *xmlElem, f func(*xmlElem)) {
		f(e)
		for _, c := range e.children {
			walk(c, f)
		}
	}
	walk(root, func(e *xmlElem) {
		for _, a := range e.attrs {
			if a.android {
				if _, ok := index[a.name]; !ok {
					add(a.name)
					resIDs = append(resIDs, androidAttrIDs[a.name])
				}
			}
		}
	})
	add("android")
	add(androidNS)
	walk(root, func(e *xmlElem) {
		add(e.name)
		for _, a := range e.attrs {
			add(a.name)
			if a.kind == typeString {
				add(a.str)
			}
		}
	})

	var body bytes.Buffer
	body.Write(stringPool(pool))
	body.Write(chunk(0x0180, 8, u32s(resIDs...)))
	ns := u32s(uint32(index["android"]), uint32(index[androidNS]))
	body.Write(chunk(0x0100, 16, append(u32s(1, 0xFFFFFFFF), ns...)))
	var elem func(e *xmlElem)
	elem = func(e *xmlElem) {
		var b bytes.Buffer
		b.Write(u32s(1, 0xFFFFFFFF)) // line, comment
		b.Write(u32s(0xFFFFFFFF, uint32(index[e.name])))
		b.Write(u16s(20, 20, uint16(len(e.attrs)), 0, 0, 0))
		for _, a := range e.attrs {
			nsRef := uint32(0xFFFFFFFF)
			if a.android {
				nsRef = uint32(index[androidNS])
			}
			raw, data := uint32(0xFFFFFFFF), uint32(a.num)
			if a.kind == typeString {
				raw, data = uint32(index[a.str]), uint32(index[a.str])
			}
			b.Write(u32s(nsRef, uint32(index[a.name]), raw))
			b.Write(u16s(8))
			b.WriteByte(0)
			b.WriteByte(a.kind)
			b.Write(u32s(data))
		}
		body.Write(chunk(0x0102, 16, b.Bytes()))
		for _, c := range e.children {
			elem(c)
		}
		body.Write(chunk(0x0103, 16, u32s(1, 0xFFFFFFFF, 0xFFFFFFFF, uint32(index[e.name]))))
	}
	elem(root)
	body.Write(chunk(0x0101, 16, append(u32s(1, 0xFFFFFFFF), ns...)))
	return chunk(0x0003, 8, body.Bytes())
}

// stringPool is a UTF-16 string pool chunk.
func stringPool(strs []string) []byte {
	var offsets, data bytes.Buffer
	for _, s := range strs {
		offsets.Write(u32s(uint32(data.Len())))
		units := utf16.Encode([]rune(s))
		data.Write(u16s(uint16(len(units))))
		data.Write(u16s(units...))
		data.Write(u16s(0))
	}
	for data.Len()%4 != 0 {
		data.WriteByte(0)
	}
	const headerSize = 28
	header := u32s(uint32(len(strs)), 0, 0, uint32(headerSize+offsets.Len()), 0)
	return chunk(0x0001, headerSize, append(append(header, offsets.Bytes()...), data.Bytes()...))
}

// chunk prefixes body (the rest of the header, then the data) with a
// ResChunk_header.
func chunk(typ, headerSize uint16, body []byte) []byte {
	out := u16s(typ, headerSize)
	out = append(out, u32s(uint32(8+len(body)))...)
	return append(out, body...)
}

func u16s(v ...uint16) []byte {
	b := make([]byte, 2*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint16(b[2*i:], x)
	}
	return b
}

func u32s(v ...uint32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], x)
	}
	return b
}
