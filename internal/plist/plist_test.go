package plist_test

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/internal/plist"
)

func TestParseValues(t *testing.T) {
	v, err := plist.Parse([]byte(`<?xml version="1.0"?><plist version="1.0"><dict>
<key>s</key><string>a &amp; b</string><key>i</key><integer>-42</integer><key>u</key><integer>7</integer><key>r</key><real>1.5</real>
<key>t</key><true/><key>f</key><false/><key>d</key><date>2025-03-01T10:00:00Z</date>
<key>b</key><data>aGVs
bG8=</data><key>a</key><array><string>x</string><array/></array><key>e</key><dict/></dict></plist>`))
	if err != nil {
		t.Fatal(err)
	}
	m := v.(map[string]any)
	created := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	if m["s"] != "a & b" || m["i"] != int64(-42) || m["u"] != int64(7) || m["r"] != 1.5 || m["t"] != true || m["f"] != false ||
		!m["d"].(time.Time).Equal(created) || string(m["b"].([]byte)) != "hello" ||
		len(m["a"].([]any)) != 2 || len(m["e"].(map[string]any)) != 0 {
		t.Errorf("parsed %#v", m)
	}
	for _, bad := range []string{"", "  \n", `<plist version="1.0"><dict><key>a</key><integer>18446744073709551615</integer></dict></plist>`} {
		if _, err := plist.Parse([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// An .ipa's Info.plist is binary (Xcode compiles it); the same reader
// reads it, with the same plain values.
func TestBinaryRoundTrip(t *testing.T) {
	b, err := plist.MarshalBinary(map[string]any{"CFBundleIdentifier": "com.example.app", "n": 3, "list": []string{"a", "b"}})
	if err != nil {
		t.Fatal(err)
	}
	v, err := plist.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	m := v.(map[string]any)
	if m["CFBundleIdentifier"] != "com.example.app" || m["n"] != int64(3) || len(m["list"].([]any)) != 2 {
		t.Fatalf("%#v", m)
	}
	var info struct {
		ID string `plist:"CFBundleIdentifier"`
	}
	if f, err := plist.Unmarshal(b, &info); err != nil || f != plist.Binary || info.ID != "com.example.app" {
		t.Fatalf("%v %v %+v", f, err, info)
	}
}

// nested is a value n containers deep.
func nested(n int) any {
	var v any = "leaf"
	for range n {
		v = []any{v}
	}
	return v
}

// Someone else's plist nested without end is refused before it is decoded,
// in each of the three formats; the depth a real one has is read.
func TestDepthIsBounded(t *testing.T) {
	for _, c := range []struct {
		name string
		doc  func(n int) []byte
	}{
		{"xml", func(n int) []byte {
			return []byte(`<plist version="1.0">` + strings.Repeat("<array>", n) + "<string>leaf</string>" + strings.Repeat("</array>", n) + "</plist>")
		}},
		{"binary", func(n int) []byte {
			b, err := plist.MarshalBinary(nested(n))
			if err != nil {
				t.Fatal(err)
			}
			return b
		}},
		{"openstep", func(n int) []byte {
			// Brackets in strings and comments are not nesting.
			return []byte(`/* ((((( */ ` + strings.Repeat("(", n) + `"a)(b", "c(" // (((` + "\n" + strings.Repeat(")", n))
		}},
	} {
		if _, err := plist.Parse(c.doc(plist.MaxDepth)); err != nil {
			t.Errorf("%s: %d levels: %v", c.name, plist.MaxDepth, err)
		}
		if _, err := plist.Parse(c.doc(100_000)); err == nil || !strings.Contains(err.Error(), "nested deeper than 64") {
			t.Errorf("%s: 100,000 levels: %v", c.name, err)
		}
	}
}

// bplist builds a binary list by hand: objects (encoded), one-byte offsets
// and references, the top object first.
func bplist(objects ...[]byte) []byte {
	var b bytes.Buffer
	b.WriteString("bplist00")
	var offsets []byte
	for _, o := range objects {
		offsets = append(offsets, byte(b.Len()))
		b.Write(o)
	}
	table := b.Len()
	b.Write(offsets)
	trailer := make([]byte, 32)
	trailer[6], trailer[7] = 1, 1
	binary.BigEndian.PutUint64(trailer[8:], uint64(len(objects)))
	binary.BigEndian.PutUint64(trailer[24:], uint64(table))
	b.Write(trailer)
	return b.Bytes()
}

// Malformed binary lists are errors, never a crash: an array that holds
// itself, and references and offsets that point nowhere.
func TestMalformedBinary(t *testing.T) {
	for name, doc := range map[string][]byte{
		"holds itself":          bplist([]byte{0xa1, 0x00}),
		"holds its holder":      bplist([]byte{0xa1, 0x01}, []byte{0xa1, 0x00}),
		"reference beyond":      bplist([]byte{0xa1, 0x09}),
		"count beyond the data": bplist([]byte{0xaf, 0x10, 0xff}),
		"truncated":             bplist([]byte{0xa1, 0x00})[:20],
	} {
		if v, err := plist.Parse(doc); err == nil {
			t.Errorf("%s: parsed %#v", name, v)
		}
	}
}

func FuzzParse(f *testing.F) {
	bin, _ := plist.MarshalBinary(map[string]any{"a": []any{1, "x", map[string]any{"b": true}}})
	f.Add(bin)
	f.Add([]byte(`<plist version="1.0"><dict><key>a</key><array><integer>1</integer></array></dict></plist>`))
	f.Add([]byte(`{ a = (b, "c"); }`))
	f.Add(bplist([]byte{0xa1, 0x00}))
	f.Fuzz(func(t *testing.T, data []byte) {
		plist.Parse(data) //nolint:errcheck // any answer but a crash
	})
}
