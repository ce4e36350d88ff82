// Package easjson reads eas.json and resolves its build profiles exactly
// as EAS does (@expo/eas-json: EasJsonAccessor, the Joi schema,
// resolveBuildProfile), so that a project built by EAS builds the same
// way here. Differential tests hold it to the real @expo/eas-json.
//
// Reading is JSON, else JSON5 with golden-fleece's leniencies; syntax
// errors carry the line and column. Validation reports every problem at
// once, each with its key path. Resolution follows "extends" (at most
// four hops, as EAS), deep-merges env and the platform sections, merges
// the platform section over the common keys and fills EAS's defaults.
package easjson

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/freeagent-build/freeagent/api"
)

// ErrMissing is returned by Load when the directory has no eas.json.
var ErrMissing = errors.New("eas.json not found")

// ErrEmpty is eas.json with nothing but whitespace in it.
var ErrEmpty = errors.New("eas.json is empty: write at least {\"build\": {\"production\": {}}} (https://docs.expo.dev/build-reference/eas-json/)")

// File is a parsed and validated eas.json.
type File struct {
	doc          obj
	profileNames []string
}

// Load reads dir/eas.json. A missing file is ErrMissing (errors.Is).
func Load(dir string) (*File, error) {
	path := filepath.Join(dir, "eas.json")
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w in %s: create one (https://docs.expo.dev/build-reference/eas-json/), or run from the project's directory", ErrMissing, dir)
	}
	if err != nil {
		return nil, fmt.Errorf("read eas.json: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return Parse(data)
}

// Parse reads eas.json's contents. Errors are *SyntaxError, ErrEmpty,
// *ValidationError, or a refusal of a file over 1 MiB.
func Parse(data []byte) (*File, error) {
	if len(data) > maxFileSize {
		return nil, fmt.Errorf("eas.json is larger than %d bytes: it cannot be a real eas.json", maxFileSize)
	}
	src := string(data)
	if strings.TrimFunc(src, isJSSpace) == "" {
		return nil, ErrEmpty
	}
	n, err := parseJSON5(src)
	if err != nil {
		return nil, err
	}
	doc, err := validate(n)
	if err != nil {
		return nil, err
	}
	f := &File{doc: doc}
	if build, ok := n.get("build"); ok {
		f.profileNames = jsKeyOrder(build.keys)
	}
	return f, nil
}

// jsKeyOrder is the order JavaScript enumerates an object's keys in:
// array indices first, ascending, then the rest as they were added.
func jsKeyOrder(keys []string) []string {
	var index, rest []string
	for _, k := range keys {
		if isArrayIndex(k) {
			index = append(index, k)
		} else {
			rest = append(rest, k)
		}
	}
	slices.SortFunc(index, func(a, b string) int {
		x, _ := strconv.ParseUint(a, 10, 32)
		y, _ := strconv.ParseUint(b, 10, 32)
		return int(int64(x) - int64(y))
	})
	return append(index, rest...)
}

func isArrayIndex(k string) bool {
	if k == "0" {
		return true
	}
	if k == "" || k[0] < '1' || k[0] > '9' {
		return false
	}
	v, err := strconv.ParseUint(k, 10, 32)
	return err == nil && v < 1<<32-1
}

// ProfileNames lists the build profiles in the order EAS lists them.
func (f *File) ProfileNames() []string {
	return slices.Clone(f.profileNames)
}

// AppVersionSource is cli.appVersionSource: "local", "remote", or "" when
// eas.json does not say.
func (f *File) AppVersionSource() string {
	cli, _ := f.doc["cli"].(obj)
	s, _ := cli["appVersionSource"].(string)
	return s
}

// RequireCommit is cli.requireCommit: eas-cli then builds only a clean
// git working tree.
func (f *File) RequireCommit() bool {
	cli, _ := f.doc["cli"].(obj)
	b, _ := cli["requireCommit"].(bool)
	return b
}

// MissingProfileError is a request for a build profile eas.json lacks.
type MissingProfileError struct {
	Name      string
	Available []string
	Kind      string // "submit" for a submit profile; "" is a build profile
}

func (e *MissingProfileError) Error() string {
	kind := cmp.Or(e.Kind, "build")
	if len(e.Available) == 0 {
		return fmt.Sprintf("eas.json has no %s profile %q (it has no %s profiles at all): add one under \"%s\"", kind, e.Name, kind, kind)
	}
	return fmt.Sprintf("eas.json has no %s profile %q: the profiles are %s (pick one, or add %q under \"%s\")",
		kind, e.Name, quoteAll(e.Available), e.Name, kind)
}

// MissingParentError is a profile whose "extends" names a profile that
// does not exist.
type MissingParentError struct {
	Profile, Parent string
}

func (e *MissingParentError) Error() string {
	return fmt.Sprintf("eas.json: build profile %q extends %q, which does not exist: fix \"extends\" or add a %q profile",
		e.Profile, e.Parent, e.Parent)
}

// ExtendsChainError is a chain of "extends" longer than EAS follows: a
// cycle, or more than four hops.
type ExtendsChainError struct {
	Chain []string
}

func (e *ExtendsChainError) Error() string {
	return fmt.Sprintf("eas.json: the chain of \"extends\" %s is too long: EAS follows at most %d, make sure the \"extends\" keys do not make a cycle",
		strings.Join(e.Chain, " → "), maxExtends-1)
}

// maxExtends is EAS's limit on the profiles in a chain (the profile asked
// for and four it extends, directly or not).
const maxExtends = 5

// Resolve returns the build profile for a platform ("android" or "ios")
// as @expo/eas-json's resolveBuildProfile does. An empty profile name
// means "production".
func (f *File) Resolve(platform, profile string) (api.BuildProfile, error) {
	if platform != "android" && platform != "ios" {
		return api.BuildProfile{}, fmt.Errorf("resolve eas.json: unknown platform %q: use android or ios", platform)
	}
	if profile == "" {
		profile = "production"
	}
	resolved, err := f.resolveProfile([]string{profile})
	if err != nil {
		return api.BuildProfile{}, err
	}
	base := obj{}
	for k, v := range resolved {
		if k != "android" && k != "ios" {
			base[k] = v
		}
	}
	section, _ := resolved[platform].(obj)
	defaults := obj{"credentialsSource": api.CredentialsRemote, "distribution": "store"}
	return toBuildProfile(merge(defaults, merge(base, section))), nil
}

// resolveProfile resolves the last profile of chain (the ones before it
// extend it), without "extends".
func (f *File) resolveProfile(chain []string) (obj, error) {
	name := chain[len(chain)-1]
	if len(chain) > maxExtends {
		return nil, &ExtendsChainError{Chain: chain}
	}
	build, _ := f.doc["build"].(obj)
	profile, ok := build[name].(obj)
	if !ok {
		if len(chain) == 1 {
			return nil, &MissingProfileError{Name: name, Available: f.ProfileNames()}
		}
		return nil, &MissingParentError{Profile: chain[len(chain)-2], Parent: name}
	}
	rest := obj{}
	for k, v := range profile {
		if k != "extends" {
			rest[k] = v
		}
	}
	parent, _ := profile["extends"].(string)
	if parent == "" {
		return rest, nil
	}
	base, err := f.resolveProfile(append(slices.Clip(chain), parent))
	if err != nil {
		return nil, err
	}
	return merge(base, rest), nil
}

// merge is eas-json's mergeProfiles: update's keys over base's, but env
// and the platform sections merged key by key when both have them.
func merge(base, update obj) obj {
	out := make(obj, len(base)+len(update))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range update {
		out[k] = v
	}
	if b, ok := base["env"].(env); ok {
		if u, ok := update["env"].(env); ok {
			m := make(env, len(b)+len(u))
			for k, v := range b {
				m[k] = v
			}
			for k, v := range u {
				m[k] = v
			}
			out["env"] = m
		}
	}
	for _, platform := range []string{"android", "ios"} {
		b, ok1 := base[platform].(obj)
		u, ok2 := update[platform].(obj)
		if ok1 && ok2 {
			out[platform] = merge(b, u)
		}
	}
	return out
}

// toBuildProfile turns a resolved profile into the wire type.
func toBuildProfile(m obj) api.BuildProfile {
	s := func(key string) string {
		v, _ := m[key].(string)
		return v
	}
	b := func(key string) *bool {
		if v, ok := m[key].(bool); ok {
			return &v
		}
		return nil
	}
	p := api.BuildProfile{
		ResourceClass:          s("resourceClass"),
		Node:                   s("node"),
		Corepack:               b("corepack"),
		Pnpm:                   s("pnpm"),
		Bun:                    s("bun"),
		Yarn:                   s("yarn"),
		ExpoCli:                s("expoCli"),
		CredentialsSource:      s("credentialsSource"),
		Distribution:           s("distribution"),
		ReleaseChannel:         s("releaseChannel"),
		Channel:                s("channel"),
		DevelopmentClient:      b("developmentClient"),
		PrebuildCommand:        s("prebuildCommand"),
		UploadSourceMaps:       b("uploadSourceMaps"),
		Config:                 s("config"),
		WithoutCredentials:     b("withoutCredentials"),
		Environment:            s("environment"),
		Image:                  s("image"),
		ArtifactPath:           s("artifactPath"),
		ApplicationArchivePath: s("applicationArchivePath"),
		Ndk:                    s("ndk"),
		GradleCommand:          s("gradleCommand"),
		BuildType:              s("buildType"),
		KeystoreName:           s("keystoreName"),
		Bundler:                s("bundler"),
		Fastlane:               s("fastlane"),
		Cocoapods:              s("cocoapods"),
		EnterpriseProvisioning: s("enterpriseProvisioning"),
		Simulator:              b("simulator"),
		Scheme:                 s("scheme"),
		BuildConfiguration:     s("buildConfiguration"),
	}
	if e, ok := m["env"].(env); ok {
		// A variable set to null is present but undefined: it unset a
		// base profile's value and is not part of the result.
		p.Env = map[string]string{}
		for k, v := range e {
			if v != nil {
				p.Env[k] = *v
			}
		}
	}
	switch v := m["autoIncrement"].(type) {
	case bool:
		p.AutoIncrement = &api.AutoIncrement{Bool: &v}
	case string:
		p.AutoIncrement = &api.AutoIncrement{Field: v}
	}
	if v, ok := m["buildArtifactPaths"].([]string); ok {
		p.BuildArtifactPaths = slices.Clone(v)
		if p.BuildArtifactPaths == nil {
			p.BuildArtifactPaths = []string{}
		}
	}
	if c, ok := m["cache"].(obj); ok {
		cache := &api.BuildCache{}
		if v, ok := c["disabled"].(bool); ok {
			cache.Disabled = &v
		}
		cache.Key, _ = c["key"].(string)
		if v, ok := c["cacheDefaultPaths"].(bool); ok {
			cache.CacheDefaultPaths = &v
		}
		if v, ok := c["paths"].([]string); ok {
			cache.Paths = append([]string{}, v...)
		}
		p.Cache = cache
	}
	return p
}
