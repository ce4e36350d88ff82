package xcode

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func loadFixture(t testing.TB, name string) *Project {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	p, err := ParseProject(data)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return p
}

func TestTargetsOfAProjectWithExtensions(t *testing.T) {
	p := loadFixture(t, "app-with-extensions.pbxproj")
	got := p.Targets()
	want := []Target{
		{Name: "Shop", ProductType: ProductTypeApplication, Dependencies: []string{"NotificationService", "ShopKit", "ShopWidget"}, Configurations: []string{"Debug", "Release"}},
		{Name: "NotificationService", ProductType: ProductTypeAppExtension, Configurations: []string{"Debug", "Release"}},
		{Name: "ShopWidget", ProductType: ProductTypeAppExtension, Dependencies: []string{"ShopWidgetIntents"}, Configurations: []string{"Debug", "Release"}},
		{Name: "ShopKit", ProductType: ProductTypeFramework, Configurations: []string{"Debug", "Release"}},
		{Name: "ShopWidgetIntents", ProductType: ProductTypeAppExtension, Configurations: []string{"Debug", "Release"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Targets() =\n%+v\nwant\n%+v", got, want)
	}
}

func TestBundleIDsResolveVariables(t *testing.T) {
	p := loadFixture(t, "app-with-extensions.pbxproj")
	for _, c := range []struct{ target, config, want string }{
		{"Shop", "Release", "com.example.shop"},
		{"Shop", "Debug", "com.example.shop.debug"},
		{"NotificationService", "Release", "com.example.shop.NotificationService"},
		{"NotificationService", "Debug", "com.example.shop.debug.NotificationService"},
		{"ShopWidget", "Release", "com.example.shop.ShopWidget"},
		// Xcode's rfc1034identifier of the unquoted "Shop Widget"
		// (config-plugins keeps the quotes and answers "-Shop-Widget-").
		{"ShopWidget", "Debug", "com.example.shop.Shop-Widget"},
		{"ShopWidgetIntents", "Release", "com.example.shop.ShopWidget.intents"},
	} {
		got, err := p.BundleID(c.target, c.config)
		if err != nil || got != c.want {
			t.Errorf("BundleID(%s, %s) = %q, %v; want %q", c.target, c.config, got, err, c.want)
		}
	}
	if _, err := p.BundleID("Nope", "Release"); err == nil || !strings.Contains(err.Error(), `"Nope"`) {
		t.Errorf("BundleID of a missing target: %v", err)
	}
	if _, err := p.BundleID("Shop", "Staging"); err == nil || !strings.Contains(err.Error(), `"Staging"`) {
		t.Errorf("BundleID of a missing configuration: %v", err)
	}
}

func TestBundleIDFromProjectLevelSettings(t *testing.T) {
	data, _ := os.ReadFile(filepath.Join("testdata", "expo-prebuild.pbxproj"))
	data = bytes.Replace(data, []byte("PRODUCT_BUNDLE_IDENTIFIER = com.example.mycoolapp;\n\t\t\t\tPRODUCT_NAME = MyCoolApp;\n\t\t\t\tSWIFT_OBJC_BRIDGING_HEADER = \"MyCoolApp/MyCoolApp-Bridging-Header.h\";\n\t\t\t\tSWIFT_VERSION = 5.0;"),
		[]byte("PRODUCT_BUNDLE_IDENTIFIER = \"${BASE_ID}.$(TARGET_NAME:lower)\";\n\t\t\t\tSWIFT_VERSION = 5.0;"), 1)
	data = bytes.Replace(data, []byte("USE_HERMES = true;\n\t\t\t\tVALIDATE_PRODUCT = YES;"), []byte("BASE_ID = com.example;\n\t\t\t\tUSE_HERMES = true;\n\t\t\t\tVALIDATE_PRODUCT = YES;"), 1)
	p, err := ParseProject(data)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := p.BundleID("MyCoolApp", "Release"); err != nil || got != "com.example.mycoolapp" {
		t.Fatalf("BundleID = %q, %v", got, err)
	}
	if _, err := p.BundleID("MyCoolApp", "Debug"); err != nil {
		t.Fatalf("Debug keeps its own bundle id: %v", err)
	}
}

func TestBuildSettingsUnquoteAndJoinLists(t *testing.T) {
	p := loadFixture(t, "expo-prebuild.pbxproj")
	s, err := p.BuildSettings("MyCoolApp", "Release")
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{
		"OTHER_LDFLAGS":              "$(inherited) -ObjC -lc++",
		"SWIFT_OBJC_BRIDGING_HEADER": "MyCoolApp/MyCoolApp-Bridging-Header.h",
		"PRODUCT_BUNDLE_IDENTIFIER":  "com.example.mycoolapp",
		"IPHONEOS_DEPLOYMENT_TARGET": "15.1",
	} {
		if s[k] != want {
			t.Errorf("%s = %q, want %q", k, s[k], want)
		}
	}
}

// signedDiff returns the lines SetManualSigning added or removed.
func lineDiff(before, after []byte) (added, removed []string) {
	count := map[string]int{}
	for _, l := range strings.Split(string(before), "\n") {
		count[l]++
	}
	for _, l := range strings.Split(string(after), "\n") {
		if count[l] > 0 {
			count[l]--
			continue
		}
		added = append(added, strings.TrimSpace(l))
	}
	for l, n := range count {
		for range n {
			removed = append(removed, strings.TrimSpace(l))
		}
	}
	return added, removed
}

func TestSetManualSigningSplicesOnlyWhatItSets(t *testing.T) {
	p := loadFixture(t, "expo-prebuild.pbxproj")
	before := p.Bytes()
	err := p.SetManualSigning("MyCoolApp", "Release", Signing{TeamID: "ABCDE12345", ProfileName: "MyCoolApp App Store"})
	if err != nil {
		t.Fatal(err)
	}
	added, removed := lineDiff(before, p.Bytes())
	wantAdded := []string{
		"DevelopmentTeam = ABCDE12345;",
		"ProvisioningStyle = Manual;",
		`CODE_SIGN_IDENTITY = "iPhone Distribution";`,
		"CODE_SIGN_STYLE = Manual;",
		"DEVELOPMENT_TEAM = ABCDE12345;",
		`PROVISIONING_PROFILE_SPECIFIER = "MyCoolApp App Store";`,
	}
	if !reflect.DeepEqual(added, wantAdded) || len(removed) != 0 {
		t.Fatalf("added %q removed %q; want added %q", added, removed, wantAdded)
	}
	// Debug untouched; the project-level conditional identity kept, as
	// config-plugins keeps it.
	dbg, _ := p.BuildSettings("MyCoolApp", "Debug")
	if _, ok := dbg["CODE_SIGN_STYLE"]; ok {
		t.Error("Debug was signed too")
	}
	if !bytes.Contains(p.Bytes(), []byte(`"CODE_SIGN_IDENTITY[sdk=iphoneos*]" = "iPhone Developer";`)) {
		t.Error("the conditional CODE_SIGN_IDENTITY was removed")
	}
	// Idempotent: a second run replaces values in place.
	again := p.Bytes()
	if err := p.SetManualSigning("MyCoolApp", "Release", Signing{TeamID: "ABCDE12345", ProfileName: "MyCoolApp App Store"}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, p.Bytes()) {
		t.Error("signing twice changed the project")
	}
}

func TestSetManualSigningReplacesAndCreatesTargetAttributes(t *testing.T) {
	p := loadFixture(t, "app-with-extensions.pbxproj")
	for _, target := range []string{"Shop", "ShopWidget"} {
		if err := p.SetManualSigning(target, "Release", Signing{TeamID: "NEWTEAM999", ProfileName: target + ` "quoted" profile`, Identity: "Apple Distribution"}); err != nil {
			t.Fatal(err)
		}
	}
	text := string(p.Bytes())
	if strings.Contains(text, "ProvisioningStyle = Automatic;") || strings.Count(text, "DevelopmentTeam = NEWTEAM999;") != 2 {
		t.Fatalf("TargetAttributes not updated:\n%s", text)
	}
	// ShopWidget's entry did not exist: it is inserted in sorted position.
	if !strings.Contains(text, "\t\t\t\t\t5F6D2B203C4D5E6F70819203 = {\n\t\t\t\t\t\tDevelopmentTeam = NEWTEAM999;\n\t\t\t\t\t\tProvisioningStyle = Manual;\n\t\t\t\t\t};\n") {
		t.Fatalf("new TargetAttributes entry laid out wrongly:\n%s", text)
	}
	s, _ := p.BuildSettings("ShopWidget", "Release")
	if s["PROVISIONING_PROFILE_SPECIFIER"] != `ShopWidget "quoted" profile` || s["CODE_SIGN_IDENTITY"] != "Apple Distribution" || s["CODE_SIGN_STYLE"] != "Manual" || s["DEVELOPMENT_TEAM"] != "NEWTEAM999" {
		t.Fatalf("ShopWidget settings: %v", s)
	}
	if s, _ := p.BuildSettings("NotificationService", "Release"); s["CODE_SIGN_STYLE"] != "Automatic" {
		t.Fatalf("an unsigned target changed: %v", s)
	}
}

func TestSetManualSigningWithoutTargetAttributes(t *testing.T) {
	data, _ := os.ReadFile(filepath.Join("testdata", "expo-prebuild.pbxproj"))
	data = bytes.Replace(data, []byte("\t\t\t\tTargetAttributes = {\n\t\t\t\t\t13B07F861A680F5B00A75B9A = {\n\t\t\t\t\t\tLastSwiftMigration = 1250;\n\t\t\t\t\t};\n\t\t\t\t};\n"), nil, 1)
	p, err := ParseProject(data)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.SetManualSigning("MyCoolApp", "Release", Signing{TeamID: "ABCDE12345", ProfileName: "P"}); err != nil {
		t.Fatal(err)
	}
	want := "\t\t\tattributes = {\n\t\t\t\tLastUpgradeCheck = 1130;\n\t\t\t\tTargetAttributes = {\n\t\t\t\t\t13B07F861A680F5B00A75B9A = {\n\t\t\t\t\t\tDevelopmentTeam = ABCDE12345;\n\t\t\t\t\t\tProvisioningStyle = Manual;\n\t\t\t\t\t};\n\t\t\t\t};\n\t\t\t};\n"
	if !strings.Contains(string(p.Bytes()), want) {
		t.Fatalf("TargetAttributes not created as Xcode lays them out:\n%s", p.Bytes())
	}
}

func TestSetManualSigningErrors(t *testing.T) {
	p := loadFixture(t, "expo-prebuild.pbxproj")
	before := p.Bytes()
	if err := p.SetManualSigning("Other", "Release", Signing{TeamID: "T", ProfileName: "P"}); err == nil || !strings.Contains(err.Error(), `"Other"`) {
		t.Errorf("missing target: %v", err)
	}
	if err := p.SetManualSigning("MyCoolApp", "Staging", Signing{TeamID: "T", ProfileName: "P"}); err == nil || !strings.Contains(err.Error(), `"Staging"`) {
		t.Errorf("missing configuration: %v", err)
	}
	if !bytes.Equal(before, p.Bytes()) {
		t.Error("a failed SetManualSigning changed the project")
	}
}

func TestSaveWritesAtomically(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "App.xcodeproj")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(filepath.Join("testdata", "expo-prebuild.pbxproj"))
	if err := os.WriteFile(filepath.Join(dir, "project.pbxproj"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := LoadProject(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.SetManualSigning("MyCoolApp", "Release", Signing{TeamID: "ABCDE12345", ProfileName: "P"}); err != nil {
		t.Fatal(err)
	}
	if err := p.Save(dir); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("Save left %d files", len(entries))
	}
	q, err := LoadProject(dir)
	if err != nil || !bytes.Equal(q.Bytes(), p.Bytes()) {
		t.Fatalf("reloaded project differs: %v", err)
	}
}

func TestParseErrorsHaveLineAndColumn(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{"{\n  a = b\n}", "project.pbxproj:3:1: expected ';'"},
		{"{ a = \"unterminated; }", "project.pbxproj:1:7: string opened here is not closed"},
		{"{ objects = { x = ( a b ); }; }", "project.pbxproj:1:23: expected ',' or ')'"},
		{"{ a = <0g>; }", "project.pbxproj:1:9: unexpected 'g' in <data>"},
		{"/* open", "project.pbxproj:1:1: unterminated /* comment"},
		{strings.Repeat("(", 100), "nested deeper than 64"},
	} {
		_, err := ParseProject([]byte(c.text))
		var se *SyntaxError
		if !errors.As(err, &se) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseProject(%q) = %v, want %q", c.text, err, c.want)
		}
	}
}

func TestQuotedStringEscapes(t *testing.T) {
	n, err := parsePlist([]byte(`{ a = "x\"y\\z\n\t\U00e9\101"; b = 'single'; c = <0a 0B>; }`))
	if err != nil {
		t.Fatal(err)
	}
	if got := n.getString("a"); got != "x\"y\\z\n\té"+"A" {
		t.Errorf("a = %q", got)
	}
	if got := n.getString("b"); got != "single" {
		t.Errorf("b = %q", got)
	}
	if c := n.get("c"); c == nil || c.kind != kindData || c.str != "0a0B" {
		t.Errorf("c = %+v", c)
	}
	for _, s := range []string{"", "Manual", "a b", `q"q`, "back\\slash", "line\nbreak", "$(inherited)", "a//b", "com.x-y"} {
		m, err := parsePlist([]byte("{ k = " + quote(s) + "; }"))
		if err != nil || m.getString("k") != s {
			t.Errorf("quote(%q) = %s does not read back: %v", s, quote(s), err)
		}
	}
}

func TestSanitizedNameExamples(t *testing.T) {
	for in, want := range map[string]string{
		"My Cool App!":   "MyCoolApp",
		"Łódź café":      "Lodzcafe",
		"$":              "dollar",
		"🚀":              "app",
		"Привет мир":     "Privetmir",
		"123 go":         "123go",
		"ß straße":       "ssstrasse",
		"ÆØÅ":            "AEOA",
		"&":              "and",
		"hello_world-42": "helloworld42",
	} {
		if got := SanitizedName(in); got != want {
			t.Errorf("SanitizedName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestFindProjectAndWorkspace(t *testing.T) {
	dir := t.TempDir()
	if _, err := FindProject(dir); err == nil {
		t.Error("FindProject in an empty directory succeeded")
	}
	for _, d := range []string{"Pods.xcodeproj", "App.xcodeproj", "Pods.xcworkspace"} {
		os.MkdirAll(filepath.Join(dir, d), 0o755)
	}
	if got, err := FindProject(dir); err != nil || got != filepath.Join(dir, "App.xcodeproj") {
		t.Errorf("FindProject = %q, %v", got, err)
	}
	if got, err := FindWorkspace(dir); err != nil || got != "" {
		t.Errorf("FindWorkspace without one = %q, %v", got, err)
	}
	os.MkdirAll(filepath.Join(dir, "App.xcworkspace"), 0o755)
	if got, err := FindWorkspace(dir); err != nil || got != filepath.Join(dir, "App.xcworkspace") {
		t.Errorf("FindWorkspace = %q, %v", got, err)
	}
	os.MkdirAll(filepath.Join(dir, "Other.xcodeproj"), 0o755)
	if _, err := FindProject(dir); err == nil || !strings.Contains(err.Error(), "several") {
		t.Errorf("FindProject with two projects: %v", err)
	}
}

const schemeXML = `<?xml version="1.0" encoding="UTF-8"?>
<Scheme LastUpgradeVersion = "1500" version = "1.7">
   <BuildAction parallelizeBuildables = "YES" buildImplicitDependencies = "YES">
      <BuildActionEntries>
%s
      </BuildActionEntries>
   </BuildAction>
   <ArchiveAction buildConfiguration = "%s" revealArchiveInOrganizer = "YES">
   </ArchiveAction>
</Scheme>
`

func schemeEntry(target, product string) string {
	return `         <BuildActionEntry buildForTesting = "YES" buildForRunning = "YES" buildForProfiling = "YES" buildForArchiving = "YES" buildForAnalyzing = "YES">
            <BuildableReference BuildableIdentifier = "primary" BlueprintIdentifier = "13B07F861A680F5B00A75B9A" BuildableName = "` + product + `" BlueprintName = "` + target + `" ReferencedContainer = "container:App.xcodeproj">
            </BuildableReference>
         </BuildActionEntry>`
}

// writeProject lays out an .xcodeproj with the fixture and shared
// schemes (name → scheme XML).
func writeProject(t testing.TB, dir, fixture string, schemes map[string]string) string {
	t.Helper()
	proj := filepath.Join(dir, "App.xcodeproj")
	if err := os.MkdirAll(filepath.Join(proj, "xcshareddata", "xcschemes"), 0o755); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join("testdata", fixture))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(proj, "project.pbxproj"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	for name, x := range schemes {
		if err := os.WriteFile(filepath.Join(proj, "xcshareddata", "xcschemes", name+".xcscheme"), []byte(x), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return proj
}

func TestSchemesAndAppTargets(t *testing.T) {
	proj := writeProject(t, t.TempDir(), "app-with-extensions.pbxproj", map[string]string{
		"Shop":      sprintf(schemeXML, schemeEntry("ShopKit", "ShopKit.framework")+"\n"+schemeEntry("Shop", "Shop.app"), "Release"),
		"ShopTests": sprintf(schemeXML, schemeEntry("ShopKit", "ShopKit.framework")+"\n"+schemeEntry("ShopWidget", "ShopWidget.appex"), "Debug"),
		"Shop-tvOS": sprintf(schemeXML, schemeEntry("Shop", "Shop.app"), "Release"),
	})
	names, err := Schemes(proj)
	if err != nil || !reflect.DeepEqual(names, []string{"Shop", "Shop-tvOS", "ShopTests"}) {
		t.Fatalf("Schemes = %q, %v", names, err)
	}
	s, err := LoadScheme(proj, "shop") // case-insensitive, as config-plugins
	if err != nil {
		t.Fatal(err)
	}
	want := Scheme{Name: "Shop", BuildTargets: []string{"ShopKit", "Shop"}, ArchiveConfiguration: "Release", AppTarget: "Shop"}
	if !reflect.DeepEqual(s, want) {
		t.Fatalf("LoadScheme = %+v, want %+v", s, want)
	}
	p, err := LoadProject(proj)
	if err != nil {
		t.Fatal(err)
	}
	targets, err := AppTargets(p, s)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, t := range targets {
		got = append(got, t.Name)
	}
	// Depth first in dependency order; the framework is not signed.
	if !reflect.DeepEqual(got, []string{"Shop", "NotificationService", "ShopWidget", "ShopWidgetIntents"}) {
		t.Fatalf("AppTargets = %q", got)
	}
	tests, err := LoadScheme(proj, "ShopTests")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := AppTargets(p, tests); err == nil || !strings.Contains(err.Error(), "corrupted") {
		t.Fatalf("AppTargets of a scheme without an .app: %v", err)
	}
	if _, err := LoadScheme(proj, "Missing"); err == nil || !strings.Contains(err.Error(), "marked as shared") {
		t.Fatalf("LoadScheme of a missing scheme: %v", err)
	}
}

func TestPickScheme(t *testing.T) {
	if _, err := PickScheme(nil); !errors.Is(err, ErrNoSchemes) {
		t.Errorf("no schemes: %v", err)
	}
	for _, c := range []struct {
		in   []string
		want string
	}{
		{[]string{"only-tvOS"}, "only-tvOS"},
		{[]string{"b", "a"}, "a"},
		{[]string{"App-tvOS", "App"}, "App"},
		{[]string{"A-tvOS", "B"}, "B"},
		{[]string{"Z-tvOS", "A-tvOS"}, "A-tvOS"},
		{[]string{"b", "B", "a"}, "B"},
	} {
		if got, err := PickScheme(c.in); err != nil || got != c.want {
			t.Errorf("PickScheme(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }
