package httpapi_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/controllertest"
)

// Build specs, build credentials, project variables and farm credentials

func TestBadSpecAndCredentials(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	u := e.URL
	src := controllertest.Project(t, map[string]string{"package.json": `{"name":"app"}`})
	ct := biMPType(biBoundary)
	submit := func(t *testing.T, parts ...biPart) biReply {
		t.Helper()
		return biSend(t, "POST", u+"/api/builds", biMultipart(biBoundary, append(parts, biFile("source", "s.tar.gz", src))...),
			api.HeaderAPIKey, e.devKey, "Content-Type", ct)
	}
	specJSON := func(edit func(*api.BuildSpec)) string {
		s := androidSpec("good-app", "preview")
		edit(s)
		b, _ := json.Marshal(s)
		return string(b)
	}
	credsJSON := func(edit func(*api.AndroidKeystore)) []byte {
		k := testKeystore()
		edit(k)
		b, _ := json.Marshal(api.BuildCredentials{Android: k})
		return b
	}
	iosSpecJSON := func(edit func(*api.BuildSpec)) string {
		s := iosSpec("good-app", "preview")
		edit(s)
		b, _ := json.Marshal(s)
		return string(b)
	}
	iosCredsJSON := func(edit func(map[string]api.IOSTargetCredentials)) []byte {
		m := testIOSCredentials()
		edit(m)
		b, _ := json.Marshal(api.BuildCredentials{IOS: m})
		return b
	}
	android := biField("platform", "android")
	ios := biField("platform", "ios")
	before := biFingerprint(t, e)
	for _, c := range []struct {
		name   string
		parts  []biPart
		status int
		field  string
	}{
		{"spec not JSON", []biPart{android, biField("spec", "{not json")}, 400, "spec"},
		{"spec wrong type", []biPart{android, biField("spec", `{"version":"1"}`)}, 422, "version"},
		{"spec autoIncrement", []biPart{android, biField("spec", `{"version":1,"profile":{"autoIncrement":3}}`)}, 422, "autoIncrement"},
		{"spec version", []biPart{android, biField("spec", specJSON(func(s *api.BuildSpec) { s.Version = 2 }))}, 422, "version 2"},
		{"spec version 0", []biPart{android, biField("spec", `{}`)}, 422, "version 0"},
		{"spec platform", []biPart{android, biField("spec", specJSON(func(s *api.BuildSpec) { s.Platform = "ios" }))}, 422, "platform"},
		{"spec platform last", []biPart{biField("spec", specJSON(func(s *api.BuildSpec) {})), biField("platform", "ios")}, 422, "platform"},
		{"empty slug", []biPart{android, biField("spec", specJSON(func(s *api.BuildSpec) { s.App.Slug = "" }))}, 422, "app.slug"},
		{"bad slug", []biPart{android, biField("spec", specJSON(func(s *api.BuildSpec) { s.App.Slug = "my app/../x" }))}, 422, "app.slug"},
		{"long slug", []biPart{android, biField("spec", specJSON(func(s *api.BuildSpec) { s.App.Slug = strings.Repeat("a", 129) }))}, 422, "app.slug"},
		{"no environment", []biPart{android, biField("spec", specJSON(func(s *api.BuildSpec) { s.Environment = "" }))}, 422, "environment"},
		{"short environment", []biPart{android, biField("spec", specJSON(func(s *api.BuildSpec) { s.Environment = "qa" }))}, 422, "environment"},
		{"upper environment", []biPart{android, biField("spec", specJSON(func(s *api.BuildSpec) { s.Environment = "Production" }))}, 422, "environment"},
		{"long profile", []biPart{android, biField("spec", specJSON(func(s *api.BuildSpec) { s.ProfileName = strings.Repeat("p", 101) }))}, 422, "profile_name"},
		{"unknown workflow", []biPart{android, biField("spec", specJSON(func(s *api.BuildSpec) { s.Workflow = "bare" }))}, 422, "workflow"},
		{"credentials source", []biPart{android, biField("spec", specJSON(func(s *api.BuildSpec) { s.Credentials.Source = "cloud" }))}, 422, "credentials.source"},
		{"remote without fingerprint", []biPart{android, biField("spec", specJSON(func(s *api.BuildSpec) { s.Credentials.Source = "remote" }))}, 422, "certificate_sha256"},
		{"bad fingerprint", []biPart{android, biField("spec", specJSON(func(s *api.BuildSpec) {
			s.Credentials = api.CredentialsInfo{Source: "remote", Android: &api.KeystoreInfo{CertificateSHA256: "AB:CD"}}
		}))}, 422, "certificate_sha256"},
		{"bad credential name", []biPart{android, biField("spec", specJSON(func(s *api.BuildSpec) {
			s.Credentials = api.CredentialsInfo{Source: "remote", Android: &api.KeystoreInfo{Name: "../x", CertificateSHA256: strings.Repeat("a", 64)}}
		}))}, 422, "credentials.android.name"},
		{"NUL in spec", []biPart{android, biField("spec", specJSON(func(s *api.BuildSpec) { s.Message = "a\x00b" }))}, 422, "NUL"},
		{"two specs", []biPart{android, biField("spec", specJSON(func(s *api.BuildSpec) {})), biField("spec", specJSON(func(s *api.BuildSpec) {}))}, 400, "spec"},
		{"credentials not JSON", []biPart{android, biFile("credentials", "c.json", []byte("nope"))}, 400, "credentials"},
		{"credentials empty", []biPart{android, biFile("credentials", "c.json", []byte(`{}`))}, 422, "credentials"},
		{"no keystore bytes", []biPart{android, biFile("credentials", "c.json", credsJSON(func(k *api.AndroidKeystore) { k.Keystore = nil }))}, 422, "keystore"},
		{"no keystore password", []biPart{android, biFile("credentials", "c.json", credsJSON(func(k *api.AndroidKeystore) { k.KeystorePassword = "" }))}, 422, "keystore_password"},
		{"no alias", []biPart{android, biFile("credentials", "c.json", credsJSON(func(k *api.AndroidKeystore) { k.KeyAlias = "" }))}, 422, "key_alias"},
		{"no key password", []biPart{android, biFile("credentials", "c.json", credsJSON(func(k *api.AndroidKeystore) { k.KeyPassword = "" }))}, 422, "key_password"},
		{"keystore not base64", []biPart{android, biFile("credentials", "c.json", []byte(`{"android":{"keystore":"!!!","keystore_password":"a","key_alias":"b","key_password":"c"}}`))}, 400, "credentials"},
		{"credentials for iOS", []biPart{biField("platform", "ios"), biFile("credentials", "c.json", credsJSON(func(*api.AndroidKeystore) {}))}, 422, "ios"},
		{"iOS credentials for Android", []biPart{android, biFile("credentials", "c.json", iosCredsJSON(func(map[string]api.IOSTargetCredentials) {}))}, 422, "android"},
		{"both platforms' credentials", []biPart{android, biFile("credentials", "c.json", func() []byte {
			b, _ := json.Marshal(api.BuildCredentials{Android: testKeystore(), IOS: testIOSCredentials()})
			return b
		}())}, 422, "both"},
		{"iOS target without profile", []biPart{ios, biFile("credentials", "c.json", iosCredsJSON(func(m map[string]api.IOSTargetCredentials) {
			t := m["App"]
			t.ProvisioningProfile = nil
			m["App"] = t
		}))}, 422, "ios.App.provisioning_profile"},
		{"iOS target without certificate", []biPart{ios, biFile("credentials", "c.json", iosCredsJSON(func(m map[string]api.IOSTargetCredentials) {
			t := m["Widget"]
			t.Certificate = nil
			m["Widget"] = t
		}))}, 422, "ios.Widget.certificate"},
		{"iOS target name with slash", []biPart{ios, biFile("credentials", "c.json", iosCredsJSON(func(m map[string]api.IOSTargetCredentials) {
			m["../App"] = m["App"]
		}))}, 422, "../App"},
		{"iOS credentials and certs zip", []biPart{ios, biFile("credentials", "c.json", iosCredsJSON(func(map[string]api.IOSTargetCredentials) {})),
			biFile("certs", "certs.zip", biValidCerts(t, "zip"))}, 422, "certs"},
		{"iOS spec on Android", []biPart{android, biField("spec", specJSON(func(s *api.BuildSpec) { s.IOS = &api.IOSBuild{Scheme: "App"} }))}, 422, "ios"},
		{"iOS export method", []biPart{ios, biField("spec", iosSpecJSON(func(s *api.BuildSpec) { s.Credentials.IOS.ExportMethod = "store" }))}, 422, "export_method"},
		{"iOS target without bundle id", []biPart{ios, biField("spec", iosSpecJSON(func(s *api.BuildSpec) { s.IOS.Targets[1].BundleID = "" }))}, 422, "targets[1]"},
		{"two credentials", []biPart{android, biFile("credentials", "a.json", credsJSON(func(*api.AndroidKeystore) {})), biFile("credentials", "b.json", credsJSON(func(*api.AndroidKeystore) {}))}, 400, "credentials"},
	} {
		t.Run(c.name, func(t *testing.T) { submit(t, c.parts...).wantFieldError(t, c.status, c.field) })
	}
	if n := biCount(t, e, `SELECT count(*) FROM builds`); n != 0 {
		t.Errorf("%d builds rows, want none", n)
	}
	biEventually(t, 2*time.Second, func() string {
		if ents, _ := os.ReadDir(biBuildsDir(e)); len(ents) != 0 {
			return fmt.Sprintf("files/builds holds %v, want nothing", biFiles(t, biBuildsDir(e)))
		}
		return ""
	})
	biUnchanged(t, e, before)

	// The valid forms still work, and leave a sealed credentials file.
	var out api.SubmitResponse
	submit(t, android, biField("spec", specJSON(func(*api.BuildSpec) {})), biFile("credentials", "c.json", credsJSON(func(*api.AndroidKeystore) {}))).
		wantOK(t, http.StatusCreated, &out)
	if got := biFiles(t, biBuildsDir(e)); !slices.Equal(got, []string{out.ID + "/credentials.sealed", out.ID + "/source"}) {
		t.Errorf("files after a valid submit: %v", got)
	}
	submit(t, ios, biField("spec", iosSpecJSON(func(*api.BuildSpec) {})), biFile("credentials", "c.json", iosCredsJSON(func(map[string]api.IOSTargetCredentials) {}))).
		wantOK(t, http.StatusCreated, &out)
}

func TestBadProjectRequests(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	u := e.URL + "/api/projects/"
	send := func(t *testing.T, method, path string, body any, key string) biReply {
		t.Helper()
		var b []byte
		if body != nil {
			if raw, ok := body.(string); ok {
				b = []byte(raw)
			} else {
				b, _ = json.Marshal(body)
			}
		}
		return biSend(t, method, u+path, b, api.HeaderAPIKey, key, "Content-Type", "application/json")
	}
	file := func(n int) string { return base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0xfe}, n)) }
	ok := api.SetVariableRequest{Name: "API_URL", Value: "https://x", Visibility: "plaintext"}
	edit := func(f func(*api.SetVariableRequest)) api.SetVariableRequest {
		r := ok
		f(&r)
		return r
	}
	ks := testKeystore()
	info := &api.KeystoreInfo{Type: "JKS", KeyAlias: "upload", CertificateSHA256: strings.Repeat("c", 64)}
	cred := func(f func(*api.AndroidKeystore, *api.KeystoreInfo)) api.SetCredentialRequest {
		k, i := *ks, *info
		f(&k, &i)
		return api.SetCredentialRequest{Android: &k, Info: &i}
	}
	before := biFingerprint(t, e)
	for _, c := range []struct {
		name, method, path string
		body               any
		status             int
		field              string
	}{
		{"bad project", "POST", "my%20app/env", ok, 422, "project"},
		{"long project", "POST", strings.Repeat("p", 129) + "/env", ok, 422, "project"},
		{"not JSON", "POST", "app/env", "{", 400, "JSON"},
		{"no name", "POST", "app/env", edit(func(r *api.SetVariableRequest) { r.Name = "" }), 422, "name"},
		{"name with dash", "POST", "app/env", edit(func(r *api.SetVariableRequest) { r.Name = "API-URL" }), 422, "name"},
		{"name with digit first", "POST", "app/env", edit(func(r *api.SetVariableRequest) { r.Name = "1API" }), 422, "name"},
		{"long name", "POST", "app/env", edit(func(r *api.SetVariableRequest) { r.Name = strings.Repeat("N", 129) }), 422, "name"},
		{"EAS_BUILD name", "POST", "app/env", edit(func(r *api.SetVariableRequest) { r.Name = "EAS_BUILD_PROFILE" }), 422, "EAS_BUILD"},
		{"FREEAGENT_ name", "POST", "app/env", edit(func(r *api.SetVariableRequest) { r.Name = "FREEAGENT_PLATFORM" }), 422, "FREEAGENT_"},
		{"visibility", "POST", "app/env", edit(func(r *api.SetVariableRequest) { r.Visibility = "public" }), 422, "visibility"},
		{"no visibility", "POST", "app/env", edit(func(r *api.SetVariableRequest) { r.Visibility = "" }), 422, "visibility"},
		{"type", "POST", "app/env", edit(func(r *api.SetVariableRequest) { r.Type = "json" }), 422, "type"},
		{"long string", "POST", "app/env", edit(func(r *api.SetVariableRequest) { r.Value = strings.Repeat("v", 32<<10+1) }), 422, "value"},
		{"NUL string", "POST", "app/env", edit(func(r *api.SetVariableRequest) { r.Value = "a\x00b" }), 422, "value"},
		{"file not base64", "POST", "app/env", edit(func(r *api.SetVariableRequest) { r.Type, r.Value = "file", "not base64!" }), 422, "value"},
		{"large file", "POST", "app/env", edit(func(r *api.SetVariableRequest) { r.Type, r.Value = "file", file(256<<10+1) }), 422, "value"},
		{"short secret", "POST", "app/env", edit(func(r *api.SetVariableRequest) { r.Visibility, r.Value = "secret", "1234567" }), 422, "needs at least 8"},
		{"secret EXPO_PUBLIC_", "POST", "app/env", edit(func(r *api.SetVariableRequest) {
			r.Name, r.Visibility, r.Value = "EXPO_PUBLIC_KEY", "secret", "long-enough-value"
		}), 422, "EXPO_PUBLIC_KEY cannot be secret"},
		{"short sensitive file", "POST", "app/env", edit(func(r *api.SetVariableRequest) { r.Visibility, r.Type, r.Value = "sensitive", "file", file(7) }), 422, "needs at least 8"},
		{"bad environment", "POST", "app/env", edit(func(r *api.SetVariableRequest) { r.Environments = []string{"preview", "Prod"} }), 422, "environments"},
		{"short environment", "POST", "app/env", edit(func(r *api.SetVariableRequest) { r.Environments = []string{"qa"} }), 422, "environments"},
		{"list bad environment", "GET", "app/env?environment=x", nil, 422, "environment"},
		{"list bad project", "GET", "a.b/env", nil, 422, "project"},
		{"delete bad name", "DELETE", "app/env/1X", nil, 422, "variable"},
		{"delete bad environment", "DELETE", "app/env/API_URL?environment=PROD", nil, 422, "environment"},
		{"credential platform", "PUT", "app/credentials/windows/default", cred(func(*api.AndroidKeystore, *api.KeystoreInfo) {}), 422, "platform"},
		{"credential ios", "PUT", "app/credentials/ios/default", cred(func(*api.AndroidKeystore, *api.KeystoreInfo) {}), 422, "iOS"},
		{"credential name", "PUT", "app/credentials/android/a%20b", cred(func(*api.AndroidKeystore, *api.KeystoreInfo) {}), 422, "credential name"},
		{"credential not JSON", "PUT", "app/credentials/android/default", "[", 400, "JSON"},
		{"credential no android", "PUT", "app/credentials/android/default", api.SetCredentialRequest{Info: info}, 422, "android"},
		{"credential no info", "PUT", "app/credentials/android/default", api.SetCredentialRequest{Android: ks}, 422, "info"},
		{"credential empty keystore", "PUT", "app/credentials/android/default", cred(func(k *api.AndroidKeystore, _ *api.KeystoreInfo) { k.Keystore = nil }), 422, "android.keystore"},
		{"credential no password", "PUT", "app/credentials/android/default", cred(func(k *api.AndroidKeystore, _ *api.KeystoreInfo) { k.KeystorePassword = "" }), 422, "keystore_password"},
		{"credential no key password", "PUT", "app/credentials/android/default", cred(func(k *api.AndroidKeystore, _ *api.KeystoreInfo) { k.KeyPassword = "" }), 422, "key_password"},
		{"credential type", "PUT", "app/credentials/android/default", cred(func(_ *api.AndroidKeystore, i *api.KeystoreInfo) { i.Type = "BKS" }), 422, "info.type"},
		{"credential sha", "PUT", "app/credentials/android/default", cred(func(_ *api.AndroidKeystore, i *api.KeystoreInfo) { i.CertificateSHA256 = "ABC" }), 422, "certificate_sha256"},
		{"credential alias mismatch", "PUT", "app/credentials/android/default", cred(func(_ *api.AndroidKeystore, i *api.KeystoreInfo) { i.KeyAlias = "other" }), 422, "key_alias"},
	} {
		t.Run(c.name, func(t *testing.T) { send(t, c.method, c.path, c.body, e.devKey).wantFieldError(t, c.status, c.field) })
	}
	send(t, "DELETE", "app/env/API_URL", nil, e.devKey).wantError(t, http.StatusNotFound, api.CodeNotFound)
	send(t, "DELETE", "app/credentials/android/default", nil, e.devKey).wantError(t, http.StatusNotFound, api.CodeNotFound)
	// Workers and missing keys are refused.
	send(t, "POST", "app/env", ok, e.workKey).wantError(t, http.StatusForbidden, api.CodeForbidden)
	send(t, "PUT", "app/credentials/android/default", cred(func(*api.AndroidKeystore, *api.KeystoreInfo) {}), "").wantError(t, http.StatusUnauthorized, api.CodeUnauthorized)
	for _, table := range []string{"project_variables", "project_credentials"} {
		if n := biCount(t, e, `SELECT count(*) FROM `+table); n != 0 {
			t.Errorf("refused requests left %d rows in %s", n, table)
		}
	}
	if n := biCount(t, e, `SELECT count(*) FROM events WHERE entity_type = 'project'`); n != 0 {
		t.Errorf("refused requests left %d audit events", n)
	}
	biUnchanged(t, e, before)
	// The limits themselves are allowed.
	send(t, "POST", "app/env", edit(func(r *api.SetVariableRequest) {
		r.Name, r.Value = strings.Repeat("N", 128), strings.Repeat("v", 32<<10)
	}), e.devKey).
		wantOK(t, http.StatusCreated, nil)
	send(t, "POST", "app/env", edit(func(r *api.SetVariableRequest) { r.Type, r.Value = "file", file(256<<10) }), e.devKey).wantOK(t, http.StatusCreated, nil)
}
