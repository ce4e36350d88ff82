package vmbootstrap

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/vmbootstrap/apksig"
)

// How the team's upload keystore reaches Gradle: a Gradle init script,
// given to the wrapper as --init-script PATH (a path, no secret), that
// reads the keystore's passwords from a JSON file and, through the
// Android Gradle Plugin's finalizeDsl hook, gives every build type of the
// app a signing config made from them: EAS Build's way (a Gradle script
// reading a credentials file), without editing the project. Both files,
// and the keystore, are 0600 in the build's work directory: outside the
// project (its scripts and artifact globs read it) and outside
// GRADLE_USER_HOME (which may be a saved cache).
//
// Not ORG_GRADLE_PROJECT_android.injected.signing.* variables: gradlew is
// a /bin/sh script, and dash (Debian's sh) drops variables whose names are
// not shell names, so Gradle never saw them and AGP signed with the
// project's own key. Not -P arguments either: the passwords would be in
// the process list.
//
// The integrator must register the two passwords with the log redactor:
// the Gradle daemon holds them and a project's script could print them.

// gradleSigning is the JSON file the init script reads.
type gradleSigning struct {
	StoreFile     string `json:"storeFile"`
	StorePassword string `json:"storePassword"`
	KeyAlias      string `json:"keyAlias"`
	KeyPassword   string `json:"keyPassword"`
	StoreType     string `json:"storeType"`
}

// signingInitScript is the init script; %s is the JSON file's path as a
// Groovy string literal. The config's name is also what the stand-in
// Gradle reports (internal/standins/fakegradle reads this form).
const signingInitScript = `// Written by freeagent-vm: every build type of the app is signed with the
// build's upload keystore. The passwords are in the file this reads (0600,
// outside the project), never in this script, the environment or argv.
def freeagentSigning = new groovy.json.JsonSlurper().parse(new File(%s))
gradle.allprojects { project ->
    project.pluginManager.withPlugin('com.android.application') {
        project.extensions.getByName('androidComponents').finalizeDsl { android ->
            def upload = android.signingConfigs.maybeCreate('freeagentUpload')
            upload.storeFile = new File(freeagentSigning.storeFile)
            upload.storePassword = freeagentSigning.storePassword
            upload.keyAlias = freeagentSigning.keyAlias
            upload.keyPassword = freeagentSigning.keyPassword
            upload.storeType = freeagentSigning.storeType
            android.buildTypes.all { it.signingConfig = upload }
        }
    }
}
`

// writeGradleSigning writes the keystore, its passwords and the init
// script that applies them into dir (created 0700 if needed), each file
// 0600, and returns the init script's path. An empty key password means
// the store password, as EAS treats a credentials.json without one. The
// caller removes dir after the build.
func writeGradleSigning(dir string, ks api.AndroidKeystore) (initScript string, err error) {
	if len(ks.Keystore) == 0 {
		return "", errors.New("the build's Android credentials hold no keystore: set them again with `expo-build credentials set`")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("creating the signing directory: %w", err)
	}
	keystore, err := writePrivate(dir, "upload-*.keystore", ks.Keystore)
	if err != nil {
		return "", fmt.Errorf("writing the keystore: %w", err)
	}
	s := gradleSigning{StoreFile: keystore, StorePassword: ks.KeystorePassword, KeyAlias: ks.KeyAlias, KeyPassword: ks.KeyPassword, StoreType: "pkcs12"}
	if s.KeyPassword == "" {
		s.KeyPassword = ks.KeystorePassword
	}
	// Java's default keystore type (PKCS12) reads JKS too, but naming
	// the type spares AGP the guess.
	if len(ks.Keystore) >= 4 && binary.BigEndian.Uint32(ks.Keystore) == 0xFEEDFEED {
		s.StoreType = "jks"
	}
	var js bytes.Buffer
	enc := json.NewEncoder(&js)
	enc.SetIndent("", "  ")
	if err := enc.Encode(s); err != nil {
		return "", fmt.Errorf("encoding the signing file: %w", err)
	}
	secrets, err := writePrivate(dir, "signing-*.json", js.Bytes())
	if err != nil {
		return "", fmt.Errorf("writing the signing file: %w", err)
	}
	script, err := writePrivate(dir, "signing-*.gradle", fmt.Appendf(nil, signingInitScript, groovyString(secrets)))
	if err != nil {
		return "", fmt.Errorf("writing the signing init script: %w", err)
	}
	return script, nil
}

// writePrivate writes data to a new file in dir named after pattern,
// readable by this user only (os.CreateTemp's 0600), and returns its path.
func writePrivate(dir, pattern string, data []byte) (string, error) {
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return "", err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(f.Name())
		return "", err
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

// groovyString is s as a single-quoted Groovy string literal (no
// interpolation in that form).
func groovyString(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`, "\n", `\n`, "\r", `\r`).Replace(s) + "'"
}

// debugCN opens the subject of every Android debug key: the Android SDK's
// (CN=Android Debug,O=Android,C=US) and the one Expo's template carries
// (CN=Android Debug,OU=Android,O=Unknown,…).
const debugCN = "CN=Android Debug,"

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
		debug = debug || strings.HasPrefix(s.Subject, debugCN)
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
