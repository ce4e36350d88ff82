package vmbootstrap

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/freeagent-build/freeagent/internal/standins/fakegradle/fakegradletest"
	"github.com/freeagent-build/freeagent/internal/testsupport/expoapp"
	"github.com/freeagent-build/freeagent/internal/testsupport/testtool"
)

// TestTemplateReleaseSignedThroughRealWrapper signs Expo's SDK 55
// template (testdata/expo-default) as a production build: the real
// `expo prebuild`, then the gradlew it wrote, a /bin/sh script (dash on
// Debian, which drops environment variables with dots in their names), run
// as the pipeline runs it with the build's signing, onto the stand-in
// Gradle (internal/standins/fakegradle). The AAB must carry the team's
// certificate, not the template's debug key, and the log no password.
func TestTemplateReleaseSignedThroughRealWrapper(t *testing.T) {
	requireAndroidTools(t)
	testtool.Need(t, "node")
	gradleHome := fakegradletest.Install(t)
	project := expoapp.Project(t)
	expoapp.Prebuild(t, project, "android")
	team := newTeamKey(t, t.TempDir(), "JKS", "upload", "team-store-pw", "team-key-pw", "CN=Team Upload, O=Acme, C=US")
	script, err := writeGradleSigning(filepath.Join(t.TempDir(), "credentials"), team.ks)
	if err != nil {
		t.Fatal(err)
	}
	aab := filepath.Join(project, "android/app/build/outputs/bundle/release/app-release.aab")

	// Without the build's signing the template signs release with its
	// debug key, and the farm says so.
	log, err := gradle(t, project, []string{"GRADLE_USER_HOME=" + gradleHome}, ":app:bundleRelease")
	if err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	if err := verifyAndroidArtifact(aab, team.info); err == nil || !strings.Contains(err.Error(), "A release build signed with the debug key") {
		t.Errorf("unsigned by the farm: err = %v", err)
	}

	log, err = gradle(t, project, []string{"GRADLE_USER_HOME=" + gradleHome}, ":app:bundleRelease", "--init-script", script)
	if err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	if err := verifyAndroidArtifact(aab, team.info); err != nil {
		t.Error(err)
	}
	for _, pw := range []string{team.ks.KeystorePassword, team.ks.KeyPassword} {
		if strings.Contains(log, pw) {
			t.Errorf("the gradle log shows a password:\n%s", log)
		}
	}
}
