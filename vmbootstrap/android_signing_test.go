package vmbootstrap

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/internal/testsupport/syncbuf"
	"github.com/freeagent-build/freeagent/internal/testsupport/testtool"
)

// requireAndroidTools fails the test when the JDK, zipalign or apksigner
// is missing.
func requireAndroidTools(t *testing.T) {
	t.Helper()
	testtool.Need(t, "keytool", "jar", "jarsigner", "zipalign", "apksigner")
}

// androidApp copies testdata/android-app (its gradlew writes build
// outputs) and appends lines to its android/gradle.properties.
func androidApp(t *testing.T, properties ...string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "project")
	if err := os.CopyFS(dst, os.DirFS("testdata/android-app")); err != nil {
		t.Fatal(err)
	}
	if len(properties) > 0 {
		f, err := os.OpenFile(filepath.Join(dst, "android/gradle.properties"), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintln(f, strings.Join(properties, "\n"))
		f.Close()
	}
	return dst
}

type teamKey struct {
	ks   api.AndroidKeystore
	info api.KeystoreInfo
}

var keytoolSHA256 = regexp.MustCompile(`(?m)^\s*SHA256: ([0-9A-F:]+)$`)

// newTeamKey makes an upload keystore with keytool and identifies it the
// way keytool does (the CLI's credentials package does the same, checked
// against keytool in its own tests).
func newTeamKey(t *testing.T, dir, storetype, alias, storePw, keyPw, dname string) teamKey {
	t.Helper()
	file := filepath.Join(dir, alias+".keystore")
	out, err := exec.Command("keytool", "-genkeypair", "-keystore", file, "-storetype", storetype, "-storepass", storePw, "-keypass", keyPw,
		"-alias", alias, "-keyalg", "RSA", "-keysize", "2048", "-validity", "10000", "-dname", dname).CombinedOutput()
	if err != nil {
		t.Fatalf("keytool: %v\n%s", err, out)
	}
	out, err = exec.Command("keytool", "-list", "-v", "-keystore", file, "-storepass", storePw, "-alias", alias).CombinedOutput()
	m := keytoolSHA256.FindStringSubmatch(string(out))
	if err != nil || m == nil {
		t.Fatalf("keytool -list: %v\n%s", err, out)
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return teamKey{
		ks:   api.AndroidKeystore{Keystore: raw, KeystorePassword: storePw, KeyAlias: alias, KeyPassword: keyPw},
		info: api.KeystoreInfo{Type: storetype, KeyAlias: alias, Subject: strings.ReplaceAll(dname, ", ", ","), CertificateSHA256: strings.ToLower(strings.ReplaceAll(m[1], ":", ""))},
	}
}

// gradle runs the project's gradlew as the pipeline runs steps, with env
// added to the step's environment, and returns the log.
func gradle(t *testing.T, project string, env []string, tasks ...string) (string, error) {
	t.Helper()
	var out syncbuf.Buffer
	r := &stepRunner{env: append(os.Environ(), env...), out: &out, grace: 5 * time.Second, drain: time.Second}
	dir := filepath.Join(project, "android")
	err := r.run(context.Background(), Step{Argv: append([]string{filepath.Join(dir, "gradlew")}, tasks...), Dir: dir})
	return out.String(), err
}

// TestWriteGradleSigning: the keystore, its passwords and the init script
// are private files in the signing directory; only the JSON file holds the
// passwords, and the init script names it as a Groovy literal.
func TestWriteGradleSigning(t *testing.T) {
	work := filepath.Join(t.TempDir(), "work", "it's \\ here")
	ks := api.AndroidKeystore{Keystore: []byte{0xFE, 0xED, 0xFE, 0xED, 1, 2, 3}, KeystorePassword: `store "pw"`, KeyAlias: "upload"}
	script, err := writeGradleSigning(work, ks)
	if err != nil {
		t.Fatal(err)
	}
	if dst, _ := os.Stat(work); dst.Mode().Perm() != 0o700 {
		t.Errorf("work dir mode %v, want 0700", dst.Mode().Perm())
	}
	entries, err := os.ReadDir(work)
	if err != nil || len(entries) != 3 {
		t.Fatalf("files in the signing directory: %v %v", entries, err)
	}
	var keystore, secrets string
	for _, e := range entries {
		f := filepath.Join(work, e.Name())
		if st, err := os.Stat(f); err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600 (%v)", f, st.Mode().Perm(), err)
		}
		switch filepath.Ext(f) {
		case ".keystore":
			keystore = f
		case ".json":
			secrets = f
		}
	}
	if b, _ := os.ReadFile(keystore); string(b) != string(ks.Keystore) {
		t.Errorf("keystore content %x", b)
	}
	var got gradleSigning
	readJSONFile(t, secrets, &got)
	want := gradleSigning{StoreFile: keystore, StorePassword: `store "pw"`, KeyAlias: "upload", KeyPassword: `store "pw"`, StoreType: "jks"} // no key password: the store's
	if got != want {
		t.Errorf("signing file = %+v, want %+v", got, want)
	}
	src, err := os.ReadFile(script)
	if err != nil {
		t.Fatal(err)
	}
	literal := "'" + strings.ReplaceAll(strings.ReplaceAll(secrets, `\`, `\\`), `'`, `\'`) + "'"
	if !strings.Contains(string(src), "parse(new File("+literal+"))") || strings.Contains(string(src), "pw") {
		t.Errorf("init script:\n%s", src)
	}
	if _, err := writeGradleSigning(work, api.AndroidKeystore{}); err == nil {
		t.Error("writeGradleSigning accepted an empty keystore")
	}
}

// TestAndroidSigning runs the stand-in Gradle (testdata/android-app) the
// way the pipeline will: the keystore written outside the project, its
// properties in the gradle step's environment only; then checks the
// artifacts with verifyAndroidArtifact.
func TestAndroidSigning(t *testing.T) {
	requireAndroidTools(t)
	keys := t.TempDir()
	team := newTeamKey(t, keys, "JKS", "upload", "team-store-pw", "team-key-pw", "CN=Team Upload, O=Acme, C=US")
	teamP12 := newTeamKey(t, keys, "PKCS12", "release", "p12-store-pw", "p12-store-pw", "CN=Team Release, O=Acme")
	// The project's own key, for the re-signing switch.
	own := newTeamKey(t, keys, "JKS", "own", "own-store-pw", "own-store-pw", "CN=Someone Else")
	const debugSHA256 = "bf53d1080b02563010eeaf175b58e3c76298b9d1b0879a3d89bc94276af24fdb" // testdata/android-app/android/app/debug.keystore

	// The arguments the pipeline adds to the gradle step.
	inject := func(t *testing.T, k teamKey) []string {
		script, err := writeGradleSigning(filepath.Join(t.TempDir(), "signing"), k.ks)
		if err != nil {
			t.Fatal(err)
		}
		return []string{"--init-script", script}
	}
	noSecrets := func(t *testing.T, log string, k teamKey) {
		t.Helper()
		for _, s := range []string{k.ks.KeystorePassword, k.ks.KeyPassword} {
			if strings.Contains(log, s) {
				t.Errorf("the gradle log shows a password:\n%s", log)
			}
		}
	}

	t.Run("injected keystore signs every output", func(t *testing.T) {
		project := androidApp(t)
		for _, k := range []teamKey{team, teamP12} {
			log, err := gradle(t, project, nil, append(inject(t, k), "clean", ":app:assembleRelease", ":app:bundleRelease", "assembleFreeRelease")...)
			if err != nil {
				t.Fatalf("%v\n%s", err, log)
			}
			noSecrets(t, log, k)
			for _, artifact := range []string{"apk/release/app-release.apk", "bundle/release/app-release.aab", "apk/free/release/app-free-release.apk"} {
				if err := verifyAndroidArtifact(filepath.Join(project, "android/app/build/outputs", artifact), k.info); err != nil {
					t.Errorf("%s (%s): %v", artifact, k.info.Type, err)
				}
			}
		}
		if _, err := os.Stat(filepath.Join(project, "android/app/build/outputs/apk/release/app-release.apk")); err != nil {
			t.Fatal(err)
		}
		// Nothing of the keystore in the project.
		filepath.WalkDir(project, func(p string, d fs.DirEntry, err error) error {
			if err == nil && strings.HasSuffix(p, ".keystore") && !strings.HasSuffix(p, "android/app/debug.keystore") {
				t.Errorf("keystore inside the project: %s", p)
			}
			return nil
		})
	})

	t.Run("without injection Expo's template signs release with the debug key", func(t *testing.T) {
		project := androidApp(t)
		log, err := gradle(t, project, nil, ":app:assembleRelease", "bundleRelease")
		if err != nil {
			t.Fatalf("%v\n%s", err, log)
		}
		for _, artifact := range []string{"apk/release/app-release.apk", "bundle/release/app-release.aab"} {
			err := verifyAndroidArtifact(filepath.Join(project, "android/app/build/outputs", artifact), team.info)
			var mismatch *SigningMismatchError
			if !errors.As(err, &mismatch) {
				t.Fatalf("%s: err = %v, want a SigningMismatchError", artifact, err)
			}
			msg := err.Error()
			t.Log(msg)
			for _, want := range []string{
				filepath.Base(artifact) + " is signed",
				"CN=Android Debug,O=Android,C=US (SHA-256 " + debugSHA256 + ")",
				`key "upload": CN=Team Upload,O=Acme,C=US, SHA-256 ` + team.info.CertificateSHA256,
				"A release build signed with the debug key: the project's signingConfig overrides",
			} {
				if !strings.Contains(msg, want) {
					t.Errorf("%s: error %q\nlacks %q", artifact, msg, want)
				}
			}
		}
	})

	t.Run("run outside android/ there is no Gradle build", func(t *testing.T) {
		project := androidApp(t)
		var out syncbuf.Buffer
		r := &stepRunner{env: os.Environ(), out: &out, grace: 5 * time.Second, drain: time.Second}
		err := r.run(context.Background(), Step{Argv: []string{filepath.Join(project, "android", "gradlew"), ":app:assembleRelease"}, Dir: project})
		if err == nil || !strings.Contains(out.String(), "does not contain a Gradle build") {
			t.Fatalf("err %v\n%s", err, out.String())
		}
	})

	t.Run("a project that re-signs with its own key", func(t *testing.T) {
		ownFile := filepath.Join(keys, "own.keystore")
		project := androidApp(t, "releaseResign.storeFile="+ownFile, "releaseResign.storePassword=own-store-pw", "releaseResign.keyAlias=own")
		log, err := gradle(t, project, nil, append(inject(t, team), ":app:assembleRelease", ":app:bundleRelease", ":app:assembleDebug")...)
		if err != nil {
			t.Fatalf("%v\n%s", err, log)
		}
		for _, artifact := range []string{"apk/release/app-release.apk", "bundle/release/app-release.aab"} {
			err := verifyAndroidArtifact(filepath.Join(project, "android/app/build/outputs", artifact), team.info)
			if err == nil || !strings.Contains(err.Error(), "CN=Someone Else (SHA-256 "+own.info.CertificateSHA256+")") ||
				!strings.Contains(err.Error(), "re-signs its outputs with a key of its own") {
				t.Errorf("%s: err = %v", artifact, err)
			}
			t.Log(err)
		}
		// The debug variant is not re-signed: the team's key.
		if err := verifyAndroidArtifact(filepath.Join(project, "android/app/build/outputs/apk/debug/app-debug.apk"), team.info); err != nil {
			t.Errorf("debug APK: %v", err)
		}
	})

	t.Run("a release build type without signingConfig", func(t *testing.T) {
		project := androidApp(t, "releaseSigningConfig=none")
		log, err := gradle(t, project, nil, "assembleRelease", "bundleRelease")
		if err != nil {
			t.Fatalf("%v\n%s", err, log)
		}
		for _, artifact := range []string{"apk/release/app-release-unsigned.apk", "bundle/release/app-release.aab"} {
			err := verifyAndroidArtifact(filepath.Join(project, "android/app/build/outputs", artifact), team.info)
			var mismatch *SigningMismatchError
			if !errors.As(err, &mismatch) || mismatch.Got != nil || !strings.Contains(err.Error(), "is not signed") {
				t.Errorf("%s: err = %v", artifact, err)
			}
			t.Log(err)
		}
		// With the injection the same project is signed by the team's key.
		if log, err := gradle(t, project, nil, append(inject(t, team), "assembleRelease")...); err != nil {
			t.Fatalf("%v\n%s", err, log)
		}
		if err := verifyAndroidArtifact(filepath.Join(project, "android/app/build/outputs/apk/release/app-release.apk"), team.info); err != nil {
			t.Error(err)
		}
	})

	t.Run("unknown task fails as Gradle does", func(t *testing.T) {
		project := androidApp(t)
		log, err := gradle(t, project, nil, ":app:assembleRelease", "assembleStaging")
		var stepErr *StepError
		if !errors.As(err, &stepErr) || stepErr.Code != 1 {
			t.Fatalf("err = %v\n%s", err, log)
		}
		if !strings.Contains(log, "Task 'assembleStaging' not found in root project 'android-app'.") || !strings.Contains(log, "BUILD FAILED") {
			t.Errorf("log:\n%s", log)
		}
		if _, err := os.Stat(filepath.Join(project, "android/app/build")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("a task ran before the unknown one failed the build: %v", err)
		}
	})

	t.Run("a wrong injected password fails as AGP does", func(t *testing.T) {
		project := androidApp(t)
		bad := team
		bad.ks.KeyPassword = "not-the-key-password"
		log, err := gradle(t, project, nil, append(inject(t, bad), ":app:assembleRelease")...)
		var stepErr *StepError
		if !errors.As(err, &stepErr) || stepErr.Code != 1 {
			t.Fatalf("err = %v\n%s", err, log)
		}
		if !strings.Contains(log, "KeytoolException: Failed to read key upload from store") || !strings.Contains(log, "BUILD FAILED") {
			t.Errorf("log:\n%s", log)
		}
		noSecrets(t, log, bad)
	})

	t.Run("not an artifact", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "app-release.apk")
		os.WriteFile(file, []byte("<html>502 Bad Gateway</html>"), 0o644)
		err := verifyAndroidArtifact(file, team.info)
		var mismatch *SigningMismatchError
		if err == nil || errors.As(err, &mismatch) || !strings.Contains(err.Error(), "not a zip") {
			t.Errorf("err = %v", err)
		}
	})
}
