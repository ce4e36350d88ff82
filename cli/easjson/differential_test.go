package easjson

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
)

type handCase struct {
	name     string
	doc      string
	platform string // android when empty
	profile  *string
}

func named(s string) *string { return &s }

// handCases cover every key, the extends rules, JSON5 and the errors.
var handCases = []handCase{
	// Every common key, then every platform key, on both platforms.
	{name: "all common keys", doc: `{"cli":{"version":">= 5.0.0","requireCommit":true,"appVersionSource":"local","promptToConfigurePushNotifications":false,"updateAssetHostOverride":"a.example.com","updateManifestHostOverride":"m.example.com"},
		"build":{"production":{"resourceClass":"large","env":{"A":"1","B":"two"},"node":"20.11.1","corepack":true,"pnpm":"9.1.0","bun":"1.1.0","yarn":"1.22.22","expoCli":"6.3.10",
		"credentialsSource":"local","distribution":"internal","releaseChannel":"prod-1","channel":"production","developmentClient":false,"prebuildCommand":"prebuild --clean",
		"autoIncrement":true,"buildArtifactPaths":["a/**","b.txt"],"uploadSourceMaps":true,"cache":{"disabled":false,"key":"k1","cacheDefaultPaths":true,"paths":["x"]},
		"config":"build.yml","withoutCredentials":false,"environment":"staging_2"}}}`},
	{name: "all android keys", doc: `{"build":{"production":{"android":{"resourceClass":"medium","env":{"X":"y"},"node":"18.0.0","corepack":false,"pnpm":"8.0.0","bun":"1.0.0","yarn":"4.1.0","expoCli":"6.0.0",
		"credentialsSource":"remote","distribution":"store","releaseChannel":"r","channel":"c","developmentClient":true,"prebuildCommand":"p","autoIncrement":"versionCode",
		"buildArtifactPaths":["z"],"uploadSourceMaps":false,"cache":{"key":"a"},"config":"c.yml","withoutCredentials":true,"environment":"preview",
		"image":"latest","applicationArchivePath":"out/*.apk","ndk":"26.1.10909125","gradleCommand":":app:assembleStaging","buildType":"apk","keystoreName":"upload"}}}}`},
	{name: "all ios keys", platform: "ios", doc: `{"build":{"production":{"ios":{"resourceClass":"m-medium","env":{"X":"y"},"node":"18.0.0","credentialsSource":"local","distribution":"internal",
		"autoIncrement":"buildNumber","image":"macos-sonoma-14.6-xcode-16.0","artifactPath":"ios/build/*.ipa","bundler":"2.4.22","fastlane":"2.219.0","cocoapods":"1.15.2",
		"enterpriseProvisioning":"universal","simulator":true,"scheme":"App","buildConfiguration":"Release"}}}}`},
	// The keys that select workers, pin tools or change what is checked
	// (docs/build-spec.md, "Workers"): every resource class on each
	// platform, the image aliases and names, the pins, requireCommit and
	// iOS withoutCredentials.
	{name: "ios m-medium", platform: "ios", doc: `{"build":{"production":{"resourceClass":"m-medium"}}}`},
	{name: "ios large", platform: "ios", doc: `{"build":{"production":{"ios":{"resourceClass":"large"}}}}`},
	{name: "ios m1-medium", platform: "ios", doc: `{"build":{"production":{"ios":{"resourceClass":"m1-medium"}}}}`},
	{name: "ios m-large", platform: "ios", doc: `{"build":{"production":{"ios":{"resourceClass":"m-large"}}}}`},
	{name: "ios medium", platform: "ios", doc: `{"build":{"production":{"ios":{"resourceClass":"medium"}}}}`},
	{name: "common m-medium", platform: "ios", doc: `{"build":{"production":{"resourceClass":"m-medium","ios":{}}}}`},
	{name: "android m-medium", doc: `{"build":{"production":{"android":{"resourceClass":"m-medium"}}}}`},
	{name: "android medium", doc: `{"build":{"production":{"android":{"resourceClass":"medium"}}}}`},
	{name: "android large over common default", doc: `{"build":{"production":{"resourceClass":"default","android":{"resourceClass":"large"}}}}`},
	{name: "unknown resource class", doc: `{"build":{"production":{"resourceClass":"xl"}}}`},
	{name: "image latest", platform: "ios", doc: `{"build":{"production":{"ios":{"image":"latest"}}}}`},
	{name: "image sdk-55", platform: "ios", doc: `{"build":{"production":{"ios":{"image":"sdk-55"}}}}`},
	{name: "image auto", doc: `{"build":{"production":{"android":{"image":"auto"}}}}`},
	{name: "image default", doc: `{"build":{"production":{"android":{"image":"default"}}}}`},
	{name: "image by name", doc: `{"build":{"production":{"android":{"image":"ubuntu-24.04-jdk-17-ndk-r27b"}}}}`},
	{name: "image common", doc: `{"build":{"production":{"image":"latest"}}}`},
	{name: "node pin", doc: `{"build":{"production":{"node":"20.19.4"}}}`},
	{name: "node pin in ios", platform: "ios", doc: `{"build":{"production":{"node":"22.0.0","ios":{"node":"20.19.4"}}}}`},
	{name: "ndk pin", doc: `{"build":{"production":{"android":{"ndk":"27.1.12297006"}}}}`},
	{name: "ndk in common", doc: `{"build":{"production":{"ndk":"27.1.12297006"}}}`},
	{name: "ios tool pins", platform: "ios", doc: `{"build":{"production":{"ios":{"cocoapods":"1.16.2","bundler":"2.5.11","fastlane":"2.226.0"}}}}`},
	{name: "cocoapods in android", doc: `{"build":{"production":{"android":{"cocoapods":"1.16.2"}}}}`},
	{name: "package manager pins", doc: `{"build":{"production":{"corepack":true,"yarn":"4.5.0","pnpm":"9.15.0","bun":"1.1.38"}}}`},
	{name: "requireCommit", doc: `{"cli":{"requireCommit":true},"build":{"production":{}}}`},
	{name: "requireCommit false", doc: `{"cli":{"requireCommit":false},"build":{"production":{}}}`},
	{name: "requireCommit not boolean", doc: `{"cli":{"requireCommit":"yes"},"build":{"production":{}}}`},
	{name: "ios withoutCredentials", platform: "ios", doc: `{"build":{"production":{"withoutCredentials":true,"ios":{"credentialsSource":"local"}}}}`},
	{name: "ios keys ignored on android", doc: `{"build":{"production":{"node":"18.0.0","ios":{"simulator":true,"node":"20.0.0"}}}}`},
	{name: "android section over common", doc: `{"build":{"production":{"node":"18.0.0","distribution":"internal","env":{"A":"1","B":"2"},"android":{"node":"20.0.0","env":{"B":"3","C":"4"}}}}}`},
	{name: "platform env over empty env", doc: `{"build":{"production":{"env":{},"android":{"env":{"A":"1"}}}}}`},
	{name: "empty env and arrays kept", doc: `{"build":{"production":{"env":{},"buildArtifactPaths":[],"cache":{"paths":[]}}}}`},
	{name: "empty cache", doc: `{"build":{"production":{"cache":{}}}}`},
	{name: "defaults only", doc: `{"build":{"production":{}}}`},
	{name: "ios defaults", platform: "ios", doc: `{"build":{"production":{}}}`},
	{name: "named profile", profile: named("preview"), doc: `{"build":{"production":{},"preview":{"distribution":"internal"}}}`},

	// Conversions.
	{name: "boolean strings", doc: `{"build":{"production":{"developmentClient":"true","corepack":"FALSE","withoutCredentials":"True","autoIncrement":"false","cache":{"disabled":"TRUE"}}}}`},
	{name: "boolean string with space", doc: `{"build":{"production":{"corepack":" true"}}}`},
	{name: "boolean as number", doc: `{"build":{"production":{"corepack":1}}}`},
	{name: "null versions dropped", doc: `{"build":{"production":{"node":null,"pnpm":null,"bun":null,"yarn":null,"expoCli":null,"android":{"ndk":null}}}}`},
	{name: "null version keeps base", doc: `{"build":{"base":{"node":"1.2.3","android":{"ndk":"1.0.0"}},"production":{"extends":"base","node":null,"android":{"ndk":null}}}}`},
	{name: "null env unsets base", doc: `{"build":{"base":{"env":{"A":"1","B":"2"}},"production":{"extends":"base","env":{"A":null}}}}`},
	{name: "null env alone", doc: `{"build":{"production":{"env":{"A":null}}}}`},
	{name: "null env then platform", doc: `{"build":{"production":{"env":{"A":null},"android":{"env":{"A":"back"}}}}}`},
	{name: "null for a plain string", doc: `{"build":{"production":{"channel":null}}}`},
	{name: "customPaths renamed", doc: `{"build":{"production":{"cache":{"customPaths":["a","b"]}}}}`},
	{name: "customPaths and paths", doc: `{"build":{"production":{"cache":{"customPaths":["a"],"paths":["b"]}}}}`},
	{name: "customPaths inherited", doc: `{"build":{"base":{"cache":{"customPaths":["a"]}},"production":{"extends":"base","cache":{"key":"x"}}}}`},
	{name: "semver with v and spaces", doc: `{"build":{"production":{"node":"v20.1.0","yarn":" 1.22.0 ","pnpm":"9.0.0-rc.1+build.5"}}}`},
	{name: "semver range", doc: `{"build":{"production":{"node":"^20.1.0"}}}`},
	{name: "semver partial", doc: `{"build":{"production":{"node":"20"}}}`},
	{name: "semver x", doc: `{"build":{"production":{"pnpm":"9.x"}}}`},
	{name: "semver leading zero", doc: `{"build":{"production":{"bun":"01.2.3"}}}`},
	{name: "semver huge", doc: `{"build":{"production":{"bun":"9007199254740992.0.0"}}}`},
	{name: "semver max safe", doc: `{"build":{"production":{"bun":"9007199254740991.0.0"}}}`},
	{name: "semver empty", doc: `{"build":{"production":{"yarn":""}}}`},
	{name: "semver number", doc: `{"build":{"production":{"node":20}}}`},
	{name: "ios semver keys", platform: "ios", doc: `{"build":{"production":{"ios":{"bundler":"2.x","fastlane":"2.0.0","cocoapods":"1.15"}}}}`},
	{name: "ndk invalid", doc: `{"build":{"production":{"android":{"ndk":"r26"}}}}`},

	// Enums and patterns.
	{name: "distribution bad", doc: `{"build":{"production":{"distribution":"simulator"}}}`},
	{name: "credentialsSource bad", doc: `{"build":{"production":{"credentialsSource":"none"}}}`},
	{name: "buildType bad", doc: `{"build":{"production":{"android":{"buildType":"aab"}}}}`},
	{name: "buildType common", doc: `{"build":{"production":{"buildType":"apk"}}}`},
	{name: "resourceClass ios only on common", doc: `{"build":{"production":{"resourceClass":"m-medium"}}}`},
	{name: "resourceClass ios", platform: "ios", doc: `{"build":{"production":{"ios":{"resourceClass":"m1-medium"}}}}`},
	{name: "resourceClass android m-large", doc: `{"build":{"production":{"android":{"resourceClass":"m-large"}}}}`},
	{name: "enterpriseProvisioning bad", platform: "ios", doc: `{"build":{"production":{"ios":{"enterpriseProvisioning":"enterprise"}}}}`},
	{name: "autoIncrement version on common", doc: `{"build":{"production":{"autoIncrement":"version"}}}`},
	{name: "autoIncrement versionCode on ios", platform: "ios", doc: `{"build":{"production":{"ios":{"autoIncrement":"versionCode"}}}}`},
	{name: "autoIncrement buildNumber on android", doc: `{"build":{"production":{"android":{"autoIncrement":"buildNumber"}}}}`},
	{name: "autoIncrement version android", doc: `{"build":{"production":{"autoIncrement":true,"android":{"autoIncrement":"version"}}}}`},
	{name: "channel uppercase", doc: `{"build":{"production":{"channel":"Production"}}}`},
	{name: "channel dot start", doc: `{"build":{"production":{"releaseChannel":".x"}}}`},
	{name: "channel ok chars", doc: `{"build":{"production":{"channel":"0a._-z"}}}`},
	{name: "environment short", doc: `{"build":{"production":{"environment":"qa"}}}`},
	{name: "environment upper", doc: `{"build":{"production":{"environment":"Staging"}}}`},
	{name: "environment long", doc: `{"build":{"production":{"environment":"` + strings.Repeat("e", 101) + `"}}}`},
	{name: "environment 100", doc: `{"build":{"production":{"environment":"` + strings.Repeat("e", 100) + `"}}}`},
	{name: "cache key 128", doc: `{"build":{"production":{"cache":{"key":"` + strings.Repeat("k", 128) + `"}}}}`},
	{name: "cache key 129", doc: `{"build":{"production":{"cache":{"key":"` + strings.Repeat("k", 129) + `"}}}}`},
	{name: "cache key astral", doc: `{"build":{"production":{"cache":{"key":"` + strings.Repeat("😀", 65) + `"}}}}`},
	{name: "appVersionSource remote", doc: `{"cli":{"appVersionSource":"remote"},"build":{"production":{}}}`},
	{name: "appVersionSource bad", doc: `{"cli":{"appVersionSource":"REMOTE"},"build":{"production":{}}}`},

	// Keys that depend on others.
	{name: "keystoreName with remote", doc: `{"build":{"production":{"android":{"credentialsSource":"remote","keystoreName":"k"}}}}`},
	{name: "keystoreName without credentialsSource", doc: `{"build":{"production":{"android":{"keystoreName":"k"}}}}`},
	{name: "keystoreName with common remote", doc: `{"build":{"production":{"credentialsSource":"remote","android":{"keystoreName":"k"}}}}`},
	{name: "keystoreName with local", doc: `{"build":{"production":{"android":{"credentialsSource":"local","keystoreName":"k"}}}}`},
	{name: "keystoreName common", doc: `{"build":{"production":{"keystoreName":"k"}}}`},
	{name: "artifactPath and applicationArchivePath", doc: `{"build":{"production":{"android":{"artifactPath":"a","applicationArchivePath":"b"}}}}`},
	{name: "artifactPath common", doc: `{"build":{"production":{"artifactPath":"a"}}}`},
	{name: "image bad type", doc: `{"build":{"production":{"ios":{"image":1}}}}`},

	// Unknown keys and types.
	{name: "typo in android", doc: `{"build":{"production":{"android":{"gradleComand":":app:x"}}}}`},
	{name: "unknown top", doc: `{"builds":{"production":{}}}`},
	{name: "unknown profile key", doc: `{"build":{"production":{"foo":"bar"}}}`},
	{name: "nested platform", doc: `{"build":{"production":{"android":{"android":{}}}}}`},
	{name: "extends in platform", doc: `{"build":{"production":{"android":{"extends":"x"}}}}`},
	{name: "many problems", doc: `{"build":{"production":{"node":"x","channel":"A","env":{"A":1},"android":{"buildType":"x","foo":1}}},"x":1}`},
	{name: "env number", doc: `{"build":{"production":{"env":{"A":1}}}}`},
	{name: "env empty string", doc: `{"build":{"production":{"env":{"A":""}}}}`},
	{name: "env empty key", doc: `{"build":{"production":{"env":{"":"x"}}}}`},
	{name: "empty profile name", profile: named(""), doc: `{"build":{"":{},"production":{}}}`},
	{name: "empty submit name", doc: `{"build":{"production":{}},"submit":{"":{}}}`},
	{name: "env null", doc: `{"build":{"production":{"env":null}}}`},
	{name: "env array", doc: `{"build":{"production":{"env":["A"]}}}`},
	{name: "profile null", doc: `{"build":{"production":null}}`},
	{name: "profile array", doc: `{"build":{"production":[]}}`},
	{name: "build array", doc: `{"build":[]}`},
	{name: "build null", doc: `{"build":null}`},
	{name: "root array", doc: `[]`},
	{name: "root string", doc: `"x"`},
	{name: "root number", doc: `1`},
	{name: "root null", doc: `null`},
	{name: "artifact paths not array", doc: `{"build":{"production":{"buildArtifactPaths":"a"}}}`},
	{name: "artifact paths bad items", doc: `{"build":{"production":{"buildArtifactPaths":[null,"",1]}}}`},
	{name: "extends null", doc: `{"build":{"production":{"extends":null}}}`},
	{name: "extends empty", doc: `{"build":{"production":{"extends":""}}}`},
	{name: "object as string", doc: `{"build":{"production":{"cache":"{\"key\":\"x\"}"}}}`},
	{name: "submit valid", doc: `{"build":{"production":{}},"submit":{"production":{"android":{"track":"beta","releaseStatus":"inProgress","rollout":0.5},"ios":{"appleId":"a@b.c","groups":["g"]}}}}`},
	{name: "submit rollout string", doc: `{"build":{"production":{}},"submit":{"production":{"android":{"releaseStatus":"inProgress","rollout":" 0.25 "}}}}`},
	{name: "submit rollout without status", doc: `{"build":{"production":{}},"submit":{"production":{"android":{"rollout":0.5}}}}`},
	{name: "submit rollout missing", doc: `{"build":{"production":{}},"submit":{"production":{"android":{"releaseStatus":"inProgress"}}}}`},
	{name: "submit rollout too big", doc: `{"build":{"production":{}},"submit":{"production":{"android":{"releaseStatus":"inProgress","rollout":2}}}}`},
	{name: "submit unknown", doc: `{"build":{"production":{}},"submit":{"production":{"web":{}}}}`},
	{name: "schema key", doc: `{"$schema":"https://example.com/eas.schema.json","build":{"production":{}}}`},

	// extends.
	{name: "extends merges env and sections", doc: `{"build":{"base":{"node":"18.0.0","env":{"A":"1","B":"1"},"android":{"buildType":"apk","env":{"P":"1"}},"ios":{"simulator":true}},
		"production":{"extends":"base","env":{"B":"2"},"android":{"gradleCommand":":app:x","env":{"Q":"2"}}}}}`},
	{name: "extends shallow cache", doc: `{"build":{"base":{"cache":{"key":"a","paths":["p"]}},"production":{"extends":"base","cache":{"disabled":true}}}}`},
	{name: "extends shallow arrays", doc: `{"build":{"base":{"buildArtifactPaths":["a"]},"production":{"extends":"base","buildArtifactPaths":["b"]}}}`},
	{name: "extends four hops", doc: `{"build":{"a":{"extends":"b","env":{"A":"a"}},"b":{"extends":"c","env":{"B":"b"}},"c":{"extends":"d","env":{"A":"c"}},"d":{"node":"1.0.0"},"production":{"extends":"a"}}}`},
	{name: "extends five hops", doc: `{"build":{"a":{"extends":"b"},"b":{"extends":"c"},"c":{"extends":"d"},"d":{"extends":"e"},"e":{},"production":{"extends":"a"}}}`},
	{name: "extends too deep and missing", doc: `{"build":{"a":{"extends":"b"},"b":{"extends":"c"},"c":{"extends":"d"},"d":{"extends":"nope"},"production":{"extends":"a"}}}`},
	{name: "extends self", doc: `{"build":{"production":{"extends":"production"}}}`},
	{name: "extends cycle", doc: `{"build":{"production":{"extends":"preview"},"preview":{"extends":"production"}}}`},
	{name: "extends missing", doc: `{"build":{"production":{"extends":"base"}}}`},
	{name: "extends missing deeper", doc: `{"build":{"production":{"extends":"base"},"base":{"extends":"gone"}}}`},
	{name: "missing profile", profile: named("staging"), doc: `{"build":{"production":{},"preview":{}}}`},
	{name: "missing default profile", doc: `{"build":{"preview":{}}}`},
	{name: "no build", doc: `{}`},
	{name: "no build named", profile: named("x"), doc: `{"cli":{}}`},
	{name: "numeric profile names order", profile: named("staging"), doc: `{"build":{"production":{},"2":{},"a":{},"1":{},"01":{}}}`},
	{name: "numeric profile resolves", profile: named("2"), doc: `{"build":{"production":{},"2":{"node":"1.0.0"}}}`},
	{name: "invalid profile not asked for", doc: `{"build":{"production":{},"other":{"node":"bad"}}}`},

	// JSON5 and syntax.
	{name: "json5 everything", doc: "// eas.json\n{\n  /* block */ build: {\n    production: {\n      env: { A: 'single', B: \"dq\", $C_1: 'it\\'s', },\n      channel: 'main', // trailing\n    },\n  },\n}\n"},
	{name: "json5 numbers ignored keys", doc: `{build:{production:{}},x:+1,y:.5,z:5.,h:0xFF,i:-Infinity,n:NaN,e:1e5,b:0b101,o:0o17}`},
	{name: "json5 escapes", doc: "{build:{production:{env:{A:'a\\\nb',B:'\\x41\\u0042\\q\\0',C:\"\\ud83d\\ude00\",D:'tab\there'}}}}"},
	{name: "json5 raw newline in string", doc: "{build:{production:{env:{A:'a\nb'}}}}"},
	{name: "json5 raw CR in string", doc: "{build:{production:{env:{A:'a\rb'}}}}"},
	{name: "json5 stray slash", doc: `{"build":{"production":{"env":{"A": / "x"}}}}`},
	{name: "json5 comment at end", doc: `{"build":{"production":{}}}//`},
	{name: "json5 comment at end with text", doc: `{"build":{"production":{}}}// x`},
	{name: "json5 unterminated block", doc: `{"build":{"production":{}}}/* x`},
	{name: "json5 bom", doc: "\ufeff{\"build\":{\"production\":{}}}"},
	{name: "json5 unicode spaces", doc: "\u00a0{\u2028\"build\"\u3000:{\"production\":{}}}\u2029"},
	{name: "json5 leading zero", doc: `{build:{production:{}},x:01}`},
	{name: "json5 minus NaN", doc: `{build:{production:{}},x:-NaN}`},
	{name: "json5 numeric key", doc: `{build:{production:{env:{1:"x"}}}}`},
	{name: "json5 garbage after", doc: `{build:{production:{}}}  x`},
	{name: "json5 double comma", doc: `{build:{production:{env:{A:'x',,}}}}`},
	{name: "json5 bad literal", doc: `{build:{production:{env:{A:nul}}}}`},
	{name: "json5 truex", doc: `{build:{production:{env:{A:truex}}}}`},
	{name: "json5 trailing comma array", doc: `{build:{production:{buildArtifactPaths:['a',]}}}`},
	{name: "json5 missing comma array", doc: `{build:{production:{buildArtifactPaths:['a' 'b']}}}`},
	{name: "json5 empty array comma", doc: `{build:{production:{buildArtifactPaths:[,]}}}`},
	{name: "json5 bad hex escape", doc: `{build:{production:{env:{A:'\xZZ'}}}}`},
	{name: "json5 short unicode escape", doc: `{build:{production:{env:{A:'\u12'}}}}`},
	{name: "json5 unterminated string", doc: `{build:{production:{env:{A:'abc`},
	{name: "json5 unclosed object", doc: `{"build":{"production":{}}`},
	{name: "json5 missing colon", doc: `{"build" {"production":{}}}`},
	{name: "json duplicate keys", doc: `{"build":{"production":{"env":{"A":"x"},"env":{"B":"y"}}}}`},
	{name: "json duplicate profiles order", profile: named("nope"), doc: `{"build":{"b":{},"a":{},"b":{"node":"1.0.0"}}}`},
	{name: "comments only", doc: "// nothing\n/* here */\n"},
	{name: "whitespace only", doc: " \n\t\n"},
	{name: "empty", doc: ""},
	{name: "unicode whitespace only", doc: "\u3000\ufeff"},
	{name: "json5 lone backslash end", doc: `{build:{production:{env:{A:'abc\`},
	{name: "json5 number pipe exponent", doc: `{build:{production:{}},x:1|5}`},
	{name: "json5 true as key", doc: `{true:{},build:{production:{}}}`},
	{name: "json5 infinity key value", doc: `{build:{production:{node:Infinity}}}`},
}

// TestDifferential compares this package with the real @expo/eas-json on
// the hand-written cases and on generated documents.
func TestDifferential(t *testing.T) {
	dir := installOracle(t)
	t.Run("hand-written", func(t *testing.T) { differentialHandWritten(t, dir) })
	t.Run("generated", func(t *testing.T) { differentialGenerated(t, dir) })
}

func differentialHandWritten(t *testing.T, dir string) {
	var cases []oracleCase
	var names []string
	for _, h := range handCases {
		platforms := []string{h.platform}
		if h.platform == "" {
			platforms = []string{"android", "ios"}
		}
		for _, p := range platforms {
			cases = append(cases, oracleCase{EasJSON: h.doc, Platform: p, Profile: h.profile})
			names = append(names, h.name+"/"+p)
		}
	}
	compareWithOracle(t, dir, cases, names)
}

func differentialGenerated(t *testing.T, dir string) {
	rng := rand.New(rand.NewPCG(12, 2024))
	var cases []oracleCase
	var names []string
	for i := range 1000 {
		g := &generator{rng: rng, valid: rng.IntN(10) < 7}
		doc, profiles := g.document()
		text := g.serialize(doc)
		if i%6 == 5 {
			text = g.corrupt(text)
		}
		platform := []string{"android", "ios"}[rng.IntN(2)]
		var profile *string
		switch r := rng.IntN(10); {
		case r < 3:
		case r < 9 && len(profiles) > 0:
			profile = named(profiles[rng.IntN(len(profiles))])
		default:
			profile = named("missing")
		}
		cases = append(cases, oracleCase{EasJSON: text, Platform: platform, Profile: profile})
		names = append(names, fmt.Sprintf("generated #%d", i))
	}
	compareWithOracle(t, dir, cases, names)
}

// A generated document is a tree of these: ordered objects, arrays and
// JSON scalars (nil is null).
type (
	gobj struct {
		keys []string
		vals []any
	}
	garr []any
)

func (o *gobj) set(k string, v any) {
	o.keys = append(o.keys, k)
	o.vals = append(o.vals, v)
}

type generator struct {
	rng *rand.Rand
	// valid: the document is meant to pass validation (it still may
	// fail to resolve: a missing parent, a cycle).
	valid bool
}

func (g *generator) pick(xs ...any) any { return xs[g.rng.IntN(len(xs))] }

func (g *generator) chance(p float64) bool { return g.rng.Float64() < p }

// value picks a value for a key: a valid one, or, in a document meant
// to have problems, sometimes a wrong one.
func (g *generator) value(key string, platform string) any {
	valid, invalid := g.pools(key, platform)
	if !g.valid && g.chance(0.2) {
		if len(invalid) == 0 || g.chance(0.3) {
			return g.pick(nil, 1, "", true, garr{}, &gobj{}, "1.x", "UPPER")
		}
		return g.pick(invalid...)
	}
	return g.pick(valid...)
}

// pools are the valid and the invalid values of a key.
func (g *generator) pools(key, platform string) (valid, invalid []any) {
	list := func(xs ...any) []any { return xs }
	switch key {
	case "resourceClass":
		if platform == "ios" {
			return list("default", "medium", "large", "m-medium", "m1-medium", "m-large"), list("huge")
		}
		return list("default", "medium", "large"), list("m-medium", "huge")
	case "env":
		o := &gobj{}
		for range g.rng.IntN(4) {
			v := g.pick("1", "x", "https://e.example", nil)
			if !g.valid && g.chance(0.2) {
				v = g.pick("", 2, true)
			}
			o.set(g.pick("A", "B", "C", "API_URL").(string), v)
		}
		return list(o), list(&gobj{keys: []string{""}, vals: []any{"x"}})
	case "node", "pnpm", "bun", "yarn", "expoCli", "ndk", "bundler", "fastlane", "cocoapods":
		return list("18.18.0", "v20.11.1", " 9.0.0 ", "1.0.0-rc.1", "1.2.3+b.1", nil), list("1.x", "20", "01.0.0", "", "^1.2.3")
	case "corepack", "developmentClient", "uploadSourceMaps", "withoutCredentials", "simulator":
		return list(true, false, true, false, "true", "FALSE"), list("yes", nil, 0)
	case "credentialsSource":
		return list("local", "remote", "remote"), list("none")
	case "distribution":
		return list("store", "internal", "internal"), list("simulator")
	case "releaseChannel", "channel":
		return list("main", "prod-1", "v1.2"), list("Main", "_x")
	case "prebuildCommand", "config", "image", "scheme", "buildConfiguration", "gradleCommand", "artifactPath", "applicationArchivePath", "keystoreName":
		return list("value", "a/b/*.apk", ":app:assembleStaging", "latest"), list("")
	case "autoIncrement":
		switch platform {
		case "android":
			return list(true, false, "version", "versionCode", "true"), list("buildNumber")
		case "ios":
			return list(true, false, "version", "buildNumber"), list("versionCode")
		}
		return list(true, false, "FALSE"), list("version")
	case "buildArtifactPaths":
		a := garr{}
		for range g.rng.IntN(3) {
			a = append(a, g.pick("a/**", "b.txt"))
		}
		return list(a), list(garr{""}, garr{nil}, "a")
	case "cache":
		o := &gobj{}
		for _, k := range []string{"disabled", "key", "cacheDefaultPaths", "customPaths", "paths"} {
			if g.chance(0.3) {
				switch k {
				case "key":
					o.set(k, g.pick("k", "node-modules-v2"))
				case "customPaths", "paths":
					o.set(k, garr{g.pick("a", "b/c")})
				default:
					o.set(k, g.pick(true, false, "true"))
				}
			}
		}
		return list(o), list(&gobj{keys: []string{"customPaths", "paths"}, vals: []any{garr{"a"}, garr{"b"}}})
	case "environment":
		return list("production", "preview", "development", "staging_1"), list("qa", "Prod")
	case "buildType":
		return list("apk", "app-bundle"), list("aab")
	case "enterpriseProvisioning":
		return list("adhoc", "universal"), list("enterprise")
	}
	return list("value"), nil
}

var (
	genCommonKeys  = []string{"resourceClass", "env", "node", "corepack", "pnpm", "bun", "yarn", "expoCli", "credentialsSource", "distribution", "releaseChannel", "channel", "developmentClient", "prebuildCommand", "autoIncrement", "buildArtifactPaths", "uploadSourceMaps", "cache", "config", "withoutCredentials", "environment"}
	genPlatformKey = []string{"image", "artifactPath", "applicationArchivePath"}
	genAndroidKeys = []string{"ndk", "gradleCommand", "buildType", "keystoreName"}
	genIOSKeys     = []string{"bundler", "fastlane", "cocoapods", "enterpriseProvisioning", "simulator", "scheme", "buildConfiguration"}
	genTypos       = []string{"gradleComand", "distrbution", "Node", "envs", "foo"}
)

func (g *generator) section(platform string) *gobj {
	keys := slices.Clone(genCommonKeys)
	switch platform {
	case "android":
		keys = append(append(keys, genPlatformKey...), genAndroidKeys...)
	case "ios":
		keys = append(append(keys, genPlatformKey...), genIOSKeys...)
	}
	o := &gobj{}
	for _, k := range keys {
		if g.chance(0.12) {
			o.set(k, g.value(k, platform))
		}
	}
	if platform == "android" && !slices.Contains(o.keys, "credentialsSource") && g.chance(0.3) {
		// keystoreName is valid only next to credentialsSource remote.
		o.set("credentialsSource", "remote")
		o.set("keystoreName", "upload")
	}
	if !g.valid && g.chance(0.1) {
		o.set(genTypos[g.rng.IntN(len(genTypos))], "x")
	}
	return o
}

// document returns a generated eas.json and its profile names.
func (g *generator) document() (*gobj, []string) {
	names := []string{"production", "preview", "development", "base", "e2e"}
	n := 1 + g.rng.IntN(len(names))
	profiles := slices.Clone(names[:n])
	g.rng.Shuffle(len(profiles), func(i, j int) { profiles[i], profiles[j] = profiles[j], profiles[i] })
	build := &gobj{}
	for _, name := range profiles {
		p := g.section("")
		if g.chance(0.4) {
			p.set("android", g.section("android"))
		}
		if g.chance(0.3) {
			p.set("ios", g.section("ios"))
		}
		if g.chance(0.45) {
			if g.valid || g.chance(0.9) {
				p.set("extends", profiles[g.rng.IntN(len(profiles))])
			} else {
				p.set("extends", "ghost")
			}
		}
		build.set(name, p)
	}
	doc := &gobj{}
	if g.chance(0.2) {
		cli := &gobj{}
		cli.set("appVersionSource", g.pick("local", "remote"))
		if g.chance(0.5) {
			cli.set("version", ">= 10.0.0")
		}
		doc.set("cli", cli)
	}
	doc.set("build", build)
	if g.chance(0.1) {
		sub := &gobj{}
		a := &gobj{}
		a.set("track", "internal")
		sub.set("production", &gobj{keys: []string{"android"}, vals: []any{a}})
		doc.set("submit", sub)
	}
	return doc, profiles
}

// serialize writes the document as JSON or, half the time, as JSON5
// with comments, unquoted or single-quoted keys and trailing commas.
func (g *generator) serialize(v any) string {
	var b strings.Builder
	json5 := g.chance(0.5)
	if json5 && g.chance(0.5) {
		b.WriteString("// generated\n")
	}
	g.write(&b, v, json5, 0)
	if json5 && g.chance(0.3) {
		b.WriteString("\n/* end */\n")
	}
	return b.String()
}

func (g *generator) write(b *strings.Builder, v any, json5 bool, depth int) {
	indent := "\n" + strings.Repeat("  ", depth+1)
	switch v := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(v))
	case int:
		b.WriteString(strconv.Itoa(v))
	case string:
		g.writeString(b, v, json5)
	case garr:
		b.WriteString("[")
		for i, x := range v {
			if i > 0 {
				b.WriteString(",")
			}
			g.write(b, x, json5, depth+1)
		}
		if json5 && len(v) > 0 && g.chance(0.3) {
			b.WriteString(",")
		}
		b.WriteString("]")
	case *gobj:
		b.WriteString("{")
		for i, k := range v.keys {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString(indent)
			if json5 && g.chance(0.2) {
				b.WriteString("/* c */ ")
			}
			if json5 && identRe.MatchString(k) && identRe.FindString(k) == k && g.chance(0.5) {
				b.WriteString(k)
			} else {
				g.writeString(b, k, json5)
			}
			b.WriteString(": ")
			g.write(b, v.vals[i], json5, depth+1)
			if json5 && g.chance(0.1) {
				b.WriteString(" // note")
				b.WriteString(indent)
			}
		}
		if json5 && len(v.keys) > 0 && g.chance(0.3) {
			b.WriteString(",")
		}
		b.WriteString("\n" + strings.Repeat("  ", depth) + "}")
	}
}

func (g *generator) writeString(b *strings.Builder, s string, json5 bool) {
	if !json5 || g.chance(0.5) {
		b.WriteString(strconv.Quote(s))
		return
	}
	b.WriteString("'" + strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), "'", `\'`) + "'")
}

// corrupt damages the text at a random place: the two parsers must agree
// on whether it still parses, and to what.
func (g *generator) corrupt(s string) string {
	if s == "" {
		return s
	}
	i := g.rng.IntN(len(s))
	switch g.rng.IntN(3) {
	case 0:
		return s[:i] + s[i+1:]
	case 1:
		return s[:i] + g.pick("{", "}", ",", ":", "'", `"`, "/", "*", "x", "0", "\\", "\n").(string) + s[i:]
	default:
		return s[:i]
	}
}
