package appstore

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/internal/standins/fakeappstoreconnect"
)

const (
	testIssuer = "57246542-96fe-1a63-e053-0824d011072a"
	testKeyID  = "2X9R4HXF34"
	testApp    = "1234567891"
	testBundle = "com.example.hello"
)

// newKey makes an App Store Connect API key as Apple hands it out: a
// PKCS #8 PEM P-256 private key.
func newKey(t *testing.T) (Key, *ecdsa.PrivateKey) {
	t.Helper()
	sk, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(sk)
	if err != nil {
		t.Fatal(err)
	}
	return Key{IssuerID: testIssuer, KeyID: testKeyID, PrivateKey: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})}, sk
}

// writeIPA writes a tiny .ipa: Payload/Hello.app/Info.plist and padding
// (stored, not deflated) so the upload takes several parts.
func writeIPA(t *testing.T, bundleID, short, build string) string {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, err := zw.Create("Payload/Hello.app/Info.plist")
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<plist version="1.0"><dict>
<key>CFBundleIdentifier</key><string>%s</string>
<key>CFBundleShortVersionString</key><string>%s</string>
<key>CFBundleVersion</key><string>%s</string>
<key>CFBundleName</key><string>Hello</string>
</dict></plist>`, bundleID, short, build)
	w, err = zw.CreateHeader(&zip.FileHeader{Name: "Payload/Hello.app/Hello", Method: zip.Store})
	if err != nil {
		t.Fatal(err)
	}
	pad := make([]byte, 2500)
	rand.Read(pad)
	w.Write(pad)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "Hello.ipa")
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

type fixture struct {
	key    Key
	sk     *ecdsa.PrivateKey
	srv    *fakeappstoreconnect.Server
	client *Client
	log    bytes.Buffer
}

const testAttempts = 3

// start runs the stand-in App Store Connect with the test key, the app
// (with TestFlight groups) and 1000-byte parts, and a client for it that
// polls and retries without real waits.
func start(t *testing.T, edit func(*fakeappstoreconnect.Config)) *fixture {
	t.Helper()
	f := &fixture{}
	f.key, f.sk = newKey(t)
	cfg := fakeappstoreconnect.Config{
		Keys:        []fakeappstoreconnect.Key{{IssuerID: testIssuer, KeyID: testKeyID, Public: &f.sk.PublicKey}},
		Apps:        []fakeappstoreconnect.App{{ID: testApp, BundleID: testBundle, Name: "Hello", Groups: []string{"Team", "Beta Testers"}}},
		PartSize:    1000,
		UploadPolls: 2,
		BuildPolls:  3,
	}
	if edit != nil {
		edit(&cfg)
	}
	f.srv = fakeappstoreconnect.Start(cfg)
	t.Cleanup(f.srv.Close)
	f.client = &Client{
		BaseURL:      f.srv.URL,
		PollInterval: time.Millisecond,
		Retry:        api.RetryPolicy{Backoff: api.Backoff{Initial: time.Millisecond, Max: 2 * time.Millisecond}, Attempts: testAttempts},
	}
	return f
}

func (f *fixture) submit(t *testing.T, ipa string, opts Options) (Result, error) {
	t.Helper()
	res, err := f.client.Submit(context.Background(), f.key, ipa, opts, &f.log)
	f.assertNoSecrets(t, errText(err))
	return res, err
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// assertNoSecrets fails when the key (as PEM, as its DER in base64 or
// hex, as its private scalar) or a token the stand-in received appears in
// the log or in the texts given.
func (f *fixture) assertNoSecrets(t *testing.T, texts ...string) {
	t.Helper()
	block, _ := pem.Decode(f.key.PrivateKey)
	secrets := map[string]string{
		"the .p8":                   string(f.key.PrivateKey),
		"the PEM body":              strings.Split(string(f.key.PrivateKey), "\n")[1],
		"the DER in base64":         base64.StdEncoding.EncodeToString(block.Bytes)[:40],
		"the DER in base64url":      base64.RawURLEncoding.EncodeToString(block.Bytes)[:40],
		"the DER in hex":            hex.EncodeToString(block.Bytes)[:40],
		"the private scalar in hex": hex.EncodeToString(f.sk.D.Bytes()),
		"the private scalar":        f.sk.D.String(),
	}
	for i, tok := range f.srv.Tokens() {
		secrets[fmt.Sprintf("token %d", i)] = tok
		if parts := strings.Split(tok, "."); len(parts) == 3 {
			secrets[fmt.Sprintf("token %d's signature", i)] = parts[2]
		}
	}
	all := append([]string{f.log.String(), fmt.Sprintf("%v %+v %#v %s", f.key, f.key, f.key, f.key)}, texts...)
	for _, text := range all {
		for what, secret := range secrets {
			if secret != "" && strings.Contains(text, secret) {
				t.Fatalf("%s appears in %q", what, text)
			}
		}
	}
}

func sha256File(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// An .ipa goes to App Store Connect through the build upload resources,
// in parts, is processed until its build is VALID (ready for TestFlight)
// and lands in the TestFlight group the profile names.
func TestSubmitReachesTestFlight(t *testing.T) {
	f := start(t, nil)
	ipa := writeIPA(t, testBundle, "1.2.0", "42")
	var recorded []string
	res, err := f.submit(t, ipa, Options{AppID: testApp, BundleID: testBundle, TeamID: "AB32CZE81F", Groups: []string{"Beta Testers"},
		RecordUpload: func(_ context.Context, id string) error { recorded = append(recorded, id); return nil }})
	if err != nil {
		t.Fatalf("submit: %v\n%s", err, f.log.String())
	}
	if res.State != "VALID" || res.BuildID == "" || res.ShortVersion != "1.2.0" || res.BuildNumber != "42" || len(res.Groups) != 1 {
		t.Fatalf("result: %+v", res)
	}
	ups := f.srv.Uploads()
	if len(ups) != 1 {
		t.Fatalf("uploads: %+v", ups)
	}
	up := ups[0]
	if len(recorded) != 1 || recorded[0] != up.ID || res.UploadID != up.ID {
		t.Fatalf("recorded %v, result %s, stand-in %s", recorded, res.UploadID, up.ID)
	}
	if up.State != "COMPLETE" || up.BuildID != res.BuildID || up.BuildState != "VALID" || up.Platform != "IOS" ||
		up.ShortVersion != "1.2.0" || up.BuildNumber != "42" || len(up.Groups) != 1 || up.Groups[0] != "Beta Testers" {
		t.Fatalf("the stand-in's upload: %+v", up)
	}
	st, _ := os.Stat(ipa)
	if len(up.Files) != 1 || up.Files[0].UTI != "com.apple.ipa" || up.Files[0].AssetType != "ASSET" || up.Files[0].Name != "Hello.ipa" ||
		up.Files[0].Size != st.Size() || up.Files[0].SHA256 != sha256File(t, ipa) || up.Files[0].Checksum != up.Files[0].SHA256 {
		t.Fatalf("the stand-in's file: %+v", up.Files)
	}
	if parts := int((st.Size() + 999) / 1000); parts < 3 || up.Files[0].PartsPut != parts {
		t.Fatalf("%d parts put, want %d", up.Files[0].PartsPut, parts)
	}
	for _, r := range f.srv.Requests() {
		if strings.HasPrefix(r.Path, "/upload/") && r.Authorization {
			t.Fatalf("the token went with a part to the upload URL: %+v", r)
		}
		if r.Refused != "" {
			t.Fatalf("a token was refused: %+v", r)
		}
	}
	if !strings.Contains(f.log.String(), "ready for TestFlight") || !strings.Contains(f.log.String(), `"Beta Testers"`) {
		t.Fatalf("log:\n%s", f.log.String())
	}
}

// Without ascAppId the app is the one whose bundle identifier is the
// .ipa's; an app App Store Connect does not have is named with the fix.
func TestSubmitFindsTheAppByBundleIdentifier(t *testing.T) {
	f := start(t, nil)
	if res, err := f.submit(t, writeIPA(t, testBundle, "1.0", "1"), Options{}); err != nil || res.AppID != testApp {
		t.Fatalf("submit: %+v, %v", res, err)
	}
	_, err := f.submit(t, writeIPA(t, "com.example.other", "1.0", "1"), Options{})
	if err == nil || !strings.Contains(err.Error(), "no app with the bundle identifier com.example.other") || !strings.Contains(err.Error(), "ascAppId") {
		t.Fatalf("an unknown bundle identifier: %v", err)
	}
}

// A key App Store Connect does not know, a token that expired or that
// reaches too far ahead (a wrong clock), and a token for another audience
// are refused as App Store Connect refuses them: 401 NOT_AUTHORIZED, not
// retried, with the fix.
func TestBadCredentialsAreRefused(t *testing.T) {
	for _, tc := range []struct {
		name, refusal string
		edit          func(*fixture)
	}{
		{"a key App Store Connect does not have", "signature does not verify", func(f *fixture) { f.key, f.sk = newKey(t) }},
		{"an expired token", "expired", func(f *fixture) { f.client.Now = func() time.Time { return time.Now().Add(-time.Hour) } }},
		{"a token reaching more than 20 minutes ahead", "exp more than 20 minutes ahead", func(f *fixture) {
			f.client.Now = func() time.Time { return time.Now().Add(time.Hour) }
		}},
		{"another issuer", "iss is not the key's issuer", func(f *fixture) { f.key.IssuerID = "00000000-0000-0000-0000-000000000000" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := start(t, nil)
			tc.edit(f)
			_, err := f.submit(t, writeIPA(t, testBundle, "1.0", "1"), Options{AppID: testApp})
			e := asError(err)
			if e == nil || e.Status != http.StatusUnauthorized || e.Code != "NOT_AUTHORIZED" || api.Transient(err) {
				t.Fatalf("want a final 401 NOT_AUTHORIZED, got %v", err)
			}
			for _, want := range []string{"Authentication credentials are missing or invalid", "ascApiKeyIssuerId", "ascApiKeyId", "ascApiKeyPath", "clock"} {
				if !strings.Contains(err.Error(), want) {
					t.Fatalf("the error lacks %q: %v", want, err)
				}
			}
			reqs := f.srv.Requests()
			if len(reqs) != 1 || !strings.HasPrefix(reqs[0].Refused, tc.refusal) {
				t.Fatalf("want one request refused for %q, got %+v", tc.refusal, reqs)
			}
			if len(f.srv.Uploads()) != 0 {
				t.Fatal("an upload was made")
			}
		})
	}
	t.Run("a token for another audience", func(t *testing.T) {
		f := start(t, nil)
		tok, err := signJWT(f.sk, map[string]string{"alg": "ES256", "kid": testKeyID, "typ": "JWT"},
			map[string]any{"iss": testIssuer, "iat": time.Now().Unix(), "exp": time.Now().Add(10 * time.Minute).Unix(), "aud": "appstoreconnect-v2"})
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest(http.MethodGet, f.srv.URL+"/v1/apps/"+testApp, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		e := newError("read the app", resp.StatusCode, resp.Header, body, time.Now())
		if e.Status != http.StatusUnauthorized || e.Code != "NOT_AUTHORIZED" || !strings.Contains(e.Error(), "ascApiKeyId") {
			t.Fatalf("another audience: %v", e)
		}
		if r := f.srv.Requests(); len(r) != 1 || !strings.HasPrefix(r[0].Refused, "aud appstoreconnect-v2") {
			t.Fatalf("the stand-in's refusal: %+v", r)
		}
		// The client's own tokens have the right audience and are accepted.
		if _, err := f.submit(t, writeIPA(t, testBundle, "1.0", "1"), Options{AppID: testApp}); err != nil {
			t.Fatal(err)
		}
	})
}

// Bad input is refused before anything is sent, each with its fix.
func TestBadInputIsRefusedUpFront(t *testing.T) {
	f := start(t, nil)
	good := writeIPA(t, testBundle, "1.0", "1")
	notZip := filepath.Join(t.TempDir(), "x.ipa")
	os.WriteFile(notZip, []byte("not a zip"), 0o600)
	for _, tc := range []struct {
		name string
		key  func(Key) Key
		ipa  string
		opts Options
		want string
	}{
		{"a key that is not a .p8", func(k Key) Key {
			k.PrivateKey = []byte("-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----\n")
			return k
		}, good, Options{}, "not a PEM \"PRIVATE KEY\""},
		{"no issuer", func(k Key) Key { k.IssuerID = ""; return k }, good, Options{}, "ascApiKeyIssuerId"},
		{"a key id of the wrong form", func(k Key) Key { k.KeyID = "abc"; return k }, good, Options{}, "(ascApiKeyId) \"abc\""},
		{"an app id of the wrong form", nil, good, Options{AppID: "hello"}, "ascAppId \"hello\""},
		{"a team id of the wrong form", nil, good, Options{TeamID: "abc"}, "appleTeamId \"abc\""},
		{"another bundle identifier", nil, good, Options{BundleID: "com.example.other"}, "bundleIdentifier is com.example.other"},
		{"not an .ipa", nil, notZip, Options{}, "cannot be submitted"},
		{"no build number", nil, writeIPA(t, testBundle, "1.0", ""), Options{}, "CFBundleVersion"},
	} {
		key := f.key
		if tc.key != nil {
			key = tc.key(key)
		}
		_, err := f.client.Submit(context.Background(), key, tc.ipa, tc.opts, &f.log)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: want %q, got %v", tc.name, tc.want, err)
		}
		f.assertNoSecrets(t, errText(err))
	}
	if r := f.srv.Requests(); len(r) != 0 {
		t.Fatalf("requests were sent: %+v", r)
	}
}

// An ascAppId App Store Connect does not have is App Store Connect's 404
// with the fix; an ascAppId of another app is refused before the upload.
func TestUnknownAppID(t *testing.T) {
	f := start(t, func(c *fakeappstoreconnect.Config) {
		c.Apps = append(c.Apps, fakeappstoreconnect.App{ID: "555", BundleID: "com.example.other"})
	})
	_, err := f.submit(t, writeIPA(t, testBundle, "1.0", "1"), Options{AppID: "999"})
	if e := asError(err); e == nil || e.Status != http.StatusNotFound || api.Transient(err) ||
		!strings.Contains(err.Error(), "There is no resource of type 'apps' with id '999'") || !strings.Contains(err.Error(), "set ascAppId") {
		t.Fatalf("an unknown app id: %v", err)
	}
	_, err = f.submit(t, writeIPA(t, testBundle, "1.0", "1"), Options{AppID: "555"})
	if err == nil || !strings.Contains(err.Error(), "ascAppId 555 is the app com.example.other") {
		t.Fatalf("another app's id: %v", err)
	}
	if len(f.srv.Uploads()) != 0 {
		t.Fatal("an upload was made")
	}
}

// A version and build number App Store Connect already has is refused
// with Apple's message and the fix; no second upload is made.
func TestDuplicateVersionIsRefused(t *testing.T) {
	f := start(t, nil)
	if _, err := f.submit(t, writeIPA(t, testBundle, "2.0", "7"), Options{AppID: testApp}); err != nil {
		t.Fatal(err)
	}
	_, err := f.submit(t, writeIPA(t, testBundle, "2.0", "7"), Options{AppID: testApp})
	if e := asError(err); e == nil || e.Status != http.StatusConflict || api.Transient(err) ||
		!strings.Contains(err.Error(), "Redundant Binary Upload") || !strings.Contains(err.Error(), "raise the build number") {
		t.Fatalf("a duplicate version: %v", err)
	}
	if n := len(f.srv.Uploads()); n != 1 {
		t.Fatalf("%d uploads", n)
	}
}

// 5xx and 429 answers are retried on the one retry policy, and the
// submission completes.
func TestTransientFailuresAreRetried(t *testing.T) {
	f := start(t, nil)
	f.srv.Fail(fakeappstoreconnect.Fault{Method: http.MethodGet, Path: "/v1/apps/", Status: http.StatusServiceUnavailable, Times: 2})
	f.srv.Fail(fakeappstoreconnect.Fault{Method: http.MethodPost, Path: "/v1/buildUploads", Status: http.StatusTooManyRequests, Times: 1})
	f.srv.Fail(fakeappstoreconnect.Fault{Method: http.MethodPut, Path: "/upload/", Status: http.StatusInternalServerError, Times: 2})
	f.srv.Fail(fakeappstoreconnect.Fault{Method: http.MethodPatch, Path: "/v1/buildUploadFiles/", Status: http.StatusBadGateway, Times: 1})
	f.srv.Fail(fakeappstoreconnect.Fault{Method: http.MethodGet, Path: "/v1/builds/", Status: http.StatusInternalServerError, Times: 1})
	res, err := f.submit(t, writeIPA(t, testBundle, "1.0", "3"), Options{AppID: testApp, Groups: []string{"Team"}})
	if err != nil || res.State != "VALID" {
		t.Fatalf("submit: %+v, %v\n%s", res, err, f.log.String())
	}
	if ups := f.srv.Uploads(); len(ups) != 1 || len(ups[0].Files) != 1 || ups[0].BuildState != "VALID" {
		t.Fatalf("uploads: %+v", ups)
	}
	if n := strings.Count(f.log.String(), "trying again"); n != 7 {
		t.Fatalf("%d retries logged, want 7:\n%s", n, f.log.String())
	}
}

// A create whose answer is lost (App Store Connect made the record, the
// answer never came) is not repeated blindly: the retry finds the record,
// so the submission has one build upload and one file.
func TestLostCreateAnswersMakeNoSecondUpload(t *testing.T) {
	f := start(t, nil)
	f.srv.Fail(fakeappstoreconnect.Fault{Method: http.MethodPost, Path: "/v1/buildUploads", Status: http.StatusInternalServerError, Times: 1, Lost: true})
	f.srv.Fail(fakeappstoreconnect.Fault{Method: http.MethodPost, Path: "/v1/buildUploadFiles", Status: http.StatusGatewayTimeout, Times: 1, Lost: true})
	if _, err := f.submit(t, writeIPA(t, testBundle, "1.0", "4"), Options{AppID: testApp}); err != nil {
		t.Fatalf("submit: %v\n%s", err, f.log.String())
	}
	if ups := f.srv.Uploads(); len(ups) != 1 || len(ups[0].Files) != 1 || ups[0].State != "COMPLETE" {
		t.Fatalf("uploads: %+v", ups)
	}
}

// App Store Connect failing every time ends the submission after the
// policy's attempts with Apple's text, marked transient for the runner.
func TestPersistentFailureEndsCleanly(t *testing.T) {
	f := start(t, nil)
	f.srv.Fail(fakeappstoreconnect.Fault{Method: http.MethodGet, Path: "/v1/apps/", Status: http.StatusServiceUnavailable, Times: -1})
	_, err := f.submit(t, writeIPA(t, testBundle, "1.0", "1"), Options{AppID: testApp})
	if e := asError(err); e == nil || e.Status != http.StatusServiceUnavailable || !api.Transient(err) ||
		!strings.Contains(err.Error(), "An unexpected error occurred") || !strings.Contains(err.Error(), "retried later") {
		t.Fatalf("a failing App Store Connect: %v", err)
	}
	if n := len(f.srv.Requests()); n != testAttempts {
		t.Fatalf("%d requests, want %d", n, testAttempts)
	}
}

// A submission cut short mid-upload resumes with the upload id it
// recorded: the same build upload and file, never a second.
func TestResumeUsesTheRecordedUpload(t *testing.T) {
	f := start(t, nil)
	ipa := writeIPA(t, testBundle, "3.1", "9")
	f.srv.Fail(fakeappstoreconnect.Fault{Method: http.MethodPut, Path: "/upload/", Status: http.StatusServiceUnavailable, Times: testAttempts})
	var recorded string
	opts := Options{AppID: testApp, RecordUpload: func(_ context.Context, id string) error { recorded = id; return nil }}
	_, err := f.submit(t, ipa, opts)
	if err == nil || !api.Transient(err) || recorded == "" {
		t.Fatalf("the first attempt: %v (recorded %q)", err, recorded)
	}
	opts.UploadID = recorded
	opts.RecordUpload = func(context.Context, string) error { t.Fatal("a resumed upload was recorded again"); return nil }
	res, err := f.submit(t, ipa, opts)
	if err != nil || res.UploadID != recorded || res.State != "VALID" {
		t.Fatalf("the resumed attempt: %+v, %v\n%s", res, err, f.log.String())
	}
	if ups := f.srv.Uploads(); len(ups) != 1 || len(ups[0].Files) != 1 || ups[0].Files[0].SHA256 != sha256File(t, ipa) {
		t.Fatalf("uploads: %+v", ups)
	}
	// Resuming a finished submission only reads it.
	if res, err := f.submit(t, ipa, opts); err != nil || res.BuildID == "" || len(f.srv.Uploads()) != 1 {
		t.Fatalf("resuming a finished submission: %+v, %v", res, err)
	}
	// An upload id of another version is refused.
	opts.UploadID = recorded
	if _, err := f.submit(t, writeIPA(t, testBundle, "3.1", "10"), opts); err == nil || !strings.Contains(err.Error(), "being resumed is version 3.1 (9)") {
		t.Fatalf("another version's upload id: %v", err)
	}
}

// App Store Connect's verdict on the upload or the build is the error,
// with Apple's findings, and is final.
func TestProcessingFailures(t *testing.T) {
	t.Run("the upload FAILED", func(t *testing.T) {
		f := start(t, func(c *fakeappstoreconnect.Config) {
			c.UploadErrors = []fakeappstoreconnect.StateDetail{{Code: "90062", Description: "Invalid Bundle. The bundle is missing its executable."}}
		})
		_, err := f.submit(t, writeIPA(t, testBundle, "1.0", "1"), Options{AppID: testApp})
		var pe *ProcessingError
		if !errors.As(err, &pe) || pe.State != "FAILED" || api.Transient(err) ||
			!strings.Contains(err.Error(), "90062: Invalid Bundle. The bundle is missing its executable.") || !strings.Contains(err.Error(), "raise the build number") {
			t.Fatalf("a failed upload: %v", err)
		}
	})
	for _, state := range []string{"FAILED", "INVALID"} {
		t.Run("the build is "+state, func(t *testing.T) {
			f := start(t, func(c *fakeappstoreconnect.Config) { c.BuildState = state })
			_, err := f.submit(t, writeIPA(t, testBundle, "1.0", "1"), Options{AppID: testApp, Groups: []string{"Team"}})
			var pe *ProcessingError
			if !errors.As(err, &pe) || pe.State != state || api.Transient(err) || !strings.Contains(err.Error(), "App Store Connect processed the build: "+state) {
				t.Fatalf("a %s build: %v", state, err)
			}
			if ups := f.srv.Uploads(); len(ups) != 1 || len(ups[0].Groups) != 0 {
				t.Fatalf("uploads: %+v", ups)
			}
		})
	}
	t.Run("processing outlasts the timeout", func(t *testing.T) {
		f := start(t, func(c *fakeappstoreconnect.Config) { c.BuildPolls = 1 << 30 })
		_, err := f.submit(t, writeIPA(t, testBundle, "1.0", "1"), Options{AppID: testApp, ProcessingTimeout: 20 * time.Millisecond})
		if err == nil || !api.Transient(err) || !strings.Contains(err.Error(), "still processing the build") {
			t.Fatalf("a processing timeout: %v", err)
		}
	})
}

// A TestFlight group the app does not have is named, with the groups it
// has and the fix.
func TestUnknownGroup(t *testing.T) {
	f := start(t, nil)
	_, err := f.submit(t, writeIPA(t, testBundle, "1.0", "1"), Options{AppID: testApp, Groups: []string{"Nobody"}})
	if err == nil || !strings.Contains(err.Error(), `no TestFlight group "Nobody" (it has "Team", "Beta Testers")`) {
		t.Fatalf("an unknown group: %v", err)
	}
}

// Upload operations that leave a gap, overlap, or would send the .ipa
// without TLS are refused.
func TestUploadOperationsAreChecked(t *testing.T) {
	s := &session{c: &Client{}}
	op := func(off, n int64, u string) uploadOperation {
		return uploadOperation{Method: http.MethodPut, URL: u, Offset: off, Length: n}
	}
	const u = "https://upload.example/part"
	for _, tc := range []struct {
		name string
		ops  []uploadOperation
		ok   bool
	}{
		{"whole", []uploadOperation{op(10, 5, u), op(0, 10, u)}, true},
		{"gap", []uploadOperation{op(0, 5, u), op(6, 9, u)}, false},
		{"overlap", []uploadOperation{op(0, 10, u), op(5, 10, u)}, false},
		{"short", []uploadOperation{op(0, 10, u)}, false},
		{"past the end", []uploadOperation{op(0, 20, u)}, false},
		{"none", nil, false},
		{"plain http", []uploadOperation{op(0, 15, "http://upload.example/part")}, false},
		{"another method", []uploadOperation{{Method: http.MethodDelete, URL: u, Length: 15}}, false},
	} {
		if err := s.checkOperations(tc.ops, 15); (err == nil) != tc.ok {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

// The CLI's check of an iOS submit profile: an Apple ID login is refused
// with what to set instead; a key named in part, or ids of the wrong
// form, are named.
func TestCheckProfile(t *testing.T) {
	good := Profile{AscAppID: "1234567891", AscAPIKeyPath: "AuthKey.p8", AscAPIKeyIssuerID: testIssuer, AscAPIKeyID: testKeyID, AppleTeamID: "AB32CZE81F"}
	if err := CheckProfile(good); err != nil {
		t.Fatal(err)
	}
	withAppleID := good
	withAppleID.AppleID = "dev@example.com"
	if err := CheckProfile(withAppleID); err != nil {
		t.Fatalf("an Apple ID beside an API key: %v", err)
	}
	for _, tc := range []struct {
		name string
		p    Profile
		want string
	}{
		{"Apple ID", Profile{AppleID: "dev@example.com"}, "is not supported"},
		{"app-specific password", Profile{AppSpecificPassword: true}, "ascApiKeyPath (the .p8 file), ascApiKeyIssuerId and ascApiKeyId"},
		{"no key", Profile{}, "names no App Store Connect API key"},
		{"part of a key", Profile{AscAPIKeyPath: "AuthKey.p8"}, "must all be set"},
		{"issuer", Profile{AscAPIKeyPath: "k.p8", AscAPIKeyIssuerID: "x", AscAPIKeyID: testKeyID}, "is not a UUID"},
		{"key id", Profile{AscAPIKeyPath: "k.p8", AscAPIKeyIssuerID: testIssuer, AscAPIKeyID: "lower"}, "uppercase letters and digits"},
		{"app id", Profile{AscAPIKeyPath: "k.p8", AscAPIKeyIssuerID: testIssuer, AscAPIKeyID: testKeyID, AscAppID: "my-app"}, "ascAppId \"my-app\""},
		{"team id", Profile{AscAPIKeyPath: "k.p8", AscAPIKeyIssuerID: testIssuer, AscAPIKeyID: testKeyID, AppleTeamID: "TEAM"}, "appleTeamId \"TEAM\""},
	} {
		err := CheckProfile(tc.p)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: want %q, got %v", tc.name, tc.want, err)
		}
		if (tc.name == "Apple ID" || tc.name == "app-specific password") && !errors.Is(err, ErrPasswordLogin) {
			t.Errorf("%s: not ErrPasswordLogin: %v", tc.name, err)
		}
	}
}

// An answer larger than any App Store Connect gives is not read whole:
// the submission stops with an error saying so.
func TestAnswersAreBounded(t *testing.T) {
	key, _ := newKey(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"data":{"id":"`+testApp+`","attributes":{"bundleId":"`+testBundle+`","name":"`)
		io.WriteString(w, strings.Repeat("0", 2*maxResponse))
		io.WriteString(w, `"}}}`)
	}))
	defer srv.Close()
	c := &Client{BaseURL: srv.URL, Retry: api.RetryPolicy{Backoff: api.Backoff{Initial: time.Millisecond}, Attempts: 1}}
	_, err := c.Submit(context.Background(), key, writeIPA(t, testBundle, "1.0", "1"), Options{AppID: testApp}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "larger than 1024 KiB") {
		t.Fatalf("an oversized answer: %v", err)
	}
}
