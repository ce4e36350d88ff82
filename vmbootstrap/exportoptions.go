package vmbootstrap

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"maps"
	"slices"
)

// exportOptionsPlist renders the ExportOptions.plist for manual signing
// with the given profiles (bundle identifier → profile UUID), as EAS does.
func exportOptionsPlist(method, teamID string, profiles map[string]string) []byte {
	var b bytes.Buffer
	esc := func(s string) string {
		var e bytes.Buffer
		xml.EscapeText(&e, []byte(s)) //nolint:errcheck // bytes.Buffer does not fail
		return e.String()
	}
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<plist version="1.0">
<dict>
`)
	kv := func(k, v string) { fmt.Fprintf(&b, "\t<key>%s</key>\n\t<string>%s</string>\n", esc(k), esc(v)) }
	kv("method", method)
	if len(profiles) == 0 { // withoutCredentials: the archive's own signing
		b.WriteString("</dict>\n</plist>\n")
		return b.Bytes()
	}
	kv("signingStyle", "manual")
	if teamID != "" {
		kv("teamID", teamID)
	}
	b.WriteString("\t<key>provisioningProfiles</key>\n\t<dict>\n")
	for _, bundle := range slices.Sorted(maps.Keys(profiles)) {
		fmt.Fprintf(&b, "\t\t<key>%s</key>\n\t\t<string>%s</string>\n", esc(bundle), esc(profiles[bundle]))
	}
	b.WriteString("\t</dict>\n</dict>\n</plist>\n")
	return b.Bytes()
}
