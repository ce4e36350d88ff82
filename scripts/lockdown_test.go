package scripts

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// lockdownStubs are the macOS commands the template's lockdown runs, as
// shell scripts that log their arguments to $LOG. dscl -authonly accepts
// only the password in $PWFILE; sysadminctl -resetPasswordFor writes it
// there unless $RESET_FAILS (macOS 26's dscl -passwd never changed it);
// launchctl reports sshd disabled unless $SSHD_ENABLED. su as the
// auto-login user may start commands as the build user, and root's
// launchctl asuser only for the build user's session (unless
// $NO_SESSION, or everything with $ROOT_LAUNCHCTL). The login
// keychain $KEYCHAIN holds its password; security re-keys it given the
// right old password, unless $REKEY_FAILS.
var lockdownStubs = map[string]string{
	"sudo": `[ "$1" = -n ] && shift; [ "$1" = -u ] && shift 2; exec "$@"`,
	"su": `case "$3" in
*"launchctl asuser 502 /usr/bin/sudo -n -u freeagent-build -- /bin/launchctl manageruid") [ -z "$NO_SESSION" ] && echo 502 ;;
*"launchctl asuser"*) [ -n "$ROOT_LAUNCHCTL" ] ;; # root only for the build user's session
*"-u "*) exit 0 ;; # the build user yes
*) exit 1 ;; # passwordless sudo no
esac`,
	"id":        `[ "$1" = -u ] && [ "$2" = freeagent-build ] && echo 502`,
	"visudo":    `echo "visudo $*" >>"$LOG"`,
	"shutdown":  `echo "shutdown $*" >>"$LOG"`,
	"defaults":  `echo admin`,
	"launchctl": `echo "launchctl $*" >>"$LOG"; [ "$1" = print-disabled ] && [ -z "$SSHD_ENABLED" ] && echo '	"com.openssh.sshd" => disabled'; exit 0`,
	"dscl":      `echo "dscl $*" >>"$LOG"; [ "$2" = -authonly ] || exit 0; [ "$4" = "$(cat "$PWFILE")" ]`,
	"sysadminctl": `echo "sysadminctl $*" >>"$LOG"
if [ "$1" = -resetPasswordFor ] && [ -z "$RESET_FAILS" ]; then printf %s "$4" >"$PWFILE"; fi`,
	"security": `echo "security $1" >>"$LOG"; kc=$(eval echo "\${$#}")
case "$1" in
set-keychain-password) [ -z "$REKEY_FAILS" ] && [ "$3" = "$(cat "$kc")" ] && printf %s "$5" >"$kc" ;;
unlock-keychain) [ "$3" = "$(cat "$kc")" ] ;;
esac`,
	"base64": `if [ "$1" = -D ]; then exec /usr/bin/base64 -d; else exec /usr/bin/base64 "$@"; fi`,
}

// TestTemplateLockdown runs the last step of build-vm-template.sh (from
// the well-known password's encoding to the handling of its failure) with
// the guest's commands stubbed: the image's password must stop working,
// sshd must be off, and a lockdown that fails deletes the template.
func TestTemplateLockdown(t *testing.T) {
	script, err := os.ReadFile("build-vm-template.sh")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(script), "\n")
	from := -1
	var step []string
	for i, l := range lines {
		if strings.HasPrefix(l, "known_b64=") {
			from = i
		}
		if from >= 0 {
			step = append(step, l)
			if l == "}" {
				break
			}
		}
	}
	if from < 0 || step[len(step)-1] != "}" {
		t.Fatal("build-vm-template.sh: the lockdown step (known_b64=… through its failure's }) is not where this test looks")
	}
	// No sudoers files of this machine are read or rewritten.
	body := strings.ReplaceAll(strings.Join(step, "\n"), "/etc/sudoers /etc/sudoers.d/*", "/nonexistent")
	const keychain = "/Users/$user/Library/Keychains/login.keychain-db"
	if !strings.Contains(body, keychain) {
		t.Fatalf("build-vm-template.sh: the lockdown step does not name the login keychain %s", keychain)
	}
	body = strings.ReplaceAll(body, keychain, "$KEYCHAIN")

	for _, c := range []struct {
		name, env string
		wantOK    bool
		wantLog   string
	}{
		{"locked down", "", true, "shutdown -h now"},
		{"the login keychain cannot be re-keyed", "REKEY_FAILS=1", true, "shutdown -h now"},
		{"the password reset does nothing", "RESET_FAILS=1", false, "tart delete tmpl"},
		{"sshd stays on", "SSHD_ENABLED=1", false, "tart delete tmpl"},
		{"the build user's session cannot be entered", "NO_SESSION=1", false, "tart delete tmpl"},
		{"launchctl runs anything as root", "ROOT_LAUNCHCTL=1", false, "tart delete tmpl"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			bin := filepath.Join(dir, "bin")
			if err := os.Mkdir(bin, 0o755); err != nil {
				t.Fatal(err)
			}
			for name, text := range lockdownStubs {
				if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/bash\n"+text+"\n"), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			log, pwFile, keychain := filepath.Join(dir, "log"), filepath.Join(dir, "pw"), filepath.Join(dir, "login.keychain-db")
			for _, f := range []string{pwFile, keychain} {
				if err := os.WriteFile(f, []byte("admin"), 0o600); err != nil { // the image's password
					t.Fatal(err)
				}
			}
			run := `set -u
user=admin build_user=freeagent-build sudoers=/nonexistent name=tmpl brewenv=true
guest() { PATH="` + bin + `:$PATH" bash -c "$1"; }
tart() { echo "tart $*" >>"$LOG"; }
die() { echo "die: $*" >&2; exit 1; }
` + body + "\n"
			cmd := exec.Command("bash", "-c", run)
			cmd.Env = append(os.Environ(), "LOG="+log, "PWFILE="+pwFile, "KEYCHAIN="+keychain)
			if c.env != "" {
				cmd.Env = append(cmd.Env, c.env)
			}
			out, err := cmd.CombinedOutput()
			logged, _ := os.ReadFile(log)
			if (err == nil) != c.wantOK || !strings.Contains(string(logged), c.wantLog) {
				t.Fatalf("exit %v, want success %v; log lacks %q:\n%s\noutput:\n%s", err, c.wantOK, c.wantLog, logged, out)
			}
			if c.wantOK {
				if pw, _ := os.ReadFile(pwFile); string(pw) == "admin" || len(pw) < 24 {
					t.Fatalf("the password is %q, want a new random one", pw)
				}
				if strings.Contains(string(logged), "tart delete") {
					t.Fatalf("a template that was locked down was deleted:\n%s", logged)
				}
				// The clone's auto-login unlocks the login keychain with the
				// new password, or finds none and makes one with it.
				pw, _ := os.ReadFile(pwFile)
				if kc, err := os.ReadFile(keychain); err == nil && string(kc) != string(pw) {
					t.Fatalf("the login keychain still opens with %q, not the new password: every clone would log in to a keychain dialog", kc)
				}
			}
		})
	}
}
