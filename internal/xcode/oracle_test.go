package xcode

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/internal/npmoracle"
)

// The differential tests run the real @expo/config-plugins 58.0.2 and its
// `xcode` 3.0.1 parser (pinned in testdata/oracle/package-lock.json) on
// the same projects, names and scheme lists as this package. They need
// node, npm and the npm registry; XCODE_SKIP_ORACLE=1 skips them.

func installOracle(t *testing.T) string {
	return npmoracle.Install(t, filepath.Join("testdata", "oracle"), "@expo/config-plugins")
}

type signOp struct {
	Target   string `json:"target"`
	Config   string `json:"config"`
	Team     string `json:"team"`
	Profile  string `json:"profile"`
	Identity string `json:"identity,omitempty"`
}

type query struct {
	Target string `json:"target"`
	Config string `json:"config"`
}

type projectCase struct {
	Name            string   `json:"-"`
	Pbxproj         string   `json:"pbxproj"`
	Scheme          string   `json:"scheme"`
	SchemeName      string   `json:"schemeName"`
	BundleIDQueries []query  `json:"bundleIdQueries"`
	Sign            []signOp `json:"sign,omitempty"`
	Ours            string   `json:"ours,omitempty"`
}

type projectDump struct {
	Settings   map[string]map[string]string `json:"settings"`
	Attributes map[string]map[string]string `json:"attributes"`
}

type projectAnswer struct {
	Targets              []struct{ Name, ProductType string } `json:"targets"`
	AppTargets           []string                             `json:"appTargets"`
	AppTargetsError      string                               `json:"appTargetsError"`
	ArchiveConfiguration string                               `json:"archiveConfiguration"`
	BundleIDs            []string                             `json:"bundleIds"`
	SignedText           string                               `json:"signedText"`
	SignedDump           projectDump                          `json:"signedDump"`
	OursDump             projectDump                          `json:"oursDump"`
}

type oracleInput struct {
	Projects    []projectCase `json:"projects"`
	Names       []string      `json:"names"`
	SchemeLists [][]string    `json:"schemeLists"`
}

type oracleOutput struct {
	Projects []projectAnswer `json:"projects"`
	Names    []string        `json:"names"`
	Schemes  []struct {
		Scheme string `json:"scheme"`
		Error  bool   `json:"error"`
	} `json:"schemes"`
}

func runOracle(t *testing.T, dir string, in oracleInput) oracleOutput {
	t.Helper()
	data, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "oracle.js")
	cmd.Dir = dir
	cmd.Stdin = bytes.NewReader(data)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node oracle.js: %v\n%s", err, stderr.Bytes())
	}
	var res oracleOutput
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("oracle output: %v", err)
	}
	if len(res.Projects) != len(in.Projects) || len(res.Names) != len(in.Names) || len(res.Schemes) != len(in.SchemeLists) {
		t.Fatal("the oracle did not answer every case")
	}
	return res
}

// Bundle identifier templates that config-plugins and Xcode read alike:
// the variables they reference are the target's own and unquoted.
var bundleTemplates = []string{
	"com.example.plain",
	`"com.example.$(BASE)"`,
	`"$(BASE).ext"`,
	`"com.example.$(BASE:rfc1034identifier)"`,
	`"com.example.$(BASE:lower)"`,
	`"com.example.$(BASE:upper).x"`,
	`"com.example.$(MISSING:default=fallback)"`,
	`"com.$(BASE:lower:rfc1034identifier)"`,
	`"com.example.$(BASE:suffix)"`,
	`"com.example.$(BASE:base)"`,
}

var bundleIDLine = regexp.MustCompile(`(?m)^(\t+)PRODUCT_BUNDLE_IDENTIFIER = [^;]*;$`)

// variant rewrites every PRODUCT_BUNDLE_IDENTIFIER of a fixture with a
// random template and the unquoted variables it uses, and drops some
// TargetAttributes entries.
func variant(r *rand.Rand, text string) string {
	text = bundleIDLine.ReplaceAllStringFunc(text, func(line string) string {
		indent := line[:strings.Index(line, "P")]
		base := []string{"MyApp", "my_app", "App2", "com.x.Widget", "Notif.Service", "shop"}[r.IntN(6)]
		return indent + "BASE = " + base + ";\n" +
			indent + "PRODUCT_BUNDLE_IDENTIFIER = " + bundleTemplates[r.IntN(len(bundleTemplates))] + ";"
	})
	if r.IntN(2) == 0 {
		// Drop the attributes of the first target listed.
		text = regexp.MustCompile(`(?s)(TargetAttributes = \{\n)\t+[0-9A-F]{24} = \{.*?\n\t+\};\n`).ReplaceAllString(text, "$1")
	}
	return text
}

func TestDifferentialProjects(t *testing.T) {
	dir := installOracle(t)
	r := rand.New(rand.NewPCG(13, 1))
	fixtures := []struct {
		file, app string
		entries   string // scheme build entries
	}{
		{"expo-prebuild.pbxproj", "MyCoolApp", schemeEntry("MyCoolApp", "MyCoolApp.app")},
		{"app-with-extensions.pbxproj", "Shop", schemeEntry("ShopKit", "ShopKit.framework") + "\n" + schemeEntry("Shop", "Shop.app")},
		{"eas-cli-testproject.pbxproj", "testproject", schemeEntry("testproject", "testproject.app")},
	}
	var cases []projectCase
	for _, f := range fixtures {
		data, err := os.ReadFile(filepath.Join("testdata", f.file))
		if err != nil {
			t.Fatal(err)
		}
		for i := range 40 {
			text := string(data)
			if i > 0 {
				text = variant(r, text)
			}
			p, err := ParseProject([]byte(text))
			if err != nil {
				t.Fatalf("%s variant %d: %v", f.file, i, err)
			}
			c := projectCase{Name: fmt.Sprintf("%s#%d", f.file, i), Pbxproj: text, SchemeName: f.app,
				Scheme: fmt.Sprintf(schemeXML, f.entries, []string{"Release", "Debug"}[i%2])}
			var targets []string
			for _, tg := range p.Targets() {
				targets = append(targets, tg.Name)
				for _, conf := range tg.Configurations {
					c.BundleIDQueries = append(c.BundleIDQueries, query{tg.Name, conf})
				}
			}
			// Sign a random subset, some twice.
			for range 1 + r.IntN(4) {
				tg := p.Targets()[r.IntN(len(targets))]
				op := signOp{
					Target:   tg.Name,
					Config:   tg.Configurations[r.IntN(len(tg.Configurations))],
					Team:     []string{"ABCDE12345", "QQQQ9Z8Y7X"}[r.IntN(2)],
					Profile:  []string{"match AppStore com.example", "Ad Hoc (2025)", "profile-1", "*[expo] com.x AppStore 2024-01-01T00:00:00.000Z"}[r.IntN(4)],
					Identity: []string{"", "Apple Distribution", "iPhone Developer"}[r.IntN(3)],
				}
				c.Sign = append(c.Sign, op)
				if err := p.SetManualSigning(op.Target, op.Config, Signing{TeamID: op.Team, ProfileName: op.Profile, Identity: op.Identity}); err != nil {
					t.Fatalf("%s: %v", c.Name, err)
				}
			}
			c.Ours = string(p.Bytes())
			cases = append(cases, c)
		}
	}
	res := runOracle(t, dir, oracleInput{Projects: cases})
	compared := map[string]int{}
	for i, c := range cases {
		want := res.Projects[i]
		p, err := ParseProject([]byte(c.Pbxproj))
		if err != nil {
			t.Fatal(err)
		}
		// (a) targets, the app target with its dependencies, bundle ids.
		var got []struct{ Name, ProductType string }
		for _, tg := range p.Targets() {
			got = append(got, struct{ Name, ProductType string }{tg.Name, tg.ProductType})
		}
		if !reflect.DeepEqual(got, want.Targets) {
			t.Errorf("%s: Targets() = %v, config-plugins %v", c.Name, got, want.Targets)
		}
		compared["targets"]++
		dirp := t.TempDir()
		proj := writeProjectText(t, dirp, c.Pbxproj, map[string]string{c.SchemeName: c.Scheme})
		s, err := LoadScheme(proj, c.SchemeName)
		if err != nil {
			t.Fatal(err)
		}
		if s.ArchiveConfiguration != want.ArchiveConfiguration {
			t.Errorf("%s: ArchiveConfiguration = %q, config-plugins %q", c.Name, s.ArchiveConfiguration, want.ArchiveConfiguration)
		}
		apps, err := AppTargets(p, s)
		var names []string
		for _, a := range apps {
			names = append(names, a.Name)
		}
		if (err != nil) != (want.AppTargetsError != "") || !slices.Equal(names, want.AppTargets) {
			t.Errorf("%s: AppTargets = %q, %v; config-plugins + eas-cli %q %s", c.Name, names, err, want.AppTargets, want.AppTargetsError)
		}
		compared["app targets"]++
		for j, q := range c.BundleIDQueries {
			id, err := p.BundleID(q.Target, q.Config)
			if err != nil {
				id = ""
			}
			if k := knownBundleIDDivergence[c.Name+" "+q.Target+"/"+q.Config]; k != [2]string{} {
				if id != k[0] || want.BundleIDs[j] != k[1] {
					t.Errorf("%s: BundleID(%s, %s) = %q, config-plugins %q; want the known %q vs %q", c.Name, q.Target, q.Config, id, want.BundleIDs[j], k[0], k[1])
				}
			} else if id != want.BundleIDs[j] {
				t.Errorf("%s: BundleID(%s, %s) = %q, config-plugins %q", c.Name, q.Target, q.Config, id, want.BundleIDs[j])
			}
			compared["bundle ids"]++
		}
		// (b) the settings after signing, read by the xcode package...
		if !reflect.DeepEqual(want.OursDump, want.SignedDump) {
			t.Errorf("%s: after signing, the xcode package reads\nours   %v\noracle %v", c.Name, want.OursDump, want.SignedDump)
		}
		// ... and by our parser.
		theirs, err := ParseProject([]byte(want.SignedText))
		if err != nil {
			t.Fatalf("%s: our parser cannot read config-plugins' output: %v", c.Name, err)
		}
		ours, _ := ParseProject([]byte(c.Ours))
		if a, b := signedView(ours), signedView(theirs); !reflect.DeepEqual(a, b) {
			t.Errorf("%s: after signing, our parser reads\nours   %v\noracle %v", c.Name, a, b)
		}
		compared["signed projects"]++
	}
	t.Logf("compared with @expo/config-plugins: %v", compared)
}

// knownBundleIDDivergence lists where BundleID answers as Xcode does and
// config-plugins does not: it looks a quoted value up with its quotes, so
// $(PRODUCT_NAME:rfc1034identifier) of "Shop Widget" turns the quotes into
// dashes. [ours, config-plugins'].
var knownBundleIDDivergence = map[string][2]string{
	"app-with-extensions.pbxproj#0 ShopWidget/Debug": {"com.example.shop.Shop-Widget", "com.example.shop.-Shop-Widget-"},
}

// signedView is every configuration's settings and the TargetAttributes,
// by target name, as this package reads them.
func signedView(p *Project) map[string]map[string]string {
	out := map[string]map[string]string{}
	_, proj := p.rootProject()
	ta := proj.get("attributes").get("TargetAttributes")
	for _, t := range p.nativeTargets() {
		name := t.node.getString("name")
		for _, c := range p.configurations(t.node.getString("buildConfigurationList")) {
			out[name+"/"+c.getString("name")] = settingsMap(c.get("buildSettings"))
		}
		if a := ta.get(t.id); a != nil {
			out["attributes:"+name] = settingsMap(a)
		}
	}
	return out
}

func writeProjectText(t *testing.T, dir, text string, schemes map[string]string) string {
	t.Helper()
	proj := filepath.Join(dir, "App.xcodeproj")
	if err := os.MkdirAll(filepath.Join(proj, "xcshareddata", "xcschemes"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(proj, "project.pbxproj"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, x := range schemes {
		if err := os.WriteFile(filepath.Join(proj, "xcshareddata", "xcschemes", name+".xcscheme"), []byte(x), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return proj
}

// randomName draws an app name from scripts, symbols and marks that
// exercise sanitizedName's steps.
func randomName(r *rand.Rand) string {
	pools := []string{
		"abcXYZ019", "  -_.!?", "éèêëÉàâäÀçÇñÑøØåÅæÆœŒß", "ŁłĆćŹźŻżĘęŚśŃńÓó", "ПриветмирЙйЁё", "αβγΔΩάέήΐ",
		"日本語漢字", "한국어", "🚀🎉👍🏽", "$%&<>|€£¥©®™♥∞", "ﬁﬂ½²ⅣǅǈＡＢＣ１２", "e\u0301a\u0308o\u0303", "مرحبا", "ÞþÐð", "\u200b\u00a0\t",
	}
	var b strings.Builder
	for range 1 + r.IntN(12) {
		pool := []rune(pools[r.IntN(len(pools))])
		b.WriteRune(pool[r.IntN(len(pool))])
	}
	return b.String()
}

func TestDifferentialNamesAndSchemes(t *testing.T) {
	dir := installOracle(t)
	r := rand.New(rand.NewPCG(13, 2))
	names := []string{"", "My App", "123", "$", "&", "🚀", "Ċao", "ǅemal", "½ life", "ｆｕｌｌ"}
	for range 400 {
		names = append(names, randomName(r))
	}
	pool := []string{"App", "App-tvOS", "app", "tvOS", "Ä", "Z", "App Dev", "Widget", "AppTVOS", "a-tvOS-b", "😀", "ＡＢ", "_x", "App.tvOS"}
	var lists [][]string
	lists = append(lists, []string{}, []string{"tvOS"})
	for range 300 {
		l := []string{}
		for range r.IntN(6) {
			l = append(l, pool[r.IntN(len(pool))])
		}
		lists = append(lists, l)
	}
	res := runOracle(t, dir, oracleInput{Names: names, SchemeLists: lists})
	for i, n := range names {
		if got := SanitizedName(n); got != res.Names[i] {
			t.Errorf("SanitizedName(%q) = %q, config-plugins %q", n, got, res.Names[i])
		}
	}
	for i, l := range lists {
		got, err := PickScheme(l)
		if (err != nil) != res.Schemes[i].Error || got != res.Schemes[i].Scheme {
			t.Errorf("PickScheme(%q) = %q, %v; eas-cli %+v", l, got, err, res.Schemes[i])
		}
	}
	t.Logf("compared with @expo/config-plugins: %d names, %d scheme lists", len(names), len(lists))
}
