package easjson

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// This file is eas.json's schema as @expo/eas-json declares it with Joi
// (src/schema.ts, src/build/schema.ts, src/submit/schema.ts) and validates
// it (allowUnknown: false, abortEarly: false, convert: true, noDefaults:
// true): unknown keys are refused, "true"/"false" strings (any case) count
// as booleans, a null is dropped where the schema says .empty(null), and
// every problem is reported, not just the first.
//
// The validated document is plain Go values, shaped as the JavaScript
// object Joi returns, so that resolution can merge them as eas-json's
// object spreads do: string, bool, float64, []string, env (an env map,
// where nil stands for a variable set to null: present, but undefined),
// and obj for the objects.
type obj = map[string]any

type env = map[string]*string

// Problem is one thing wrong with eas.json.
type Problem struct {
	// Path is the key's path: "build.production.android.gradleCommand",
	// "build.production.buildArtifactPaths[0]", or "" for the document.
	Path string
	// Message says what is wrong and how to fix it.
	Message string
}

func (p Problem) String() string {
	if p.Path == "" {
		return "the document " + p.Message
	}
	return p.Path + ": " + p.Message
}

// ValidationError is eas.json that parses but that EAS refuses. It holds
// every problem, in the order of the document.
type ValidationError struct {
	Problems []Problem
}

func (e *ValidationError) Error() string {
	var b strings.Builder
	b.WriteString("eas.json is not valid:")
	for _, p := range e.Problems {
		b.WriteString("\n- ")
		b.WriteString(p.String())
	}
	return b.String()
}

type checker struct {
	problems []Problem
}

func (c *checker) add(path, format string, args ...any) {
	c.problems = append(c.problems, Problem{Path: path, Message: fmt.Sprintf(format, args...)})
}

// field checks the value of one key (parent is the object holding it).
// It returns the converted value, and keep=false when the key is to be
// dropped: on a problem, or for a null the schema ignores.
type field func(c *checker, n, parent *node, path string) (out any, keep bool)

// schema is a Joi object schema.
type schema struct {
	fields map[string]field
	// elsewhere names, for a key this object does not take, the section
	// that does ("android"), for the message.
	elsewhere map[string]string
	// check runs after the keys: rules between keys.
	check func(c *checker, n *node, out obj, path string)
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func typeProblem(c *checker, n *node, path, want string) {
	c.add(path, "must be %s, not %s", want, n.kind)
}

// object validates an object against s.
func object(s *schema) field {
	return func(c *checker, n, _ *node, path string) (any, bool) {
		if n.kind != kindObject {
			typeProblem(c, n, path, "an object")
			return nil, false
		}
		out := obj{}
		for _, key := range n.keys {
			f, ok := s.fields[key]
			if !ok {
				c.add(join(path, key), "is not allowed%s", s.hint(key))
				continue
			}
			if v, keep := f(c, n.fields[key], n, join(path, key)); keep {
				out[key] = v
			}
		}
		if s.check != nil {
			s.check(c, n, out, path)
		}
		return out, true
	}
}

// hint suggests the key that was meant.
func (s *schema) hint(key string) string {
	if where, ok := s.elsewhere[key]; ok {
		return fmt.Sprintf(": %s belongs in the %s section", key, where)
	}
	best, bestDist := "", 3
	for name := range s.fields {
		d := editDistance(strings.ToLower(key), strings.ToLower(name))
		if len(name) <= 4 && d > 1 {
			continue
		}
		if d < bestDist || (d == bestDist && name < best) {
			best, bestDist = name, d
		}
	}
	if best == "" {
		names := make([]string, 0, len(s.fields))
		for name := range s.fields {
			names = append(names, name)
		}
		slices.Sort(names)
		return fmt.Sprintf(": remove it (the keys allowed here are %s)", strings.Join(names, ", "))
	}
	return fmt.Sprintf(": did you mean %s?", best)
}

// editDistance is the Levenshtein distance between two short keys.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

// patternObject is Joi.object().pattern(Joi.string(), each): any key,
// each value checked by each (the build and submit profiles).
func patternObject(each field) field {
	return func(c *checker, n, _ *node, path string) (any, bool) {
		if n.kind != kindObject {
			typeProblem(c, n, path, "an object")
			return nil, false
		}
		out := obj{}
		for _, key := range n.keys {
			if key == "" {
				c.add(join(path, key), "is not allowed: a name must not be empty")
				continue
			}
			if v, keep := each(c, n.fields[key], n, join(path, key)); keep {
				out[key] = v
			}
		}
		return out, true
	}
}

// stringCheck refines a string; it returns a problem or "".
type stringCheck func(s string) string

// str is Joi.string() with checks: a non-empty string.
func str(checks ...stringCheck) field {
	return func(c *checker, n, _ *node, path string) (any, bool) {
		if n.kind != kindString {
			typeProblem(c, n, path, "a string")
			return nil, false
		}
		if n.str == "" {
			c.add(path, "must not be empty: remove the key or give it a value")
			return nil, false
		}
		for _, check := range checks {
			if msg := check(n.str); msg != "" {
				c.add(path, "%s", msg)
				return nil, false
			}
		}
		return n.str, true
	}
}

// optionalStr is Joi.string().empty(null): a null is as if the key were
// not there.
func optionalStr(checks ...stringCheck) field {
	s := str(checks...)
	return func(c *checker, n, parent *node, path string) (any, bool) {
		if n.kind == kindNull {
			return nil, false
		}
		return s(c, n, parent, path)
	}
}

func semverCheck(s string) string {
	if validSemver(s) {
		return ""
	}
	return fmt.Sprintf("%q is not a valid version: write an exact version such as \"1.2.3\" (no ranges)", s)
}

func regexCheck(re *regexp.Regexp, msg string) stringCheck {
	return func(s string) string {
		if re.MatchString(s) {
			return ""
		}
		return fmt.Sprintf("%q %s", s, msg)
	}
}

func maxLength(limit int) stringCheck {
	return func(s string) string {
		if jsLength(s) <= limit {
			return ""
		}
		return fmt.Sprintf("is %d characters long: at most %d are allowed", jsLength(s), limit)
	}
}

func environmentCheck(s string) string {
	switch n := jsLength(s); {
	case n < 3:
		return fmt.Sprintf("environment name %q must be at least 3 characters", s)
	case n > 100:
		return "environment name must not be longer than 100 characters"
	case !environmentRe.MatchString(s):
		return fmt.Sprintf("environment name %q can only contain lowercase letters, numbers, dashes and underscores", s)
	}
	return ""
}

var (
	channelRe     = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]*$`)
	environmentRe = regexp.MustCompile(`^[a-z0-9_-]+$`)
)

func oneOf(values ...string) field {
	return func(c *checker, n, _ *node, path string) (any, bool) {
		if n.kind == kindString && slices.Contains(values, n.str) {
			return n.str, true
		}
		c.add(path, "must be one of %s, not %s", quoteAll(values), describe(n))
		return nil, false
	}
}

func quoteAll(values []string) string {
	q := make([]string, len(values))
	for i, v := range values {
		q[i] = strconv.Quote(v)
	}
	return strings.Join(q, ", ")
}

func describe(n *node) string {
	switch n.kind {
	case kindString:
		return strconv.Quote(n.str)
	case kindBool:
		return strconv.FormatBool(n.boolean)
	}
	return n.kind.String()
}

// asBool is Joi.boolean() with convert: true, false, or those words as
// strings in any case.
func asBool(n *node) (bool, bool) {
	switch {
	case n.kind == kindBool:
		return n.boolean, true
	case n.kind == kindString && strings.EqualFold(n.str, "true"):
		return true, true
	case n.kind == kindString && strings.EqualFold(n.str, "false"):
		return false, true
	}
	return false, false
}

func boolean() field {
	return func(c *checker, n, _ *node, path string) (any, bool) {
		if b, ok := asBool(n); ok {
			return b, true
		}
		typeProblem(c, n, path, "true or false")
		return nil, false
	}
}

// autoIncrement is a boolean, or one of the strings a platform allows.
func autoIncrement(values ...string) field {
	return func(c *checker, n, _ *node, path string) (any, bool) {
		if b, ok := asBool(n); ok {
			return b, true
		}
		if n.kind == kindString && slices.Contains(values, n.str) {
			return n.str, true
		}
		if len(values) == 0 {
			c.add(path, "must be true or false, not %s (\"version\" and the like go in the android or ios section)", describe(n))
		} else {
			c.add(path, "must be true, false or one of %s, not %s", quoteAll(values), describe(n))
		}
		return nil, false
	}
}

func stringArray() field {
	item := str()
	return func(c *checker, n, parent *node, path string) (any, bool) {
		if n.kind != kindArray {
			typeProblem(c, n, path, "an array of strings")
			return nil, false
		}
		out := make([]string, 0, len(n.items))
		ok := true
		for i, it := range n.items {
			v, keep := item(c, it, n, fmt.Sprintf("%s[%d]", path, i))
			if !keep {
				ok = false
				continue
			}
			out = append(out, v.(string))
		}
		return out, ok
	}
}

// envField is Joi.object().pattern(Joi.string(), Joi.string().empty(null)):
// a null value stays in the object as undefined, so that it unsets the
// variable a base profile sets.
func envField() field {
	value := str()
	return func(c *checker, n, _ *node, path string) (any, bool) {
		if n.kind != kindObject {
			typeProblem(c, n, path, "an object of strings")
			return nil, false
		}
		out := env{}
		for _, key := range n.keys {
			v := n.fields[key]
			if key == "" {
				c.add(join(path, key), "is not allowed: a variable needs a name")
				continue
			}
			if v.kind == kindNull {
				out[key] = nil
				continue
			}
			if s, keep := value(c, v, n, join(path, key)); keep {
				out[key] = new(s.(string))
			}
		}
		return out, true
	}
}

// number01 is Joi.number().min(0).max(1) with convert: a number, or a
// string that reads as one.
func number01() field {
	return func(c *checker, n, _ *node, path string) (any, bool) {
		v, ok := n.number, n.kind == kindNumber
		if n.kind == kindString {
			t := strings.TrimFunc(n.str, isJSSpace)
			if numericRe.MatchString(t) {
				f, err := strconv.ParseFloat(t, 64)
				v, ok = f, err == nil
			}
		}
		switch {
		case !ok || math.IsNaN(v):
			typeProblem(c, n, path, "a number")
		case math.IsInf(v, 0):
			c.add(path, "must be a finite number")
		case v < 0 || v > 1:
			c.add(path, "must be between 0 and 1, not %v", v)
		default:
			return v, true
		}
		return nil, false
	}
}

var numericRe = regexp.MustCompile(`^[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?$`)

func with(base map[string]field, more map[string]field) map[string]field {
	out := make(map[string]field, len(base)+len(more))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range more {
		out[k] = v
	}
	return out
}

// Resource classes EAS takes.
var (
	commonResourceClasses = []string{"default", "medium", "large"}
	iosResourceClasses    = []string{"default", "medium", "large", "m1-medium", "m-medium", "m-large"}
)

func commonFields() map[string]field {
	channel := regexCheck(channelRe, "is not a valid channel name: use lowercase letters, digits, \".\", \"_\" and \"-\", starting with a letter or digit")
	return map[string]field{
		"resourceClass":      oneOf(commonResourceClasses...),
		"env":                envField(),
		"node":               optionalStr(semverCheck),
		"corepack":           boolean(),
		"pnpm":               optionalStr(semverCheck),
		"bun":                optionalStr(semverCheck),
		"yarn":               optionalStr(semverCheck),
		"expoCli":            optionalStr(semverCheck),
		"credentialsSource":  oneOf("local", "remote"),
		"distribution":       oneOf("store", "internal"),
		"releaseChannel":     str(channel),
		"channel":            str(channel),
		"developmentClient":  boolean(),
		"prebuildCommand":    str(),
		"autoIncrement":      autoIncrement(),
		"buildArtifactPaths": stringArray(),
		"uploadSourceMaps":   boolean(),
		"cache":              object(cacheSchema()),
		"config":             str(),
		"withoutCredentials": boolean(),
		"environment":        str(environmentCheck),
	}
}

func cacheSchema() *schema {
	return &schema{
		fields: map[string]field{
			"disabled":          boolean(),
			"key":               str(maxLength(128)),
			"cacheDefaultPaths": boolean(),
			"customPaths":       stringArray(),
			"paths":             stringArray(),
		},
		// customPaths is the old name of paths (Joi's rename).
		check: func(c *checker, n *node, out obj, path string) {
			if _, ok := n.get("customPaths"); !ok {
				return
			}
			if _, ok := n.get("paths"); ok {
				c.add(join(path, "customPaths"), "cannot be given with cache.paths: keep only cache.paths (customPaths is its old name)")
				delete(out, "customPaths")
				return
			}
			if v, ok := out["customPaths"]; ok {
				out["paths"] = v
				delete(out, "customPaths")
			}
		},
	}
}

func platformFields() map[string]field {
	return with(commonFields(), map[string]field{
		"image":                  str(),
		"artifactPath":           str(),
		"applicationArchivePath": str(),
	})
}

func checkArchivePaths(c *checker, n *node, _ obj, path string) {
	_, a := n.get("artifactPath")
	_, b := n.get("applicationArchivePath")
	if a && b {
		c.add(join(path, "artifactPath"), "cannot be given with applicationArchivePath: keep only applicationArchivePath (artifactPath is its old name)")
	}
}

// keystoreName is allowed only next to credentialsSource "remote" in
// the same android section (Joi.when on the sibling, with no default).
func keystoreName() field {
	s := str()
	return func(c *checker, n, parent *node, path string) (any, bool) {
		if cs, ok := parent.get("credentialsSource"); !ok || cs.kind != kindString || cs.str != "remote" {
			c.add(path, "is only allowed next to \"credentialsSource\": \"remote\" in the same android section")
			return nil, false
		}
		return s(c, n, parent, path)
	}
}

func androidSchema() *schema {
	return &schema{
		fields: with(platformFields(), map[string]field{
			"resourceClass": oneOf(commonResourceClasses...),
			"ndk":           optionalStr(semverCheck),
			"gradleCommand": str(),
			"buildType":     oneOf("apk", "app-bundle"),
			"autoIncrement": autoIncrement("version", "versionCode"),
			"keystoreName":  keystoreName(),
		}),
		elsewhere: iosOnly(),
		check:     checkArchivePaths,
	}
}

func iosSchema() *schema {
	return &schema{
		fields: with(platformFields(), map[string]field{
			"resourceClass":          oneOf(iosResourceClasses...),
			"bundler":                optionalStr(semverCheck),
			"fastlane":               optionalStr(semverCheck),
			"cocoapods":              optionalStr(semverCheck),
			"enterpriseProvisioning": oneOf("adhoc", "universal"),
			"simulator":              boolean(),
			"scheme":                 str(),
			"buildConfiguration":     str(),
			"autoIncrement":          autoIncrement("version", "buildNumber"),
		}),
		elsewhere: androidOnly(),
		check:     checkArchivePaths,
	}
}

func androidOnly() map[string]string {
	const a = `"android"`
	return map[string]string{"ndk": a, "gradleCommand": a, "buildType": a, "keystoreName": a}
}

func iosOnly() map[string]string {
	const i = `"ios"`
	return map[string]string{"bundler": i, "fastlane": i, "cocoapods": i, "enterpriseProvisioning": i,
		"simulator": i, "scheme": i, "buildConfiguration": i}
}

func buildProfileSchema() *schema {
	both := `"android" or "ios"`
	elsewhere := map[string]string{"image": both, "artifactPath": both, "applicationArchivePath": both}
	for k, v := range androidOnly() {
		elsewhere[k] = v
	}
	for k, v := range iosOnly() {
		elsewhere[k] = v
	}
	return &schema{
		fields: with(commonFields(), map[string]field{
			"extends": str(),
			"android": object(androidSchema()),
			"ios":     object(iosSchema()),
		}),
		elsewhere: elsewhere,
	}
}

func submitProfileSchema() *schema {
	android := &schema{
		fields: map[string]field{
			"serviceAccountKeyPath":   str(),
			"track":                   str(),
			"releaseStatus":           oneOf("completed", "draft", "halted", "inProgress"),
			"changesNotSentForReview": boolean(),
			"applicationId":           str(),
			"rollout":                 rollout(),
		},
		check: func(c *checker, n *node, _ obj, path string) {
			rs, ok := n.get("releaseStatus")
			_, has := n.get("rollout")
			if ok && rs.kind == kindString && rs.str == "inProgress" && !has {
				c.add(join(path, "rollout"), "is required when releaseStatus is \"inProgress\"")
			}
		},
	}
	ios := &schema{fields: map[string]field{
		"ascApiKeyPath": str(), "ascApiKeyId": str(), "ascApiKeyIssuerId": str(), "appleId": str(),
		"ascAppId": str(), "appleTeamId": str(), "sku": str(), "language": str(), "companyName": str(),
		"appName": str(), "bundleIdentifier": str(), "metadataPath": str(), "groups": stringArray(),
	}}
	return &schema{fields: map[string]field{
		"extends": str(),
		"android": object(android),
		"ios":     object(ios),
	}}
}

// rollout is allowed only with releaseStatus "inProgress".
func rollout() field {
	num := number01()
	return func(c *checker, n, parent *node, path string) (any, bool) {
		if rs, ok := parent.get("releaseStatus"); !ok || rs.kind != kindString || rs.str != "inProgress" {
			c.add(path, "is only allowed with \"releaseStatus\": \"inProgress\"")
			return nil, false
		}
		return num(c, n, parent, path)
	}
}

func easJSONSchema() field {
	return object(&schema{fields: map[string]field{
		"$schema": str(),
		"cli": object(&schema{fields: map[string]field{
			"version":                            str(),
			"requireCommit":                      boolean(),
			"appVersionSource":                   oneOf("local", "remote"),
			"promptToConfigurePushNotifications": boolean(),
			"updateAssetHostOverride":            str(),
			"updateManifestHostOverride":         str(),
		}}),
		"build":  patternObject(object(buildProfileSchema())),
		"submit": patternObject(object(submitProfileSchema())),
	}})
}

// validate checks a parsed eas.json and returns it converted.
func validate(n *node) (obj, error) {
	c := &checker{}
	out, _ := easJSONSchema()(c, n, nil, "")
	if len(c.problems) > 0 {
		return nil, &ValidationError{Problems: c.problems}
	}
	return out.(obj), nil
}
