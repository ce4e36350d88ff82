// Package credentials reads EAS's local credentials file, credentials.json
// (https://docs.expo.dev/app-signing/local-credentials/), and checks on the
// developer's machine, before anything is uploaded, that the Android
// keystore it names opens with its passwords and holds its key, and that
// each iOS target's provisioning profile and distribution certificate
// open, match one another and the target, are unexpired and suit the
// build's distribution: a wrong password found here costs a second, found
// by Gradle or xcodebuild in a VM it costs a build.
//
// The file's shape is eas-cli's (packages/eas-cli/src/credentials/
// credentialsJson): android.keystore.{keystorePath, keystorePassword,
// keyAlias, keyPassword?}, and ios as one target {provisioningProfilePath,
// distributionCertificate: {path, password}} or a map of target name to
// that. Unlike eas-cli, which drops unknown keys, an unknown key is an
// error here: a misspelt keyPassword would otherwise silently become the
// store password.
package credentials

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/internal/boundedfile"
)

// FileName is the credentials file, at the app's root.
const FileName = "credentials.json"

// maxFileBytes bounds credentials.json.
const maxFileBytes = 1 << 20

// ErrNoFile is wrapped by Load's error when the app has no credentials.json.
var ErrNoFile = errors.New(FileName + " does not exist")

// File is a parsed credentials.json. Nothing it names has been read yet.
type File struct {
	dir     string
	android *androidKeystore
	ios     map[string]IOSTarget
}

// androidKeystore is credentials.json's android.keystore.
type androidKeystore struct {
	KeystorePath     string
	KeystorePassword string
	KeyAlias         string
	// KeyPassword is "" when absent: the keystore password then opens
	// the key too.
	KeyPassword string
}

// IOSTarget is one target's iOS credentials, as written (paths relative to
// the app); IOSCredentials reads and validates them.
type IOSTarget struct {
	ProvisioningProfilePath string
	DistributionCertificate struct {
		Path     string
		Password string
	}
}

// Load reads and checks the shape of appDir's credentials.json. A missing
// file is an error wrapping ErrNoFile.
func Load(appDir string) (*File, error) {
	name := filepath.Join(appDir, FileName)
	data, err := boundedfile.Read(name, maxFileBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w in %s: create it as https://docs.expo.dev/app-signing/local-credentials/ describes, or use remote credentials (credentialsSource \"remote\" in eas.json)", ErrNoFile, appDir)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", FileName, err)
	}
	f := &File{dir: appDir}
	if err := f.parse(data); err != nil {
		return nil, err
	}
	return f, nil
}

// object is a JSON object kept raw, with the path it sits at for messages.
type object struct {
	path   string
	fields map[string]json.RawMessage
}

func (f *File) parse(data []byte) error {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return syntaxError(data, err)
	}
	if top == nil {
		return fmt.Errorf("%s must be a JSON object with \"android\" and/or \"ios\"", FileName)
	}
	root := object{fields: top}
	if err := root.only("android", "ios"); err != nil {
		return err
	}
	if raw, ok := top["android"]; ok {
		android, err := root.object(raw, "android")
		if err != nil {
			return err
		}
		if err := android.only("keystore"); err != nil {
			return err
		}
		ks, err := android.requiredObject("keystore")
		if err != nil {
			return err
		}
		if err := ks.only("keystorePath", "keystorePassword", "keyAlias", "keyPassword"); err != nil {
			return err
		}
		var a androidKeystore
		for _, s := range []struct {
			key      string
			dst      *string
			required bool
			nonEmpty bool
		}{
			{"keystorePath", &a.KeystorePath, true, true},
			{"keystorePassword", &a.KeystorePassword, true, false},
			{"keyAlias", &a.KeyAlias, true, true},
			{"keyPassword", &a.KeyPassword, false, false},
		} {
			if err := ks.str(s.key, s.dst, s.required, s.nonEmpty); err != nil {
				return err
			}
		}
		f.android = &a
	}
	if raw, ok := top["ios"]; ok {
		ios, err := root.object(raw, "ios")
		if err != nil {
			return err
		}
		if err := f.parseIOS(ios); err != nil {
			return err
		}
	}
	return nil
}

// parseIOS takes eas-cli's rule: ios is one target when its
// provisioningProfilePath is a string, else a map of targets.
func (f *File) parseIOS(ios object) error {
	var single string
	if json.Unmarshal(ios.fields["provisioningProfilePath"], &single) == nil {
		t, err := iosTarget(ios)
		if err != nil {
			return err
		}
		f.ios = map[string]IOSTarget{"": t}
		return nil
	}
	f.ios = map[string]IOSTarget{}
	for name, raw := range ios.fields {
		o, err := ios.object(raw, name)
		if err != nil {
			return err
		}
		t, err := iosTarget(o)
		if err != nil {
			return err
		}
		f.ios[name] = t
	}
	return nil
}

func iosTarget(o object) (IOSTarget, error) {
	var t IOSTarget
	if err := o.only("provisioningProfilePath", "distributionCertificate"); err != nil {
		return t, err
	}
	if err := o.str("provisioningProfilePath", &t.ProvisioningProfilePath, true, true); err != nil {
		return t, err
	}
	dc, err := o.requiredObject("distributionCertificate")
	if err != nil {
		return t, err
	}
	if err := dc.only("path", "password"); err != nil {
		return t, err
	}
	if err := dc.str("path", &t.DistributionCertificate.Path, true, true); err != nil {
		return t, err
	}
	return t, dc.str("password", &t.DistributionCertificate.Password, true, false)
}

func (o object) name(key string) string {
	if o.path == "" {
		return key
	}
	return o.path + "." + key
}

// only rejects keys outside allowed.
func (o object) only(allowed ...string) error {
	var unknown []string
	for k := range o.fields {
		if !slices.Contains(allowed, k) {
			unknown = append(unknown, o.name(k))
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	slices.Sort(unknown)
	return fmt.Errorf("%s: unknown key %s (allowed here: %s)", FileName, strings.Join(unknown, ", "), strings.Join(allowed, ", "))
}

func (o object) object(raw json.RawMessage, key string) (object, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return object{}, fmt.Errorf("%s: %s must be an object, not %s", FileName, o.name(key), jsonKind(raw))
	}
	return object{path: o.name(key), fields: m}, nil
}

func (o object) requiredObject(key string) (object, error) {
	raw, ok := o.fields[key]
	if !ok {
		return object{}, fmt.Errorf("%s: %s is missing", FileName, o.name(key))
	}
	return o.object(raw, key)
}

func (o object) str(key string, dst *string, required, nonEmpty bool) error {
	raw, ok := o.fields[key]
	if !ok {
		if required {
			return fmt.Errorf("%s: %s is missing", FileName, o.name(key))
		}
		return nil
	}
	if err := json.Unmarshal(raw, dst); err != nil || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return fmt.Errorf("%s: %s must be a string, not %s", FileName, o.name(key), jsonKind(raw))
	}
	if nonEmpty && *dst == "" {
		return fmt.Errorf("%s: %s is empty", FileName, o.name(key))
	}
	return nil
}

func jsonKind(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// syntaxError places a JSON error at its line and column.
func syntaxError(data []byte, err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		line, col := position(data, se.Offset)
		return fmt.Errorf("%s:%d:%d: invalid JSON: %v", FileName, line, col, se)
	case errors.As(err, &te):
		return fmt.Errorf("%s must be a JSON object with \"android\" and/or \"ios\", not %s", FileName, te.Value)
	}
	return fmt.Errorf("%s: invalid JSON: %w", FileName, err)
}

// position turns a byte offset into a 1-based line and column.
func position(data []byte, offset int64) (line, col int) {
	offset = min(max(offset, 0), int64(len(data)))
	before := data[:offset]
	line = bytes.Count(before, []byte("\n")) + 1
	col = int(offset) - (bytes.LastIndexByte(before, '\n') + 1)
	if col == 0 {
		col = 1
	}
	return line, col
}

// HasAndroid reports whether the file has an android section.
func (f *File) HasAndroid() bool { return f.android != nil }

// IOS is the ios section as written: one entry with key "" for the
// single-target form, else target name → credentials; nil when absent.
func (f *File) IOS() map[string]IOSTarget { return f.ios }

// Android reads the keystore android.keystore.keystorePath names (also
// when it is gitignored: it is sent sealed, not in the source archive),
// opens it with its passwords and identifies its key's certificate. The
// keystore's bytes and passwords are returned to be sealed into the
// submit; the info is what the build is checked against.
func (f *File) Android() (api.AndroidKeystore, api.KeystoreInfo, error) {
	a := f.android
	if a == nil {
		return api.AndroidKeystore{}, api.KeystoreInfo{}, fmt.Errorf("%s has no \"android\" section: add android.keystore {keystorePath, keystorePassword, keyAlias, keyPassword}", FileName)
	}
	shown := filepath.ToSlash(a.KeystorePath)
	raw, err := boundedfile.Read(f.abs(a.KeystorePath), MaxKeystoreBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return api.AndroidKeystore{}, api.KeystoreInfo{}, fmt.Errorf("%s: android.keystore.keystorePath names %s, which does not exist (paths are relative to %s); fix the path or copy the keystore there", FileName, shown, f.dir)
	}
	if err != nil {
		return api.AndroidKeystore{}, api.KeystoreInfo{}, fmt.Errorf("%s: android.keystore.keystorePath: %w", FileName, err)
	}
	keyPassword := a.KeyPassword
	if keyPassword == "" {
		keyPassword = a.KeystorePassword
	}
	info, err := ValidateKeystore(raw, a.KeystorePassword, a.KeyAlias, keyPassword)
	if err != nil {
		var ke *KeystoreError
		if errors.As(err, &ke) {
			return api.AndroidKeystore{}, api.KeystoreInfo{}, fmt.Errorf("%s: %s", FileName, ke.describe(shown, "android.keystore.keystorePassword", "android.keystore.keyAlias", "android.keystore.keyPassword"))
		}
		return api.AndroidKeystore{}, api.KeystoreInfo{}, fmt.Errorf("%s: %s: %w", FileName, shown, err)
	}
	return api.AndroidKeystore{
		Keystore:         raw,
		KeystorePassword: a.KeystorePassword,
		KeyAlias:         a.KeyAlias,
		KeyPassword:      keyPassword,
	}, info, nil
}

func (f *File) abs(p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(f.dir, filepath.FromSlash(p))
}

// Paths are credentials.json and every file it names, relative to the app
// with forward slashes ("../secrets/upload.jks" for one above it: in a
// monorepo the archive holds the whole workspace), sorted: what the
// source archive must leave out. Absolute paths are not listed: the
// caller decides whether they fall inside what it uploads.
func (f *File) Paths() []string {
	named := []string{FileName}
	if f.android != nil {
		named = append(named, f.android.KeystorePath)
	}
	for _, t := range f.ios {
		named = append(named, t.ProvisioningProfilePath, t.DistributionCertificate.Path)
	}
	var out []string
	for _, p := range named {
		if filepath.IsAbs(p) {
			continue
		}
		rel, err := filepath.Rel(f.dir, f.abs(p))
		if err != nil {
			continue
		}
		rel = filepath.ToSlash(rel)
		if !slices.Contains(out, rel) {
			out = append(out, rel)
		}
	}
	slices.Sort(out)
	return out
}
