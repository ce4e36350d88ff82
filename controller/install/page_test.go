package install

import (
	"archive/zip"
	"bytes"
	"strings"
	"testing"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/internal/plist"
)

// Xcode writes Info.plist in the binary format; the manifest must still
// carry the app's real bundle id.
func TestReadAppInfoBinaryPlist(t *testing.T) {
	info, err := plist.MarshalBinary(map[string]string{"CFBundleIdentifier": "com.example.bin", "CFBundleVersion": "7", "CFBundleName": "Bin"})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	f, _ := zw.Create("Payload/Bin.app/Frameworks/X.framework/Info.plist") // not the app's
	f.Write([]byte("not a plist"))
	f, _ = zw.Create("Payload/Bin.app/Info.plist")
	f.Write(info)
	zw.Close()
	got, err := ReadAppInfo(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	if got != (AppInfo{BundleID: "com.example.bin", Version: "7", Title: "Bin", BuildNumber: "7"}) {
		t.Fatalf("app info: %+v", got)
	}
	if _, err := ReadAppInfo(bytes.NewReader([]byte("PK nope")), 7); err == nil || !strings.Contains(err.Error(), "IPA") {
		t.Fatalf("a broken IPA: %v", err)
	}
}

// The install page says which version it installs.
func TestPageShowsVersions(t *testing.T) {
	var buf bytes.Buffer
	b := api.Build{ID: "b1", Platform: api.PlatformAndroid, Profile: "preview", AppVersion: "1.2.3", BuildVersion: "43"}
	if err := WritePage(&buf, b, Links{}, ""); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), `version <span id="version">1.2.3 (43)</span>`) {
		t.Fatalf("page:\n%s", buf.String())
	}
}
