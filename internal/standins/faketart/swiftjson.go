package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// Foundation's JSONEncoder with .prettyPrinted (what tart uses for
// `list/get --format json` and config.json) writes:
//
//	[
//	  {
//	    "Key" : "value",
//	    "Other" : 1
//	  }
//	]
//
// i.e. two-space indent, a space on both sides of the colon, "/" escaped as
// "\/", and an empty collection as "[\n\n]" (Darwin Foundation). Go's
// encoding/json cannot produce that, so this is a tiny ordered encoder.

type kv struct {
	k string
	v any
}

// obj is an ordered JSON object.
type obj []kv

type swiftJSONOptions struct {
	compactEmpty bool // "[]" instead of "[\n\n]" for empty collections
}

func swiftJSON(v any, o swiftJSONOptions) string {
	var b strings.Builder
	writeSwiftJSON(&b, v, 0, o)
	return b.String()
}

func writeSwiftJSON(b *strings.Builder, v any, depth int, o swiftJSONOptions) {
	ind := strings.Repeat("  ", depth)
	switch x := v.(type) {
	case obj:
		if len(x) == 0 {
			if o.compactEmpty {
				b.WriteString("{}")
			} else {
				b.WriteString("{\n\n" + ind + "}")
			}
			return
		}
		b.WriteString("{\n")
		for i, e := range x {
			b.WriteString(ind + "  ")
			b.WriteString(swiftString(e.k))
			b.WriteString(" : ")
			writeSwiftJSON(b, e.v, depth+1, o)
			if i < len(x)-1 {
				b.WriteString(",")
			}
			b.WriteString("\n")
		}
		b.WriteString(ind + "}")
	case []any:
		if len(x) == 0 {
			if o.compactEmpty {
				b.WriteString("[]")
			} else {
				b.WriteString("[\n\n" + ind + "]")
			}
			return
		}
		b.WriteString("[\n")
		for i, e := range x {
			b.WriteString(ind + "  ")
			writeSwiftJSON(b, e, depth+1, o)
			if i < len(x)-1 {
				b.WriteString(",")
			}
			b.WriteString("\n")
		}
		b.WriteString(ind + "]")
	case string:
		b.WriteString(swiftString(x))
	case bool:
		if x {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case nil:
		b.WriteString("null")
	case int, int32, int64, uint, uint16, uint32, uint64:
		fmt.Fprintf(b, "%d", x)
	default:
		panic(fmt.Sprintf("swiftJSON: unsupported type %T", v))
	}
}

func swiftString(s string) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	out := strings.TrimSuffix(buf.String(), "\n")
	return strings.ReplaceAll(out, "/", `\/`)
}
