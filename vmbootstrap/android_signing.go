package vmbootstrap

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/freeagent-build/freeagent/controller/api"
	"github.com/freeagent-build/freeagent/vmbootstrap/apksig"
)

// How the team's upload keystore reaches Gradle: through the Android
// Gradle Plugin's injected signing properties (android.injected.signing.*,
// what Android Studio's "Generate Signed Bundle / APK" passes), which AGP
// reads as Gradle properties (its ProjectOptions) and applies to the
// variants it builds instead of the build types' signingConfig. Gradle
// sets a property from an environment variable named
// ORG_GRADLE_PROJECT_<name> (docs.gradle.org "Project properties"; the
// ProviderFactory.gradleProperty reference lists "environment variables
// with the ORG_GRADLE_PROJECT_ prefix" among its sources, after -P and
// org.gradle.project.* system properties), so the properties travel in the
// environment of the gradle step only: never on a command line (visible
// in ps and echoed in the log), never in a file inside the project (which
// the build's scripts and artifact globs can read). The variable names
// contain dots, which execve and Java's System.getenv accept though a
// shell cannot export them.
//
// The integrator must register the two passwords with the log redactor:
// the gradle step's children (the JS bundler, plugins) inherit them.
const gradleSigningPrefix = "ORG_GRADLE_PROJECT_android.injected.signing."

// writeKeystore writes the keystore to a new file, readable by this user
// only, in dir: a work directory outside the project, created if needed.
// The caller removes it after the build.
func writeKeystore(dir string, ks api.AndroidKeystore) (string, error) {
	if len(ks.Keystore) == 0 {
		return "", errors.New("the build's Android credentials hold no keystore: set them again with `expo-build credentials set`")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("creating the keystore's directory: %w", err)
	}
	f, err := os.CreateTemp(dir, "upload-*.keystore") // 0600
	if err != nil {
		return "", fmt.Errorf("writing the keystore: %w", err)
	}
	if _, err := f.Write(ks.Keystore); err != nil {
		f.Close()
		os.Remove(f.Name())
		return "", fmt.Errorf("writing the keystore: %w", err)
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("writing the keystore: %w", err)
	}
	return f.Name(), nil
}

// gradleSigningEnv are the environment entries (NAME=value) that make AGP
// sign with the keystore at keystorePath. An empty key password means the
// store password, as EAS treats a credentials.json without one.
func gradleSigningEnv(keystorePath string, ks api.AndroidKeystore) []string {
	keyPassword := ks.KeyPassword
	if keyPassword == "" {
		keyPassword = ks.KeystorePassword
	}
	env := []string{
		gradleSigningPrefix + "store.file=" + keystorePath,
		gradleSigningPrefix + "store.password=" + ks.KeystorePassword,
		gradleSigningPrefix + "key.alias=" + ks.KeyAlias,
		gradleSigningPrefix + "key.password=" + keyPassword,
	}
	// Java's default keystore type (PKCS12) reads JKS too, but naming
	// the type spares AGP the guess.
	if len(ks.Keystore) >= 4 && binary.BigEndian.Uint32(ks.Keystore) == 0xFEEDFEED {
		env = append(env, gradleSigningPrefix+"store.type=jks")
	} else {
		env = append(env, gradleSigningPrefix+"store.type=pkcs12")
	}
	return env
}

// debugSubject is the subject of the debug keystores the Android SDK and
// Expo's template generate.
const debugSubject = "CN=Android Debug,O=Android,C=US"

// SigningMismatchError is an artifact not signed (only) with the build's
// keystore: the project's fault, not the farm's.
type SigningMismatchError struct {
	Artifact string
	Want     api.KeystoreInfo
	// Got are the artifact's signers (nil when it is unsigned), under Scheme.
	Got    []apksig.Signer
	Scheme apksig.Scheme
}

func (e *SigningMismatchError) Error() string {
	name := filepath.Base(e.Artifact)
	want := fmt.Sprintf("the build's keystore (key %q: %s, SHA-256 %s)", e.Want.KeyAlias, e.Want.Subject, e.Want.CertificateSHA256)
	if len(e.Got) == 0 {
		return fmt.Sprintf("%s is not signed, though %s was given to Gradle: the project's build does not sign this variant "+
			"(no signingConfig for its build type, and the injected one did not apply); check android/app/build.gradle's buildTypes", name, want)
	}
	var got []string
	debug, teamToo := false, false
	for _, s := range e.Got {
		got = append(got, fmt.Sprintf("%s (SHA-256 %s)", s.Subject, s.SHA256))
		debug = debug || s.Subject == debugSubject
		teamToo = teamToo || strings.EqualFold(s.SHA256, e.Want.CertificateSHA256)
	}
	not := "not by"
	if teamToo {
		not = "not only by"
	}
	msg := fmt.Sprintf("%s is signed (%s) by %s, %s %s", name, e.Scheme, strings.Join(got, " and "), not, want)
	if debug {
		return msg + ". A release build signed with the debug key: the project's signingConfig overrides the injected keystore " +
			"(android/app/build.gradle, or a config plugin or Gradle script that sets signingConfigs.debug for release or re-signs the outputs); " +
			"remove that override so the upload keystore signs the build"
	}
	return msg + ". The project's Gradle build signs or re-signs its outputs with a key of its own after the Android Gradle Plugin " +
		"(a signing task or plugin in android/app/build.gradle or gradle.properties); remove it, or make the farm's credentials that key"
}

// verifyAndroidArtifact checks that the .apk or .aab at path is signed
// with want's certificate and nothing else: a store rejects (or, worse,
// accepts as a new app) anything else. A mismatch or an unsigned artifact
// is a *SigningMismatchError; an unreadable one another error.
func verifyAndroidArtifact(path string, want api.KeystoreInfo) error {
	s, err := apksig.SignerCertificates(path)
	if errors.Is(err, apksig.ErrNotSigned) {
		return &SigningMismatchError{Artifact: path, Want: want}
	}
	if err != nil {
		return fmt.Errorf("checking the signature of %s: %w", filepath.Base(path), err)
	}
	if len(s.Signers) == 1 && strings.EqualFold(s.Signers[0].SHA256, want.CertificateSHA256) {
		return nil
	}
	return &SigningMismatchError{Artifact: path, Want: want, Got: s.Signers, Scheme: s.Scheme}
}
