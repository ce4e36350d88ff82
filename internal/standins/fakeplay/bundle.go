package fakeplay

import (
	"archive/zip"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"

	"google.golang.org/protobuf/encoding/protowire"
)

// An Android App Bundle keeps its manifest at base/manifest/AndroidManifest.xml
// in aapt2's protocol-buffer XML (Resources.proto): XmlNode{element = 1}
// XmlElement{name = 3, attribute = 4, child = 5}, XmlAttribute{namespace_uri
// = 1, name = 2, value = 3}. Play reads the package and versionCode from it;
// so does the stand-in.
const manifestPath = "base/manifest/AndroidManifest.xml"

const androidNS = "http://schemas.android.com/apk/res/android"

// Bundle returns a minimal .aab for pkg at versionCode: a zip holding the
// protocol-buffer manifest and padding bytes of filler (so a test can make
// it large enough for a resumable upload).
func Bundle(pkg string, versionCode int64, filler int) []byte {
	attr := func(ns, name, value string) []byte {
		var a []byte
		if ns != "" {
			a = protowire.AppendTag(a, 1, protowire.BytesType)
			a = protowire.AppendString(a, ns)
		}
		a = protowire.AppendTag(a, 2, protowire.BytesType)
		a = protowire.AppendString(a, name)
		a = protowire.AppendTag(a, 3, protowire.BytesType)
		return protowire.AppendString(a, value)
	}
	var el []byte
	el = protowire.AppendTag(el, 3, protowire.BytesType)
	el = protowire.AppendString(el, "manifest")
	for _, a := range [][]byte{attr("", "package", pkg), attr(androidNS, "versionCode", strconv.FormatInt(versionCode, 10)),
		attr(androidNS, "versionName", "1.0")} {
		el = protowire.AppendTag(el, 4, protowire.BytesType)
		el = protowire.AppendBytes(el, a)
	}
	var node []byte
	node = protowire.AppendTag(node, 1, protowire.BytesType)
	node = protowire.AppendBytes(node, el)

	var buf bytes.Buffer
	z := zip.NewWriter(&buf)
	for name, data := range map[string][]byte{manifestPath: node, "base/assets/filler.bin": bytes.Repeat([]byte{0x5a}, filler)} {
		// Stored, not deflated: the filler keeps its size on the wire.
		w, err := z.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Store})
		if err == nil {
			_, err = w.Write(data)
		}
		if err != nil {
			panic("write an in-memory zip: " + err.Error()) // cannot fail on a bytes.Buffer
		}
	}
	if err := z.Close(); err != nil {
		panic("close an in-memory zip: " + err.Error())
	}
	return buf.Bytes()
}

// readBundle returns the package and versionCode of an uploaded .aab, or
// why Play would refuse it.
func readBundle(data []byte) (pkg string, versionCode int64, err error) {
	z, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return "", 0, errors.New("the file is not an Android App Bundle (not a zip archive)")
	}
	f, err := z.Open(manifestPath)
	if err != nil {
		return "", 0, fmt.Errorf("the Android App Bundle has no %s", manifestPath)
	}
	defer f.Close()
	raw, err := io.ReadAll(io.LimitReader(f, 1<<20))
	if err != nil {
		return "", 0, fmt.Errorf("read the bundle's manifest: %w", err)
	}
	el, ok := field(raw, 1)
	if !ok {
		return "", 0, errors.New("the bundle's manifest has no root element")
	}
	attrs := map[string]string{}
	for b := el; len(b) > 0; {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return "", 0, errors.New("the bundle's manifest is not aapt2's protocol-buffer XML")
		}
		b = b[n:]
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return "", 0, errors.New("the bundle's manifest is not aapt2's protocol-buffer XML")
		}
		if num == 4 && typ == protowire.BytesType {
			a, _ := protowire.ConsumeBytes(b)
			name, _ := field(a, 2)
			value, _ := field(a, 3)
			attrs[string(name)] = string(value)
		}
		b = b[m:]
	}
	vc, err := strconv.ParseInt(attrs["versionCode"], 10, 64)
	if attrs["package"] == "" || err != nil || vc <= 0 {
		return "", 0, errors.New("the bundle's manifest has no package or no positive versionCode")
	}
	return attrs["package"], vc, nil
}

// field returns the first length-delimited field num of a message.
func field(msg []byte, num protowire.Number) ([]byte, bool) {
	for len(msg) > 0 {
		n, typ, l := protowire.ConsumeTag(msg)
		if l < 0 {
			return nil, false
		}
		msg = msg[l:]
		if n == num && typ == protowire.BytesType {
			v, m := protowire.ConsumeBytes(msg)
			return v, m >= 0
		}
		m := protowire.ConsumeFieldValue(n, typ, msg)
		if m < 0 {
			return nil, false
		}
		msg = msg[m:]
	}
	return nil, false
}
