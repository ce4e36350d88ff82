package install

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"html/template"
	"io"
	"strings"
	"time"

	"rsc.io/qr"

	"github.com/freeagent-build/freeagent/api"
)

// Installable picks the artifact a phone installs: the first .ipa of an iOS
// build, the first .apk of an Android build (an .aab is not installable).
func Installable(platform string, artifacts []api.Artifact) (api.Artifact, bool) {
	ext := ".apk"
	if platform == api.PlatformIOS {
		ext = ".ipa"
	}
	for _, a := range artifacts {
		if strings.HasSuffix(strings.ToLower(a.Name), ext) {
			return a, true
		}
	}
	return api.Artifact{}, false
}

var pageTemplate = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Install {{.Title}}</title>
<style>body{font-family:-apple-system,system-ui,sans-serif;max-width:32rem;margin:2rem auto;padding:0 1rem;color:#222}
a.button{display:block;text-align:center;padding:1rem;margin:1rem 0;border-radius:.5rem;background:#0a66d8;color:#fff;text-decoration:none;font-size:1.2rem}
li{margin:.4rem 0}small{color:#666}</style></head>
<body>
<h1>{{.Title}}</h1>
<p>{{.Platform}} build <code>{{.Build.ID}}</code>{{if .Build.Profile}}, profile {{.Build.Profile}}{{end}}{{with .Build.AppVersion}}, version <span id="version">{{.}}{{with $.Build.BuildVersion}} ({{.}}){{end}}</span>{{end}}{{if .Build.CompletedAt}}, finished {{.Build.CompletedAt.UTC.Format "2006-01-02 15:04 UTC"}}{{end}}.</p>
{{if .InstallURL}}<a class="button" id="install" href="{{.InstallURL}}">Install on this {{if eq .Build.Platform "ios"}}iPhone or iPad{{else}}device{{end}}</a>
{{if eq .Build.Platform "ios"}}<p><small>Ad-hoc and enterprise builds install only on devices their provisioning profile lists.</small></p>{{else}}<p><small>Android asks to allow installs from your browser the first time.</small></p>{{end}}
{{else if .Unavailable}}<p id="unavailable">This build cannot be installed from this page: {{.Unavailable}}</p>
{{else}}<p>This build has no installable {{if eq .Build.Platform "ios"}}.ipa{{else}}.apk{{end}} file.</p>{{end}}
{{if .Files}}<h2>Files</h2><ul>{{range .Files}}<li><a href="{{.URL}}">{{.Name}}</a> <small>{{.Size}} bytes, SHA-256 {{.SHA256}}</small></li>{{end}}</ul>{{end}}
<p><small>These links work until {{.Expires.UTC.Format "2006-01-02 15:04 UTC"}}.</small></p>
</body></html>
`))

// WritePage renders the install page of a completed build; every link on
// it expires with l. A non-empty unavailable says why its installable file
// cannot be installed (an IPA whose Info.plist could not be read): the page
// says so instead of offering the install button, and still lists the files.
func WritePage(w io.Writer, b api.Build, l Links, unavailable string) error {
	data := struct {
		Build                        api.Build
		Title, Platform, Unavailable string
		InstallURL                   template.URL
		Files                        []api.Artifact
		Expires                      time.Time
	}{Build: b, Title: "Build " + b.ID, Platform: "Android", Unavailable: unavailable, Expires: l.Expires}
	if b.Platform == api.PlatformIOS {
		data.Platform = "iOS"
	}
	if b.Profile != "" {
		data.Title = b.Profile + " build"
	}
	if a, ok := Installable(b.Platform, b.Artifacts); ok && unavailable == "" {
		u := l.Artifact(a.Name)
		if b.Platform == api.PlatformIOS {
			u = l.ITMS()
		}
		// itms-services is not a scheme html/template trusts; the URL is
		// ours, built from escaped parts.
		data.InstallURL = template.URL(u)
	}
	for _, a := range b.Artifacts {
		a.URL = l.Artifact(a.Name)
		data.Files = append(data.Files, a)
	}
	return pageTemplate.Execute(w, data)
}

// WriteManifest writes the over-the-air manifest plist that points iOS at
// the IPA's download URL.
func WriteManifest(w io.Writer, ipaURL string, app AppInfo) error {
	esc := func(s string) string {
		var b bytes.Buffer
		xml.EscapeText(&b, []byte(s)) //nolint:errcheck // writes to a buffer cannot fail
		return b.String()
	}
	_, err := fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<plist version="1.0">
<dict>
	<key>items</key>
	<array>
		<dict>
			<key>assets</key>
			<array>
				<dict>
					<key>kind</key>
					<string>software-package</string>
					<key>url</key>
					<string>%s</string>
				</dict>
			</array>
			<key>metadata</key>
			<dict>
				<key>bundle-identifier</key>
				<string>%s</string>
				<key>bundle-version</key>
				<string>%s</string>
				<key>kind</key>
				<string>software</string>
				<key>title</key>
				<string>%s</string>
			</dict>
		</dict>
	</array>
</dict>
</plist>
`, esc(ipaURL), esc(app.BundleID), esc(app.Version), esc(app.Title))
	return err
}

// QRPNG renders text as a QR code PNG (error correction level M, 8 pixels
// per module, with the standard quiet zone).
func QRPNG(text string) ([]byte, error) {
	c, err := qr.Encode(text, qr.M)
	if err != nil {
		return nil, fmt.Errorf("encode QR code: %w", err)
	}
	return c.PNG(), nil
}
