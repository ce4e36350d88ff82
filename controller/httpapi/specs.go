package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"slices"
	"strings"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/blobs"
	"github.com/freeagent-build/freeagent/controller/store"
	"github.com/freeagent-build/freeagent/internal/cachekey"
)

// readSpec reads the "spec" field of a submit: api.BuildSpec JSON of at
// most maxSpec bytes. Malformed JSON is a 400; a value of the wrong type a
// 422 naming the field.
func readSpec(p *multipart.Part) (*api.BuildSpec, error) {
	raw, err := io.ReadAll(io.LimitReader(p, maxSpec+1))
	if err != nil {
		return nil, multipartErr(err)
	}
	if len(raw) > maxSpec {
		return nil, fmt.Errorf("%w: field \"spec\" is larger than %d KiB", store.ErrTooLarge, maxSpec>>10)
	}
	var spec api.BuildSpec
	if err := json.Unmarshal(raw, &spec); err != nil {
		var typ *json.UnmarshalTypeError
		var syntax *json.SyntaxError
		switch {
		case errors.As(err, &syntax), errors.Is(err, io.ErrUnexpectedEOF):
			return nil, badRequest("field \"spec\" is not valid JSON: %v", err)
		case errors.As(err, &typ) && typ.Field != "":
			return nil, fmt.Errorf("%w: field \"spec\": %s must be a %s", store.ErrInvalid, typ.Field, typ.Type)
		}
		return nil, fmt.Errorf("%w: field \"spec\": %v", store.ErrInvalid, err)
	}
	return &spec, nil
}

// checkSpec validates a submitted spec against the submit's platform.
func checkSpec(spec *api.BuildSpec, platform string) error {
	invalid := func(format string, args ...any) error {
		return fmt.Errorf("%w: field \"spec\": "+format, append([]any{store.ErrInvalid}, args...)...)
	}
	switch {
	case spec.Version != api.SpecVersion:
		return invalid("version %d is not one this controller reads (%d); update expo-build and the controller to the same release", spec.Version, api.SpecVersion)
	case spec.Platform != platform:
		return invalid("platform %q differs from the field \"platform\" (%q); send the same platform in both", spec.Platform, platform)
	case spec.App.Slug == "":
		return invalid("app.slug is empty; set expo.slug in app.json (or app.config.js)")
	case spec.Workflow != "" && spec.Workflow != api.WorkflowGeneric && spec.Workflow != api.WorkflowManaged:
		return invalid("workflow must be %q or %q, got %q", api.WorkflowGeneric, api.WorkflowManaged, spec.Workflow)
	case len(spec.ProfileName) > 100:
		return invalid("profile_name is longer than 100 characters")
	case spec.SourceFingerprint != "" && !sha256Pattern.MatchString(spec.SourceFingerprint):
		return invalid("source_fingerprint must be 64 lowercase hex digits (a SHA-256), got %q", spec.SourceFingerprint)
	}
	if err := validProject(`field "spec": app.slug`, spec.App.Slug); err != nil {
		return err
	}
	if spec.ProjectName != "" {
		if err := validProject(`field "spec": project_name`, spec.ProjectName); err != nil {
			return err
		}
	}
	if err := validEnvironment(`field "spec": environment`, spec.Environment); err != nil {
		return err
	}
	c := spec.Credentials
	switch c.Source {
	case "", api.CredentialsLocal, api.CredentialsNone, api.CredentialsRemote:
	default:
		return invalid("credentials.source must be local, remote or none, got %q", c.Source)
	}
	if c.Android != nil {
		if c.Android.CertificateSHA256 != "" && !sha256Pattern.MatchString(c.Android.CertificateSHA256) {
			return invalid("credentials.android.certificate_sha256 must be 64 lowercase hex digits, got %q", c.Android.CertificateSHA256)
		}
		if c.Android.Name != "" {
			if err := validCredentialName(`field "spec": credentials.android.name`, c.Android.Name); err != nil {
				return err
			}
		}
	}
	if err := checkIOSSpec(spec, platform); err != nil {
		return err
	}
	if err := checkCachePaths(spec); err != nil {
		return err
	}
	if err := store.CheckRequirements(spec.Requires); err != nil {
		return err
	}
	if c.Source == api.CredentialsRemote && platform == api.PlatformAndroid && (c.Android == nil || c.Android.CertificateSHA256 == "") {
		return invalid("credentials.source is remote but credentials.android.certificate_sha256 is missing; re-run expo-build build so it reads the farm's keystore")
	}
	// Postgres's jsonb cannot hold a NUL character in a string.
	if b, err := json.Marshal(spec); err != nil || bytes.Contains(b, []byte(`\u0000`)) {
		return invalid("a value contains a NUL character")
	}
	return nil
}

// checkCachePaths refuses a cache path, declared among the spec's caches
// or in its profile's cache.paths, that cachekey.CheckPath refuses: one
// that could reach outside the build's tree and the tools' homes.
func checkCachePaths(spec *api.BuildSpec) error {
	check := func(field string, paths []string) error {
		for _, p := range paths {
			if err := cachekey.CheckPath(p); err != nil {
				return fmt.Errorf("%w: field \"spec\": %s: %v", store.ErrInvalid, field, err)
			}
		}
		return nil
	}
	for i, c := range spec.Caches {
		if err := check(fmt.Sprintf("caches[%d] (%s)", i, c.Name), c.Paths); err != nil {
			return err
		}
	}
	if c := spec.Profile.Cache; c != nil {
		return check("profile.cache.paths", c.Paths)
	}
	return nil
}

// exportMethods are the iOS export methods a spec may name.
var exportMethods = []string{api.ExportAppStore, api.ExportAdHoc, api.ExportEnterprise, api.ExportDevelopment}

// checkIOSSpec validates the iOS parts of a spec: present only for iOS,
// and naming export methods and targets the VM can apply.
func checkIOSSpec(spec *api.BuildSpec, platform string) error {
	invalid := func(format string, args ...any) error {
		return fmt.Errorf("%w: field \"spec\": "+format, append([]any{store.ErrInvalid}, args...)...)
	}
	b, sig := spec.IOS, spec.Credentials.IOS
	if platform != api.PlatformIOS {
		if b != nil || sig != nil {
			return invalid("ios settings in a %s build; send them only with platform ios", platform)
		}
		return nil
	}
	if b != nil {
		if len(b.Targets) > maxIOSTargets {
			return invalid("ios.targets has %d targets, at most %d are accepted", len(b.Targets), maxIOSTargets)
		}
		for i, t := range b.Targets {
			if t.Name == "" || t.BundleID == "" {
				return invalid("ios.targets[%d] needs a name and a bundle_identifier", i)
			}
		}
	}
	if sig != nil && !slices.Contains(exportMethods, sig.ExportMethod) {
		return invalid("credentials.ios.export_method must be one of %s, got %q", strings.Join(exportMethods, ", "), sig.ExportMethod)
	}
	return nil
}

// readCredentials reads and validates the "credentials" file of a submit.
func readCredentials(p *multipart.Part, limit int64) (*api.BuildCredentials, error) {
	raw, err := io.ReadAll(io.LimitReader(p, limit+1))
	if err != nil {
		return nil, multipartErr(err)
	}
	if int64(len(raw)) > limit {
		return nil, fmt.Errorf("%w: file \"credentials\" exceeds %d bytes", store.ErrTooLarge, limit)
	}
	var c api.BuildCredentials
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, badRequest("file \"credentials\" is not valid credentials JSON: %v", err)
	}
	switch {
	case c.Android == nil && len(c.IOS) == 0:
		return nil, fmt.Errorf("%w: file \"credentials\" holds no credentials; send {\"android\": {keystore, keystore_password, key_alias, key_password}} or {\"ios\": {TARGET: {provisioning_profile, certificate, certificate_password}}}, or leave the file out", store.ErrInvalid)
	case c.Android != nil && len(c.IOS) > 0:
		return nil, fmt.Errorf("%w: file \"credentials\" holds both Android and iOS credentials; a build has one platform: send only its credentials", store.ErrInvalid)
	case c.Android != nil:
		if err := validateKeystore(`file "credentials": `, "android", c.Android); err != nil {
			return nil, err
		}
	}
	if err := validateIOSCredentials(c.IOS); err != nil {
		return nil, err
	}
	return &c, nil
}

// maxIOSTargets bounds the targets of an iOS build's credentials (an app
// and its extensions).
const maxIOSTargets = 32

// validateIOSCredentials checks the iOS part of a credentials file: every
// target named, with a profile, a certificate and its password.
func validateIOSCredentials(targets map[string]api.IOSTargetCredentials) error {
	bad := func(target, sub, format string, args ...any) error {
		return fmt.Errorf("%w: file \"credentials\": field %q "+format, append([]any{store.ErrInvalid, "ios." + target + sub}, args...)...)
	}
	if len(targets) > maxIOSTargets {
		return fmt.Errorf("%w: file \"credentials\": ios has %d targets, at most %d are accepted", store.ErrInvalid, len(targets), maxIOSTargets)
	}
	for name, t := range targets {
		switch {
		case name == "" || len(name) > 255 || strings.ContainsAny(name, "\x00/"):
			return bad(name, "", "is not a target name: use the Xcode target's name (at most 255 characters, no NUL or slash)")
		case len(t.ProvisioningProfile) == 0:
			return bad(name, ".provisioning_profile", "is empty; send the .mobileprovision file's bytes (base64 in JSON)")
		case len(t.Certificate) == 0:
			return bad(name, ".certificate", "is empty; send the distribution certificate's .p12 bytes (base64 in JSON)")
		case len(t.CertificatePassword) > 1000 || strings.ContainsRune(t.CertificatePassword, 0):
			return bad(name, ".certificate_password", "must be text of at most 1000 characters without NUL")
		}
	}
	return nil
}

// submitCredentials decides a submit's credentials: the file sent, or for
// credentialsSource remote the project's farm keystore, checked against the
// fingerprint the build was prepared for.
func (s *Server) submitCredentials(r *http.Request, platform string, spec *api.BuildSpec, sent *api.BuildCredentials) (*api.BuildCredentials, error) {
	remote := spec != nil && spec.Credentials.Source == api.CredentialsRemote
	switch {
	case sent != nil && sent.Android != nil && platform != api.PlatformAndroid:
		return nil, fmt.Errorf("%w: file \"credentials\" holds an Android keystore, but this is an %s build; send the iOS targets' credentials (\"ios\")", store.ErrInvalid, platform)
	case sent != nil && len(sent.IOS) > 0 && platform != api.PlatformIOS:
		return nil, fmt.Errorf("%w: file \"credentials\" holds iOS credentials, but this is an %s build; send the Android keystore (\"android\")", store.ErrInvalid, platform)
	case sent != nil && remote:
		return nil, fmt.Errorf("%w: the spec's credentials.source is remote, so the farm's keystore signs the build; leave out the \"credentials\" file, or build with credentialsSource local", store.ErrInvalid)
	case remote && platform == api.PlatformAndroid:
		ks, err := s.farmKeystore(r, spec.BuildProject(), spec.Credentials.Android)
		if err != nil {
			return nil, err
		}
		return &api.BuildCredentials{Android: ks}, nil
	}
	return sent, nil
}

// sealCredentials seals a build's credentials into its pending file.
func (s *Server) sealCredentials(ctx context.Context, buildID string, c *api.BuildCredentials) (*blobs.Pending, error) {
	raw, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("encode the credentials: %w", err)
	}
	return s.blobs.PrepareSeal(ctx, buildID, blobs.Credentials, raw)
}
