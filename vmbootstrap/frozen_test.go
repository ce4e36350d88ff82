package vmbootstrap

import (
	"context"
	"strings"
	"testing"

	"github.com/freeagent-build/freeagent/api"
)

// TestFrozenInstallRule runs the install step of the Android pipeline
// (stand-in npm) and checks the install it chose against EAS Build's rule:
// frozen unless EAS_NO_FROZEN_LOCKFILE is set (to anything, "0" too, as
// JavaScript reads it), the Expo SDK is before 53 or React Native before
// 0.79. The developer's versions (the spec's) come before package.json's.
func TestFrozenInstallRule(t *testing.T) {
	t.Parallel()
	const frozen, unfrozen = "▸ npm ci --include=dev\n", "▸ npm install --include=dev\n"
	pkg := func(expo, rn string) string {
		return `{"name":"app","dependencies":{"expo":"` + expo + `","react-native":"` + rn + `"}}`
	}
	cases := []struct {
		name    string
		pkg     string
		app     api.App
		env     []string
		want    string
		because string
	}{
		{name: "SDK 55 and React Native 0.83", pkg: pkg("~55.0.31", "0.83.10"), want: frozen},
		{name: "SDK 52", pkg: pkg("~52.0.0", "0.76.9"), want: unfrozen, because: "Expo SDK 52.0.0 (package.json's expo) is older than 53"},
		{name: "SDK 53 with React Native 0.78", pkg: pkg("^53.0.0", "0.78.2"), want: unfrozen, because: "React Native 0.78.2 (package.json's react-native) is older than 0.79"},
		{name: "EAS_NO_FROZEN_LOCKFILE=1", pkg: pkg("~55.0.31", "0.83.10"), env: []string{"EAS_NO_FROZEN_LOCKFILE=1"}, want: unfrozen, because: "EAS_NO_FROZEN_LOCKFILE is set"},
		{name: "EAS_NO_FROZEN_LOCKFILE=0 is set too", pkg: pkg("~55.0.31", "0.83.10"), env: []string{"EAS_NO_FROZEN_LOCKFILE=0"}, want: unfrozen},
		{name: "EAS_NO_FROZEN_LOCKFILE empty", pkg: pkg("~55.0.31", "0.83.10"), env: []string{"EAS_NO_FROZEN_LOCKFILE="}, want: frozen},
		{name: "the developer's SDK first", pkg: pkg("~55.0.31", "0.83.10"), app: api.App{SDKVersion: "52.0.0"}, want: unfrozen, because: "Expo SDK 52.0.0 (the app config's sdkVersion)"},
		{name: "the installed React Native first", pkg: pkg("~55.0.31", "^0.78.0"), app: api.App{ReactNativeVersion: "0.83.10"}, want: frozen},
		{name: "a React Native pre-release", pkg: pkg("~55.0.31", "0.83.10"), app: api.App{ReactNativeVersion: "0.79.0-rc.3"}, want: unfrozen},
		{name: "versions unknown", pkg: `{"name":"app","dependencies":{"expo":"latest"}}`, want: frozen},
		{name: "no dependencies", pkg: `{"name":"app"}`, want: frozen},
		{name: "a dependency list EAS cannot read", pkg: `{"name":"app","dependencies":{"expo":"~52.0.0","x":1}}`, want: frozen},
		{name: "devDependencies", pkg: `{"name":"app","devDependencies":{"react-native":"0.74.0"}}`, want: unfrozen},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			p, out, _ := newTestPipeline(t, api.PlatformAndroid, map[string]string{"package.json": c.pkg, "package-lock.json": "{}"}, nil)
			p.spec.App = c.app
			p.runner.env = mergeEnv(p.runner.env, c.env...)
			if err := p.install(context.Background()); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			log := out.String()
			if !strings.Contains(log, c.want) {
				t.Fatalf("want %q:\n%s", c.want, log)
			}
			if c.because != "" && !strings.Contains(log, "▸ the install is not frozen, as on EAS: "+c.because) {
				t.Fatalf("the log does not say why the install is not frozen (%q):\n%s", c.because, log)
			}
		})
	}
}

func TestCoerceVersion(t *testing.T) {
	for in, want := range map[string]string{
		"~55.0.31": "55.0.31", "^0.79": "0.79.0", "0.83.10": "0.83.10", ">=53.0.0 <54": "53.0.0", "53": "53.0.0",
		"npm:react-native-tvos@0.79.1-0": "0.79.1", "latest": "", "": "", "v52.1.2-beta.1": "52.1.2",
		"1234567890123456789.0.0": "0.0.0", "9999999999999999.0.0": "", // as node-semver: 16 digits at most, then JavaScript's safe integers
	} {
		if got := coerceVersion(in); got != want {
			t.Errorf("coerceVersion(%q) = %q, want %q", in, got, want)
		}
	}
}
