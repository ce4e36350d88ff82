package xcode

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzParseProject checks that no input panics the parser or the editor,
// and that an edit of a parsed project leaves a parseable project.
func FuzzParseProject(f *testing.F) {
	for _, name := range []string{"expo-prebuild.pbxproj", "app-with-extensions.pbxproj"} {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{ objects = { A = { isa = PBXNativeTarget; name = "x\U00e9"; }; }; rootObject = A; }`))
	f.Add([]byte(`{ a = ( b, <0a0b>, 'c', ); // x` + "\n" + `}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParseProject(data)
		if err != nil {
			return
		}
		for _, target := range p.Targets() {
			for _, c := range target.Configurations {
				p.BuildSettings(target.Name, c)
				p.BundleID(target.Name, c)
			}
			AppTargets(p, Scheme{Name: "S", AppTarget: target.Name})
		}
		// One edit (each re-parses the project).
		if targets := p.Targets(); len(targets) > 0 && len(targets[0].Configurations) > 0 {
			if err := p.SetManualSigning(targets[0].Name, targets[0].Configurations[0], Signing{TeamID: "T", ProfileName: "P"}); err == nil {
				if _, err := ParseProject(p.Bytes()); err != nil {
					t.Fatalf("signed project does not parse: %v", err)
				}
			}
		}
	})
}
