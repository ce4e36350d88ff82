package httpapi

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/seal"
	"github.com/freeagent-build/freeagent/controller/store"
)

// Patterns of what names a project's things. A project is the app's slug,
// which Expo allows as ^[a-zA-Z0-9_-]+$ (xdl-schemas; eas-cli's
// isValidSlugStrict); an environment is what eas-cli's resolveEnvironment
// accepts.
var (
	environmentPattern    = regexp.MustCompile(`^[a-z0-9_-]{3,100}$`)
	variableNamePattern   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)
	credentialNamePattern = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,100}$`)
	sha256Pattern         = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// Size limits of a variable's value: a string, and a file's decoded content.
const (
	maxStringValue = 32 << 10
	maxFileValue   = 256 << 10
)

// Sealing purposes, each its own key derived from the certificate key.
const (
	variablesPurpose = "freeagent project variables v1"
	// The key of the variables' keyed hashes, which store.environmentDigest
	// is made of.
	variableHashesPurpose = "freeagent variable hashes v1"
	credentialsPurpose    = "freeagent project credentials v1"
)

// defaultCredentialName is the farm credential a remote build uses when its
// spec names none.
const defaultCredentialName = "default"

func validProject(field, p string) error { return store.ValidateProject(field, p) }

func validEnvironment(field, e string) error {
	if !environmentPattern.MatchString(e) {
		return fmt.Errorf("%w: %s %q is not an environment name: use 3 to 100 lowercase letters, digits, \"_\" and \"-\" (development, preview, production…)", store.ErrInvalid, field, e)
	}
	return nil
}

func validVariableName(field, n string) error {
	if !variableNamePattern.MatchString(n) {
		return fmt.Errorf("%w: %s %q is not a variable name: start with a letter or \"_\", then letters, digits and \"_\", at most 128 characters", store.ErrInvalid, field, n)
	}
	for _, reserved := range []string{"EAS_BUILD", "FREEAGENT_"} {
		if strings.HasPrefix(strings.ToUpper(n), reserved) {
			return fmt.Errorf("%w: %s %q starts with %s, which the build farm sets itself; choose another name", store.ErrInvalid, field, n, reserved)
		}
	}
	return nil
}

func validCredentialName(field, n string) error {
	if !credentialNamePattern.MatchString(n) {
		return fmt.Errorf("%w: %s %q is not a credential name: use 1 to 100 letters, digits, \".\", \"_\" and \"-\" (default: %q)", store.ErrInvalid, field, n, defaultCredentialName)
	}
	return nil
}

// projectBox returns the box sealing one purpose's project secrets.
func (s *Server) projectBox(purpose string) (seal.Box, error) {
	b, err := s.blobs.Derive(purpose)
	if err != nil {
		return seal.Box{}, fmt.Errorf("derive the %q key: %w", purpose, err)
	}
	return b, nil
}

// aad joins the parts that bind a sealed value to its row.
func aad(parts ...string) []byte { return []byte(strings.Join(parts, "\x00")) }

// project checks the {project} path element: a project key k may use.
func (s *Server) project(w http.ResponseWriter, r *http.Request, k store.APIKey) (string, bool) {
	p := r.PathValue("project")
	if err := validProject("project", p); err != nil {
		s.fail(w, r, err)
		return "", false
	}
	if err := projectAllowed(k, p); err != nil {
		s.fail(w, r, err)
		return "", false
	}
	return p, true
}

// setVariable creates or replaces a variable in each of its environments
// and answers with what it set, values left out.
func (s *Server) setVariable(w http.ResponseWriter, r *http.Request, k store.APIKey) {
	project, ok := s.project(w, r, k)
	if !ok {
		return
	}
	var req api.SetVariableRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := validateVariable(&req); err != nil {
		s.fail(w, r, err)
		return
	}
	box, err := s.projectBox(variablesPurpose)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	hashes, err := s.projectBox(variableHashesPurpose)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	vars := make([]store.SealedVariable, len(req.Environments))
	for i, env := range req.Environments {
		// The hash is bound to the variable like its seal, so equal values
		// of two variables do not show as equal hashes.
		hash, err := hashes.MAC(aad(project, env, req.Name, req.Value))
		if err != nil {
			s.fail(w, r, err)
			return
		}
		vars[i] = store.SealedVariable{Variable: api.Variable{Project: project, Environment: env, Name: req.Name,
			Visibility: req.Visibility, Type: req.Type}, Sealed: box.Seal([]byte(req.Value), aad(project, env, req.Name)), HMAC: hash}
	}
	if err := s.store.SetVariables(r.Context(), vars); err != nil {
		s.fail(w, r, err)
		return
	}
	// The answer names what was set; the caller knows the value.
	out := api.VariableList{Variables: make([]api.Variable, len(vars))}
	for i, v := range vars {
		out.Variables[i] = v.Variable
	}
	writeJSON(w, http.StatusCreated, out)
}

// validateVariable checks and normalises a variable request, naming the
// field at fault and the fix.
func validateVariable(req *api.SetVariableRequest) error {
	if err := validVariableName("field \"name\"", req.Name); err != nil {
		return err
	}
	switch req.Visibility {
	case api.VisibilityPlaintext, api.VisibilitySensitive, api.VisibilitySecret:
	default:
		return fmt.Errorf("%w: field \"visibility\" must be plaintext, sensitive or secret, got %q", store.ErrInvalid, req.Visibility)
	}
	if err := api.CheckPublicSecret(req.Name, req.Visibility); err != nil {
		return fmt.Errorf("%w: field \"visibility\": %v", store.ErrInvalid, err)
	}
	switch req.Type {
	case "":
		req.Type = api.VariableString
		fallthrough
	case api.VariableString:
		if len(req.Value) > maxStringValue {
			return fmt.Errorf("%w: field \"value\" is longer than %d KiB; keep larger content in a file variable (type \"file\")", store.ErrInvalid, maxStringValue>>10)
		}
		if err := checkValueText(req.Value); err != nil {
			return err
		}
		if err := api.CheckSecretLength(req.Name, req.Visibility, []byte(req.Value)); err != nil {
			return fmt.Errorf("%w: field \"value\": %v", store.ErrInvalid, err)
		}
	case api.VariableFile:
		content, err := base64.StdEncoding.DecodeString(req.Value)
		if err != nil {
			return fmt.Errorf("%w: field \"value\" of a file variable must be the file's content in standard base64: %v", store.ErrInvalid, err)
		}
		if len(content) > maxFileValue {
			return fmt.Errorf("%w: field \"value\" holds a file larger than %d KiB", store.ErrInvalid, maxFileValue>>10)
		}
		if err := api.CheckSecretLength(req.Name, req.Visibility, content); err != nil {
			return fmt.Errorf("%w: field \"value\": %v", store.ErrInvalid, err)
		}
	default:
		return fmt.Errorf("%w: field \"type\" must be string or file, got %q", store.ErrInvalid, req.Type)
	}
	if len(req.Environments) == 0 {
		req.Environments = []string{api.EnvironmentDevelopment, api.EnvironmentPreview, api.EnvironmentProduction}
	}
	if len(req.Environments) > 20 {
		return fmt.Errorf("%w: field \"environments\" names more than 20 environments", store.ErrInvalid)
	}
	for _, e := range req.Environments {
		if err := validEnvironment("field \"environments\": environment", e); err != nil {
			return err
		}
	}
	slices.Sort(req.Environments)
	req.Environments = slices.Compact(req.Environments)
	return nil
}

// checkValueText refuses what an environment variable cannot hold: a NUL
// byte, or bytes that are not UTF-8 (JSON cannot carry them anyway).
func checkValueText(v string) error {
	if strings.ContainsRune(v, 0) {
		return fmt.Errorf("%w: field \"value\" contains a NUL character, which an environment variable cannot hold; use a file variable", store.ErrInvalid)
	}
	return nil
}

// listVariables lists a project's variables; secret values are left out.
func (s *Server) listVariables(w http.ResponseWriter, r *http.Request, k store.APIKey) {
	project, ok := s.project(w, r, k)
	if !ok {
		return
	}
	env := r.URL.Query().Get("environment")
	if env != "" {
		if err := validEnvironment("parameter \"environment\"", env); err != nil {
			s.fail(w, r, err)
			return
		}
	}
	sealed, err := s.store.Variables(r.Context(), project, env)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	vars, err := s.openVariables(sealed, false)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.VariableList{Variables: vars})
}

// openVariables opens sealed variables; secret values only when
// withSecrets (the build's VM).
func (s *Server) openVariables(sealed []store.SealedVariable, withSecrets bool) ([]api.Variable, error) {
	box, err := s.projectBox(variablesPurpose)
	if err != nil {
		return nil, err
	}
	out := make([]api.Variable, 0, len(sealed))
	for _, v := range sealed {
		if v.Visibility != api.VisibilitySecret || withSecrets {
			plain, err := box.Open(v.Sealed, aad(v.Project, v.Environment, v.Name))
			if err != nil {
				return nil, fmt.Errorf("open variable %s of project %s (%s): %w", v.Name, v.Project, v.Environment, err)
			}
			v.Value = string(plain)
		}
		out = append(out, v.Variable)
	}
	return out, nil
}

func (s *Server) deleteVariable(w http.ResponseWriter, r *http.Request, k store.APIKey) {
	project, ok := s.project(w, r, k)
	if !ok {
		return
	}
	name, env := r.PathValue("name"), r.URL.Query().Get("environment")
	if err := validVariableName("variable", name); err != nil {
		s.fail(w, r, err)
		return
	}
	if env != "" {
		if err := validEnvironment("parameter \"environment\"", env); err != nil {
			s.fail(w, r, err)
			return
		}
	}
	if err := s.store.DeleteVariable(r.Context(), project, name, env); err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// credentialPath checks the {project}, {platform} and {name} path elements.
func (s *Server) credentialPath(w http.ResponseWriter, r *http.Request, k store.APIKey) (project, platform, name string, ok bool) {
	if project, ok = s.project(w, r, k); !ok {
		return
	}
	platform, name = r.PathValue("platform"), r.PathValue("name")
	if err := store.ValidatePlatform(platform); err != nil {
		s.fail(w, r, fmt.Errorf("%w: platform %q in the path must be \"android\" or \"ios\"", store.ErrInvalid, platform))
		return "", "", "", false
	}
	if err := validCredentialName("credential name", name); err != nil {
		s.fail(w, r, err)
		return "", "", "", false
	}
	return project, platform, name, true
}

// setCredential stores a project's signing credential on the farm: the
// keystore sealed, what identifies it in plain text.
func (s *Server) setCredential(w http.ResponseWriter, r *http.Request, k store.APIKey) {
	project, platform, name, ok := s.credentialPath(w, r, k)
	if !ok {
		return
	}
	if platform != api.PlatformAndroid {
		s.fail(w, r, fmt.Errorf("%w: the farm keeps Android keystores only; iOS builds take their certificates with each submit", store.ErrInvalid))
		return
	}
	var req api.SetCredentialRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := validateKeystore("", "android", req.Android); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := validateKeystoreInfo("info", req.Info); err != nil {
		s.fail(w, r, err)
		return
	}
	if req.Info.KeyAlias != req.Android.KeyAlias {
		s.fail(w, r, fmt.Errorf("%w: field \"info.key_alias\" (%q) differs from \"android.key_alias\" (%q); they describe the same key", store.ErrInvalid, req.Info.KeyAlias, req.Android.KeyAlias))
		return
	}
	req.Info.Name = name
	secret, err := json.Marshal(req.Android)
	if err != nil {
		s.fail(w, r, fmt.Errorf("encode the keystore: %w", err))
		return
	}
	box, err := s.projectBox(credentialsPurpose)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	c, err := s.store.SetCredential(r.Context(), store.SealedCredential{
		Credential: api.Credential{Project: project, Platform: platform, Name: name, Android: req.Info},
		Sealed:     box.Seal(secret, aad(project, platform, name))})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, c)
}

// validateKeystore checks the secret part of an Android credential; where
// says where it came from (`file "credentials": ` or ""), field its name.
func validateKeystore(where, field string, k *api.AndroidKeystore) error {
	bad := func(sub, format string, args ...any) error {
		return fmt.Errorf("%w: %sfield %q "+format, append([]any{store.ErrInvalid, where, field + sub}, args...)...)
	}
	switch {
	case k == nil:
		return bad("", "is required: the keystore, its password, the key alias and the key password")
	case len(k.Keystore) == 0:
		return bad(".keystore", "is empty; send the keystore file's bytes (base64 in JSON)")
	case k.KeystorePassword == "":
		return bad(".keystore_password", "is empty; send the keystore's password")
	case k.KeyAlias == "":
		return bad(".key_alias", "is empty; send the alias of the upload key")
	case k.KeyPassword == "":
		return bad(".key_password", "is empty; send the key's password (often the keystore's)")
	}
	for sub, v := range map[string]string{".keystore_password": k.KeystorePassword, ".key_alias": k.KeyAlias, ".key_password": k.KeyPassword} {
		if len(v) > 1000 || strings.ContainsRune(v, 0) {
			return bad(sub, "must be text of at most 1000 characters without NUL")
		}
	}
	return nil
}

// validateKeystoreInfo checks what identifies an Android keystore.
func validateKeystoreInfo(field string, i *api.KeystoreInfo) error {
	bad := func(sub, format string, args ...any) error {
		return fmt.Errorf("%w: field %q "+format, append([]any{store.ErrInvalid, field + sub}, args...)...)
	}
	switch {
	case i == nil:
		return bad("", "is required: the keystore's type, key alias and certificate SHA-256")
	case i.Type != "JKS" && i.Type != "PKCS12":
		return bad(".type", "must be JKS or PKCS12, got %q", i.Type)
	case i.KeyAlias == "":
		return bad(".key_alias", "is empty")
	case !sha256Pattern.MatchString(i.CertificateSHA256):
		return bad(".certificate_sha256", "must be the certificate's SHA-256 as 64 lowercase hex digits, got %q", i.CertificateSHA256)
	}
	for sub, v := range map[string]string{".key_alias": i.KeyAlias, ".subject": i.Subject} {
		if len(v) > 1000 || strings.ContainsRune(v, 0) {
			return bad(sub, "must be text of at most 1000 characters without NUL")
		}
	}
	return nil
}

func (s *Server) listCredentials(w http.ResponseWriter, r *http.Request, k store.APIKey) {
	project, ok := s.project(w, r, k)
	if !ok {
		return
	}
	list, err := s.store.Credentials(r.Context(), project)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if list == nil {
		list = []api.Credential{}
	}
	writeJSON(w, http.StatusOK, api.CredentialList{Credentials: list})
}

func (s *Server) deleteCredential(w http.ResponseWriter, r *http.Request, k store.APIKey) {
	project, platform, name, ok := s.credentialPath(w, r, k)
	if !ok {
		return
	}
	if err := s.store.DeleteCredential(r.Context(), project, platform, name); err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// getAppVersion answers the build version the farm keeps for one
// application of the project (the remote version source).
func (s *Server) getAppVersion(w http.ResponseWriter, r *http.Request, k store.APIKey) {
	project, ok := s.project(w, r, k)
	if !ok {
		return
	}
	rec, err := s.store.AppVersion(r.Context(), project, r.PathValue("platform"), r.PathValue("application_id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, rec)
}

// setAppVersion sets the build version the farm keeps for one application
// of the project (expo-build build:version:set).
func (s *Server) setAppVersion(w http.ResponseWriter, r *http.Request, k store.APIKey) {
	project, ok := s.project(w, r, k)
	if !ok {
		return
	}
	var req api.SetAppVersionRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	rec, err := s.store.SetAppVersion(r.Context(), api.AppVersionRecord{Project: project, Platform: r.PathValue("platform"),
		ApplicationID: r.PathValue("application_id"), BuildVersion: req.BuildVersion, AppVersion: req.AppVersion})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, rec)
}

// farmKeystore reads a project's farm keystore for a remote build and
// checks it is the one the build was prepared for.
func (s *Server) farmKeystore(r *http.Request, project string, want *api.KeystoreInfo) (*api.AndroidKeystore, error) {
	name := cmp.Or(want.Name, defaultCredentialName)
	c, err := s.store.Credential(r.Context(), project, api.PlatformAndroid, name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("%w: project %s has no Android keystore %q on the farm; upload one with `expo-build credentials set --platform android`, or build with credentialsSource local", store.ErrInvalid, project, name)
	}
	if err != nil {
		return nil, err
	}
	if c.Android == nil || c.Android.CertificateSHA256 != want.CertificateSHA256 {
		have := ""
		if c.Android != nil {
			have = c.Android.CertificateSHA256
		}
		return nil, fmt.Errorf("%w: the farm's Android keystore %q of project %s has certificate SHA-256 %s, but this build was prepared for %s; re-run expo-build build to sign with the farm's keystore, or replace it with `expo-build credentials set --platform android`",
			store.ErrInvalid, name, project, have, want.CertificateSHA256)
	}
	box, err := s.projectBox(credentialsPurpose)
	if err != nil {
		return nil, err
	}
	plain, err := box.Open(c.Sealed, aad(project, api.PlatformAndroid, name))
	if err != nil {
		return nil, fmt.Errorf("open the farm keystore %q of project %s: %w", name, project, err)
	}
	var ks api.AndroidKeystore
	if err := json.Unmarshal(plain, &ks); err != nil {
		return nil, fmt.Errorf("read the farm keystore %q of project %s: %w", name, project, err)
	}
	return &ks, nil
}
