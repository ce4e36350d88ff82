package launchd

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestToolchainEnvReachesTheBuild runs on a fake guest
// laid out like the Cirrus Labs Xcode image: PATH (with the JDK) and
// ANDROID_HOME are set only in the login profile, which a LaunchAgent never
// reads. The template script records them with freeagent-toolchain-env in
// a login shell; the launcher, started with the LaunchAgent's environment
// alone, must hand them to freeagent-vm.
func TestToolchainEnvReachesTheBuild(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash is needed for a login shell")
	}
	home := t.TempDir()
	jdk := filepath.Join(home, "jdk's") // a quote survives the env file
	tools := filepath.Join(home, "tools")
	sdk := filepath.Join(home, "android-sdk")
	for _, d := range []string{filepath.Join(jdk, "bin"), tools, filepath.Join(sdk, "platform-tools"), filepath.Join(sdk, "build-tools")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(path, body string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(jdk, "bin", "java"), "#!/bin/sh\n[ \"$1\" = -XshowSettings:properties ] && echo \"    java.home = "+jdk+"\" >&2\nexit 0\n")
	write(filepath.Join(tools, "xcodebuild"), "#!/bin/sh\necho Xcode 16.4\n")
	// As the image's ~/.zprofile (linked to ~/.profile) does; no JAVA_HOME.
	write(filepath.Join(home, ".profile"), "export PATH=\""+jdk+"/bin:"+tools+":$PATH\"\nexport ANDROID_HOME=$HOME/android-sdk\n")

	login := exec.Command(bash, "-l", "./guest/freeagent-toolchain-env")
	login.Env = []string{"HOME=" + home, "PATH=/usr/bin:/bin:/usr/sbin:/sbin"}
	envFile, err := login.Output()
	if err != nil {
		t.Fatalf("freeagent-toolchain-env: %v", err)
	}
	if !strings.Contains(string(envFile), "FREEAGENT_TEMPLATE_PLATFORMS='ios,android'\n") {
		t.Fatalf("platforms not found in:\n%s", envFile)
	}

	e := newLauncherEnv(t)
	write(e.env, string(envFile))
	os.MkdirAll(e.shared, 0o755)
	write(filepath.Join(e.shared, "freeagent-vm"), "#!/bin/sh\nprintf '%s|%s|%s' \"$JAVA_HOME\" \"$ANDROID_HOME\" \"$PATH\" > \""+e.out+"\"\n")
	launcher := exec.Command("./guest/freeagent-vm-launcher")
	launcher.Env = []string{"HOME=" + home, "USER=admin", "FREEAGENT_SHARED_DIR=" + e.shared, "FREEAGENT_VM_ENV=" + e.env, "FREEAGENT_LAUNCHER_WAIT=0"}
	for k, v := range GuestJob().EnvironmentVariables { // launchd's, nothing from a profile
		launcher.Env = append(launcher.Env, k+"="+v)
	}
	if out, err := launcher.CombinedOutput(); err != nil {
		t.Fatalf("launcher: %v\n%s", err, out)
	}
	got, _ := os.ReadFile(e.out)
	parts := strings.SplitN(string(got), "|", 3)
	if len(parts) != 3 || parts[0] != jdk || parts[1] != sdk || !strings.HasPrefix(parts[2], jdk+"/bin:"+tools+":") {
		t.Fatalf("the build saw JAVA_HOME|ANDROID_HOME|PATH = %q, want %s|%s|%s/bin:%s:…", got, jdk, sdk, jdk, tools)
	}
}
