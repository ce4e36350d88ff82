package vmbootstrap

import (
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/freeagent-build/freeagent/internal/plist"
)

// requestHeadersKey is the AndroidManifest meta-data expo-updates reads
// its request headers from; EAS Update picks the channel by one of them.
const requestHeadersKey = "expo.modules.updates.UPDATES_CONFIGURATION_REQUEST_HEADERS_KEY"

var (
	headersMetaData = regexp.MustCompile(`<meta-data\s+android:name="` + regexp.QuoteMeta(requestHeadersKey) + `"\s+android:value="([^"]*)"\s*/>`)
	applicationTag  = regexp.MustCompile(`<application\b[^>]*>`)
)

// expoUpdatesInstalled reports whether the app resolves the expo-updates
// package: in its node_modules or a parent's up to the source's root.
func expoUpdatesInstalled(tree, appDir string) bool {
	for dir := appDir; ; dir = filepath.Dir(dir) {
		if fileExists(filepath.Join(dir, "node_modules", "expo-updates", "package.json")) {
			return true
		}
		if dir == tree || !strings.HasPrefix(dir, tree) || filepath.Dir(dir) == dir {
			return false
		}
	}
}

// setAndroidChannel makes the app ask EAS Update for channel, as EAS
// Build does for a profile's "channel": the expo-channel-name request
// header in AndroidManifest.xml, keeping any other headers.
func setAndroidChannel(manifestPath, channel string) error {
	b, err := os.ReadFile(manifestPath)
	if err != nil {
		return fmt.Errorf("read AndroidManifest.xml to set the update channel: %w", err)
	}
	text := string(b)
	headers := map[string]string{}
	if m := headersMetaData.FindStringSubmatchIndex(text); m != nil {
		if old := html.UnescapeString(text[m[2]:m[3]]); strings.TrimSpace(old) != "" {
			if err := json.Unmarshal([]byte(old), &headers); err != nil {
				return fmt.Errorf("AndroidManifest.xml: %s is not a JSON object of strings: %w", requestHeadersKey, err)
			}
		}
		headers["expo-channel-name"] = channel
		text = text[:m[2]] + escapeAttr(headers) + text[m[3]:]
	} else {
		loc := applicationTag.FindStringIndex(text)
		if loc == nil {
			return errors.New("AndroidManifest.xml has no <application> element to carry the update channel")
		}
		headers["expo-channel-name"] = channel
		meta := "\n    <meta-data android:name=\"" + requestHeadersKey + "\" android:value=\"" + escapeAttr(headers) + "\"/>"
		text = text[:loc[1]] + meta + text[loc[1]:]
	}
	if err := os.WriteFile(manifestPath, []byte(text), 0o644); err != nil {
		return fmt.Errorf("write AndroidManifest.xml: %w", err)
	}
	return nil
}

func escapeAttr(headers map[string]string) string {
	b, _ := json.Marshal(headers) // a map of strings always marshals
	return html.EscapeString(string(b))
}

// setIOSChannel is setAndroidChannel for iOS: the expo-channel-name in
// Expo.plist's EXUpdatesRequestHeaders, keeping any other headers.
func setIOSChannel(plistPath, channel string) error {
	b, err := os.ReadFile(plistPath)
	if err != nil {
		return fmt.Errorf("read Expo.plist to set the update channel: %w", err)
	}
	v, err := plist.Parse(b)
	if err != nil {
		return fmt.Errorf("Expo.plist: %w", err)
	}
	root, ok := v.(map[string]any)
	if !ok {
		return errors.New("Expo.plist does not hold a dictionary to carry the update channel")
	}
	headers, ok := root["EXUpdatesRequestHeaders"].(map[string]any)
	if _, present := root["EXUpdatesRequestHeaders"]; present && !ok {
		return errors.New("Expo.plist: EXUpdatesRequestHeaders is not a dictionary")
	}
	if headers == nil {
		headers = map[string]any{}
	}
	headers["expo-channel-name"] = channel
	root["EXUpdatesRequestHeaders"] = headers
	out, err := plist.Marshal(root)
	if err != nil {
		return fmt.Errorf("write Expo.plist: %w", err)
	}
	if err := os.WriteFile(plistPath, out, 0o644); err != nil {
		return fmt.Errorf("write Expo.plist: %w", err)
	}
	return nil
}
