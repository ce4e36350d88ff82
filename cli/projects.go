package cli

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/cli/appconfig"
	"github.com/freeagent-build/freeagent/cli/credentials"
	"github.com/freeagent-build/freeagent/internal/bytesize"
)

const envHelp = `Manages the project's environment variables on the farm, as EAS does (eas env:*). A build
gets the variables of its project (the app's slug) and its environment (the profile's
"environment", else production for store builds, development for a development client,
preview otherwise), under the profile's own env.

  expo-build env set NAME --visibility plaintext|sensitive|secret [--environment E ...] [--type string|file] [--value-file F]
  expo-build env list [--environment E]
  expo-build env delete NAME [--environment E]

The value is read from standard input (hidden on a terminal) or from --value-file, never
from the command line. A file variable (--type file, e.g. google-services.json) becomes a
file in the build's VM and the variable holds its path. Sensitive and secret values are
masked in build logs; secret values are never shown again. Without --environment, set and
delete apply to development, preview and production. The project is the app in the
current directory (its slug), or --project SLUG.`

const credentialsHelp = `Manages the credentials the farm keeps for a project, used by builds whose profile says
credentialsSource "remote" (EAS's default), as EAS keeps them on its servers.

  expo-build credentials set --platform android [--name NAME]   upload the keystore of credentials.json
  expo-build credentials set --platform android --service-account-key FILE [--name NAME]
                                                                  keep a Google service account key for submitting
  expo-build credentials list
  expo-build credentials delete --platform android [--name NAME] [--submit-key]

set validates the keystore (the store password opens it, the alias exists, the key
password decrypts the key) before anything is sent; the farm keeps it sealed and shows it
only by its certificate's SHA-256. eas.json's keystoreName picks NAME (default "default").`

// Limits of a variable, as the controller enforces them.
const (
	maxVariableValue = 32 << 10
	maxVariableFile  = 256 << 10
)

var variableName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func (a *App) cmdEnv(ctx context.Context, inv *invocation, args []string) error {
	fs := inv.flags()
	visibility := fs.String("visibility", "", "`plaintext`, sensitive or secret (set)")
	var environments stringList
	fs.Var(&environments, "environment", "`ENV`: development, preview, production or another (repeatable; default: all three)")
	typ := fs.String("type", api.VariableString, "`string` or file (set)")
	valueFile := fs.String("value-file", "", "read the value from `FILE` instead of standard input (set)")
	projectFlag := fs.String("project", "", "the project `SLUG` (default: the app's slug in the current directory)")
	pos, err := inv.parse(fs, args, 1, 2)
	if err != nil {
		return err
	}
	verb := pos[0]
	name := ""
	if len(pos) == 2 {
		name = pos[1]
	}
	switch verb {
	case "set", "delete":
		if name == "" {
			return usageErr("expo-build env %s needs the variable's NAME", verb)
		}
		if !variableName.MatchString(name) || len(name) > 128 {
			return usageErr("%q is not a valid environment variable name: use letters, digits and _, not starting with a digit (at most 128)", name)
		}
	case "list":
		if name != "" {
			return usageErr("expo-build env list takes no name")
		}
	default:
		return usageErr("unknown env command %q: use set, list or delete", verb)
	}
	if len(environments) > 1 && verb != "set" {
		return usageErr("--environment is given once for %s", verb)
	}
	project, err := a.projectSlug(ctx, *projectFlag)
	if err != nil {
		return err
	}
	s, c, err := inv.keySession()
	if err != nil {
		return err
	}
	env := ""
	if len(environments) == 1 {
		env = environments[0]
	}
	switch verb {
	case "list":
		var list api.VariableList
		if err := s.retry(ctx, "list variables", true, func(ctx context.Context) error {
			var err error
			list, err = c.ListVariables(ctx, project, env)
			return err
		}); err != nil {
			return wrapOp("list variables", err)
		}
		if inv.json {
			return inv.ui.emit(list)
		}
		printVariables(inv.ui, project, list.Variables)
		return nil
	case "delete":
		if err := s.retry(ctx, "delete the variable", false, func(ctx context.Context) error {
			return c.DeleteVariable(ctx, project, name, env)
		}); err != nil {
			return wrapOp("delete the variable", err)
		}
		where := "every environment"
		if env != "" {
			where = "environment " + env
		}
		if inv.json {
			return inv.ui.emit(map[string]any{"project": project, "name": name, "environment": env, "deleted": true})
		}
		inv.ui.printf("%s Deleted %s from %s of %s\n", inv.ui.o(cGreen, "✔"), name, where, project)
		return nil
	}
	switch *visibility {
	case api.VisibilityPlaintext, api.VisibilitySensitive, api.VisibilitySecret:
	case "":
		return usageErr("--visibility is required: plaintext (shown everywhere), sensitive (masked in logs) or secret (never shown again)")
	default:
		return usageErr("--visibility must be plaintext, sensitive or secret, got %q", *visibility)
	}
	if err := api.CheckPublicSecret(name, *visibility); err != nil {
		return usageErr("%v", err)
	}
	if *typ != api.VariableString && *typ != api.VariableFile {
		return usageErr("--type must be string or file, got %q", *typ)
	}
	value, err := a.readVariableValue(name, *visibility, *typ, *valueFile)
	if err != nil {
		return err
	}
	if *visibility != api.VisibilityPlaintext {
		inv.ui.secrets = append(inv.ui.secrets, value)
	}
	req := api.SetVariableRequest{Name: name, Value: value, Visibility: *visibility, Type: *typ, Environments: environments}
	var set api.VariableList
	if err := s.retry(ctx, "set the variable", true, func(ctx context.Context) error {
		var err error
		set, err = c.SetVariable(ctx, project, req)
		return err
	}); err != nil {
		return wrapOp("set the variable", err)
	}
	if inv.json {
		return inv.ui.emit(set)
	}
	envs := make([]string, 0, len(set.Variables))
	for _, v := range set.Variables {
		envs = append(envs, v.Environment)
	}
	inv.ui.printf("%s Set %s (%s, %s) in %s of %s\n", inv.ui.o(cGreen, "✔"), name, *visibility, *typ, strings.Join(envs, ", "), project)
	return nil
}

// readVariableValue reads a value from --value-file or standard input
// (hidden on a terminal), bounded; a file value is sent base64-encoded.
// A masked value too short to mask is refused before it is sent.
func (a *App) readVariableValue(name, visibility, typ, valueFile string) (string, error) {
	limit := int64(maxVariableValue)
	if typ == api.VariableFile {
		limit = maxVariableFile
	}
	var raw []byte
	switch {
	case valueFile != "":
		b, err := readLimited(valueFile, limit)
		if err != nil {
			return "", err
		}
		raw = b
	case a.StdinTTY && typ == api.VariableString:
		v, err := a.readPassword(fmt.Sprintf("Value of %s: ", name))
		if err != nil {
			return "", usageErr("read the value: %v", err)
		}
		raw = []byte(v)
	case a.StdinTTY:
		return "", usageErr("a file variable's content comes from --value-file FILE or a pipe")
	default:
		b, err := io.ReadAll(io.LimitReader(bufio.NewReader(a.Stdin), limit+1))
		if err != nil {
			return "", usageErr("read the value from standard input: %v", err)
		}
		raw = b
	}
	if int64(len(raw)) > limit {
		return "", usageErr("the value of %s is larger than %s, the limit for a %s variable", name, bytesize.SI(limit), typ)
	}
	if typ == api.VariableFile {
		if err := api.CheckSecretLength(name, visibility, raw); err != nil {
			return "", usageErr("%v", err)
		}
		return base64.StdEncoding.EncodeToString(raw), nil
	}
	// A piped value usually ends with the newline of echo or a file.
	v := strings.TrimSuffix(strings.TrimSuffix(string(raw), "\n"), "\r")
	if v == "" {
		return "", usageErr("the value of %s is empty: pipe it in (printf %%s \"$VALUE\" | expo-build env set %s ...) or use --value-file", name, name)
	}
	if !utf8.ValidString(v) || strings.ContainsRune(v, 0) {
		return "", usageErr("the value of %s is not text: use --type file for binary content", name)
	}
	if err := api.CheckSecretLength(name, visibility, []byte(v)); err != nil {
		return "", usageErr("%v", err)
	}
	return v, nil
}

func printVariables(u *ui, project string, vars []api.Variable) {
	if len(vars) == 0 {
		u.printf("No variables in %s.\n", project)
		return
	}
	tw := tabwriter.NewWriter(u.out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ENVIRONMENT\tNAME\tVISIBILITY\tTYPE\tVALUE\tUPDATED")
	for _, v := range vars {
		value := v.Value
		switch {
		case v.Visibility == api.VisibilitySecret:
			value = "*****"
		case v.Type == api.VariableFile:
			n := len(v.Value) / 4 * 3
			n -= strings.Count(v.Value[max(0, len(v.Value)-2):], "=")
			value = fmt.Sprintf("(file, %d bytes)", n)
		case len(value) > 40:
			value = value[:37] + "…"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", v.Environment, v.Name, v.Visibility, v.Type, value, v.UpdatedAt.Local().Format(time.DateTime))
	}
	tw.Flush()
}

func (a *App) cmdCredentials(ctx context.Context, inv *invocation, args []string) error {
	fs := inv.flags()
	platform := fs.String("platform", "", "`android` (iOS credentials come with the next release)")
	name := fs.String("name", "default", "the credential's `NAME` (eas.json keystoreName)")
	projectFlag := fs.String("project", "", "the project `SLUG` (default: the app's slug in the current directory)")
	saKey := fs.String("service-account-key", "", "with set: keep this Google service account JSON key `FILE` for submitting to Google Play (instead of a keystore)")
	submitKey := fs.Bool("submit-key", false, "with delete: delete the key for submitting (set with --service-account-key), not the keystore")
	pos, err := inv.parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	verb := pos[0]
	if verb != "set" && verb != "list" && verb != "delete" {
		return usageErr("unknown credentials command %q: use set, list or delete", verb)
	}
	if verb != "list" && *platform != api.PlatformAndroid {
		return usageErr("--platform android is required (iOS credentials are not kept on the farm yet)")
	}
	if (*saKey != "" && verb != "set") || (*submitKey && verb != "delete") {
		return usageErr("--service-account-key goes with set, --submit-key with delete")
	}
	var local *credentials.File
	if verb == "set" && *saKey == "" {
		root, _, err := findProject(".")
		if err != nil {
			return err
		}
		if local, err = credentials.Load(root); err != nil {
			return &cliError{code: ExitUsage, msg: "credentials.json", err: err}
		}
		if !local.HasAndroid() {
			return usageErr("credentials.json in %s has no android.keystore to upload", root)
		}
	}
	project, err := a.projectSlug(ctx, *projectFlag)
	if err != nil {
		return err
	}
	s, c, err := inv.keySession()
	if err != nil {
		return err
	}
	switch verb {
	case "list":
		var list api.CredentialList
		if err := s.retry(ctx, "list credentials", true, func(ctx context.Context) error {
			var err error
			list, err = c.ListCredentials(ctx, project)
			return err
		}); err != nil {
			return wrapOp("list credentials", err)
		}
		var keys api.SubmitCredentialList
		if err := s.retry(ctx, "list the keys for submitting", true, func(ctx context.Context) error {
			var err error
			keys, err = c.ListSubmitCredentials(ctx, project)
			return err
		}); err != nil && api.StatusOf(err) != http.StatusNotFound { // 404: a controller without submissions
			return wrapOp("list the keys for submitting", err)
		}
		if inv.json {
			return inv.ui.emit(map[string]any{"credentials": list.Credentials, "submit_credentials": keys.Credentials})
		}
		for _, k := range keys.Credentials {
			inv.ui.printf("Key for submitting (%s) %q: service account %s, key id %s\n", k.Platform, k.Name, k.ClientEmail, k.KeyID)
		}
		if len(list.Credentials) == 0 {
			inv.ui.printf("No credentials on the farm for %s.\n", project)
			return nil
		}
		tw := tabwriter.NewWriter(inv.ui.out, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "PLATFORM\tNAME\tTYPE\tKEY ALIAS\tCERTIFICATE SHA-256\tSUBJECT")
		for _, cr := range list.Credentials {
			if k := cr.Android; k != nil {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", cr.Platform, cr.Name, k.Type, k.KeyAlias, k.CertificateSHA256, k.Subject)
			}
		}
		tw.Flush()
		return nil
	case "delete":
		if err := s.retry(ctx, "delete the credential", false, func(ctx context.Context) error {
			if *submitKey {
				return c.DeleteSubmitCredential(ctx, project, *platform, *name)
			}
			return c.DeleteCredential(ctx, project, *platform, *name)
		}); err != nil {
			return wrapOp("delete the credential", err)
		}
		if inv.json {
			return inv.ui.emit(map[string]any{"project": project, "platform": *platform, "name": *name, "deleted": true})
		}
		inv.ui.printf("%s Deleted the %s credential %q of %s\n", inv.ui.o(cGreen, "✔"), *platform, *name, project)
		return nil
	}
	if *saKey != "" {
		key, err := a.readKeyFile(".", *saKey, "--service-account-key")
		if err != nil {
			return err
		}
		var info api.SubmitCredentialInfo
		if err := s.retry(ctx, "upload the key", true, func(ctx context.Context) error {
			var err error
			info, err = c.SetSubmitCredential(ctx, project, api.PlatformAndroid, *name, api.SubmitSecrets{ServiceAccountKey: key})
			return err
		}); err != nil {
			return wrapOp("upload the key for submitting", err)
		}
		if inv.json {
			return inv.ui.emit(info)
		}
		inv.ui.printf("%s Kept the Google service account key %q of %s on the farm: %s (key id %s); expo-build submit and --auto-submit use it when eas.json names no serviceAccountKeyPath\n",
			inv.ui.o(cGreen, "✔"), *name, project, info.ClientEmail, info.KeyID)
		return nil
	}
	ks, info, err := local.Android()
	if err != nil {
		return &cliError{code: ExitUsage, msg: "credentials.json", err: err}
	}
	inv.ui.secrets = append(inv.ui.secrets, ks.KeystorePassword, ks.KeyPassword)
	var saved api.Credential
	if err := s.retry(ctx, "upload the credential", true, func(ctx context.Context) error {
		var err error
		saved, err = c.SetCredential(ctx, project, api.PlatformAndroid, *name, api.SetCredentialRequest{Android: &ks, Info: &info})
		return err
	}); err != nil {
		return wrapOp("upload the credential", err)
	}
	if inv.json {
		return inv.ui.emit(saved)
	}
	inv.ui.printf("%s Kept the Android keystore %q of %s on the farm: key %q, certificate SHA-256 %s\n",
		inv.ui.o(cGreen, "✔"), *name, project, info.KeyAlias, info.CertificateSHA256)
	return nil
}

// projectSlug is --project, else the slug of the app in the current
// directory.
func (a *App) projectSlug(ctx context.Context, flagValue string) (string, error) {
	if flagValue != "" {
		return flagValue, nil
	}
	root, _, err := findProject(".")
	if err != nil {
		return "", &cliError{code: ExitUsage, msg: "which project? run in the app's directory or pass --project SLUG", err: err}
	}
	app, err := appconfig.Read(ctx, root, os.Environ())
	if err != nil {
		return "", &cliError{code: ExitUsage, msg: "read the app config for its slug (or pass --project SLUG)", err: err}
	}
	if app.Slug == "" {
		return "", usageErr("the app config in %s has no slug: set expo.slug, or pass --project SLUG", root)
	}
	return app.Slug, nil
}
