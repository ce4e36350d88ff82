#!/usr/bin/env bash
# Builds the Tart VM template that Free Agent clones for every build, on a
# Mac with Tart. See --help.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
	cat <<'USAGE'
Usage: scripts/build-vm-template.sh [options]

Clones a macOS base image with Tart, boots it, installs what an Expo build
needs (Node.js, CocoaPods, optionally a JDK and the Android SDK) plus Free
Agent's in-VM launcher, its LaunchAgent and a fallback freeagent-vm, shuts it
down and optionally pushes it to an OCI registry. Workers then use it with
`freeagent run --template NAME` (default freeagent-template).

Build commands run as an unprivileged user of their own, never as the
auto-login user that runs freeagent-vm: the script creates that user
(freeagent-build, a standard account with a random password it neither
stores nor prints), lets only the auto-login user run commands as it
without a password, in the build user's own launchd session (a sudoers
drop-in: `sudo -u` it, and root's `launchctl asuser` its uid followed by
exactly that sudo; Xcode's resource compilers need the session), moves the
Android SDK where both can use it, and writes FREEAGENT_BUILD_USER into
freeagent-vm.env. For iOS it adds Apple's WWDR intermediate certificates
(G3 to G6, downloaded from https://www.apple.com/certificateauthority/,
each checked to be the WWDR authority issued by an Apple root) to the
System keychain, where the build user's code signing finds them (Xcode
installs them only for the user that first launches it), and fails when
none could be added. As its very last step it takes away the auto-login
user's passwordless sudo, gives that user a random password (kept only in macOS's auto-login file) and
turns off password logins over SSH: the farm never uses SSH (tart exec and
the LaunchAgent do the work), and a build must not become admin with the
image's well-known password.

It records the toolchain environment of the guest's login shell (PATH,
JAVA_HOME, ANDROID_HOME…) in the image's freeagent-vm.env, which the
launcher exports for every build (a LaunchAgent reads no shell profile),
and the platforms the template can build (ios with Xcode, android with a JDK
and the Android SDK) in $TART_HOME/vms/NAME/freeagent-template.json, from
which workers using NAME advertise them, with the template's Xcode and
build tools (every Node.js version, CocoaPods, Bundler, fastlane, NDKs:
`freeagent-vm tools` in the guest), which route builds by eas.json image
and tool pins; a pushed image carries them as
the label build.freeagent.platforms (Tart 2.25+).

Options:
  --base IMAGE          base image to clone (default ghcr.io/cirruslabs/macos-sequoia-xcode:latest,
                        which brings Xcode and Homebrew; iOS builds need Xcode)
  --name NAME           local VM name of the template (default freeagent-template)
  --push REF            after building, `tart push NAME REF` (e.g. ghcr.io/you/freeagent-template:1)
  --freeagent-vm PATH   darwin/arm64 freeagent-vm to bake in as the fallback
                        (default: built here with go)
  --node FORMULAS       Homebrew Node.js formulae, comma-separated; the first is linked as the
                        default `node`, the others stay in /opt/homebrew/opt/node@N and a build
                        whose eas.json names their version uses them (default node@24,node@22:
                        the maintained LTS lines)
  --node-versions LIST  exact Node.js versions besides, comma-separated (e.g. 20.19.4,22.17.0; default
                        $FREEAGENT_TEMPLATE_NODE_VERSIONS): nodejs.org's darwin-arm64 builds, checked
                        against the release's SHASUMS256.txt, in nvm's layout under $NVM_DIR (or
                        /usr/local/nvm); a build whose eas.json node names one uses it
  --android             also install a JDK (openjdk@17) and the Android SDK command-line tools
  --eas-cli             also install eas-cli with npm
  --user NAME           the guest user that logs in automatically, owns Homebrew and runs
                        freeagent-vm (default admin)
  --build-user NAME     the unprivileged user build commands run as (default freeagent-build)
  --ssh                 talk to the guest over SSH as that user (password from
                        FREEAGENT_TEMPLATE_SSH_PASSWORD, default admin; needs sshpass) instead of
                        `tart exec` (which needs macOS 14+ and the Tart guest agent in the image,
                        running as that user, as in the Cirrus Labs images)
  --force               replace an existing VM called NAME (tart clone overwrites silently)
  -h, --help            this text

The guest must log in automatically (the Cirrus Labs images log in as admin)
and allow passwordless sudo for that user while the template is built (the
script removes it at the end). --ssh works for the build itself; the
finished template accepts no SSH password.
USAGE
}

base=ghcr.io/cirruslabs/macos-sequoia-xcode:latest
name=freeagent-template
push=""
vm_bin=""
node=node@24,node@22
node_versions=${FREEAGENT_TEMPLATE_NODE_VERSIONS:-}
android=0
eas=0
transport="exec"
user="admin"
build_user="freeagent-build"
force=0
while [ $# -gt 0 ]; do
	case $1 in
	--base) base=${2:?--base needs an image}; shift 2 ;;
	--name) name=${2:?--name needs a name}; shift 2 ;;
	--push) push=${2:?--push needs a registry reference}; shift 2 ;;
	--freeagent-vm) vm_bin=${2:?--freeagent-vm needs a path}; shift 2 ;;
	--node) node=${2:?--node needs formulae}; shift 2 ;;
	--node-versions) node_versions=${2:?--node-versions needs versions}; shift 2 ;;
	--android) android=1; shift ;;
	--eas-cli) eas=1; shift ;;
	--user) user=${2:?--user needs a name}; shift 2 ;;
	--build-user) build_user=${2:?--build-user needs a name}; shift 2 ;;
	--ssh) transport=ssh; shift ;;
	--force) force=1; shift ;;
	-h | --help) usage; exit 0 ;;
	*) echo "build-vm-template.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
	esac
done

die() { echo "build-vm-template.sh: $*" >&2; exit 1; }
case $build_user in
'' | *[!a-z0-9_-]* | -*) die "--build-user $build_user: use lowercase letters, digits, - and _" ;;
esac
for v in ${node_versions//,/ }; do
	[[ $v =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "--node-versions $v: give exact versions such as 20.19.4"
done
[ "$build_user" != "$user" ] || die "--build-user must differ from --user: build commands must not run as the user that holds the build's tokens"
[ "$(uname -s)" = Darwin ] || die "Tart runs on macOS only: run this on the Mac that will host the builds"
command -v tart >/dev/null || die "tart is not installed: brew install cirruslabs/cli/tart"
if [ "$transport" = ssh ]; then
	command -v sshpass >/dev/null || die "--ssh needs sshpass: brew install hudochenkov/sshpass/sshpass"
fi
if tart list --source local --format json | grep -q "\"Name\" *: *\"$name\""; then
	[ "$force" = 1 ] || die "a VM called $name exists; pass --force to replace it, or --name another"
	tart delete "$name"
fi

stage=$(mktemp -d -t freeagent-template)
run_pid=""
cleanup() {
	if [ -n "$run_pid" ] && kill -0 "$run_pid" 2>/dev/null; then
		tart stop "$name" >/dev/null 2>&1 || true
		wait "$run_pid" 2>/dev/null || true
	fi
	rm -rf "$stage"
}
trap cleanup EXIT

echo "--- staging the in-VM files"
if [ -z "$vm_bin" ]; then
	GOOS=darwin GOARCH=arm64 CGO_ENABLED=0 go build -o "$stage/freeagent-vm" ./vmbootstrap/cmd/freeagent-vm
else
	cp "$vm_bin" "$stage/freeagent-vm"
fi
cp launchd/guest/freeagent-vm-launcher launchd/guest/freeagent-toolchain-env launchd/guest/build.freeagent.vm.plist "$stage/"

echo "--- tart clone $base $name"
tart clone "$base" "$name"
# The template is booted with its setup folder shared, like a build VM
# with its build-config folder.
tart run --no-graphics --dir "freeagent-setup:$stage" "$name" &
run_pid=$!

guest() { # runs a shell command line in the guest as its user
	if [ "$transport" = ssh ]; then
		local ip
		ip=$(tart ip --wait 120 "$name")
		SSHPASS=${FREEAGENT_TEMPLATE_SSH_PASSWORD:-admin} sshpass -e ssh -o StrictHostKeyChecking=no \
			-o UserKnownHostsFile=/dev/null -o LogLevel=ERROR "$user@$ip" "bash -lc $(printf '%q' "$1")"
	else
		tart exec "$name" bash -lc "$1"
	fi
}

echo "--- waiting for the guest"
for i in $(seq 1 60); do
	if guest true >/dev/null 2>&1; then break; fi
	kill -0 "$run_pid" 2>/dev/null || die "tart run exited while booting"
	[ "$i" = 60 ] && die "the guest did not answer within 5 minutes (try --ssh if the image has no Tart guest agent)"
	sleep 5
done

setup='/Volumes/My Shared Files/freeagent-setup'
# shellcheck disable=SC2016 # expanded in the guest, not here
brewenv='eval "$(/opt/homebrew/bin/brew shellenv)" && export HOMEBREW_NO_AUTO_UPDATE=1'
[ "$(guest 'id -un')" = "$user" ] || die "guest commands do not run as $user (see --user and --ssh)"
guest 'sudo -n true' || die "the guest user needs passwordless sudo"
guest "$brewenv && brew --version" || die "the base image has no Homebrew at /opt/homebrew"

node_formulae=${node//,/ }
node_default=${node%%,*}
echo "--- Node.js ($node_formulae; $node_default is the default), CocoaPods"
guest "$brewenv && brew install $node_formulae cocoapods && brew link --overwrite --force $node_default &&
	for f in $node_formulae; do \"\$(brew --prefix \$f)/bin/node\" --version || exit 1; done &&
	node --version && npm --version && pod --version"
if [ "$eas" = 1 ]; then
	echo "--- eas-cli"
	guest "$brewenv && npm install -g eas-cli && eas --version"
fi
if [ "$android" = 1 ]; then
	echo "--- JDK 17, Android SDK"
	guest "$brewenv && brew install openjdk@17 && brew install --cask android-commandlinetools &&
		yes | sdkmanager --sdk_root=\$HOME/Library/Android/sdk --licenses >/dev/null &&
		sdkmanager --sdk_root=\$HOME/Library/Android/sdk 'platform-tools' 'platforms;android-35' 'build-tools;35.0.0'"
fi

# The LaunchAgent that starts builds reads no shell profile, yet images set
# their toolchain there (the Cirrus Labs images: PATH with the JDK and
# node, ANDROID_HOME, in ~/.zprofile, linked to the ~/.profile that this
# login shell reads). Record that environment, whatever was installed, for
# the launcher to export, and the platforms it can build.
echo "--- toolchain environment"
guest "sh '$setup/freeagent-toolchain-env'" >"$stage/freeagent-vm.env"
cat "$stage/freeagent-vm.env"
platforms=$(sed -n "s/^FREEAGENT_TEMPLATE_PLATFORMS='\(.*\)'\$/\1/p" "$stage/freeagent-vm.env")
# The Xcode builds will use, for the worker to report (empty without Xcode).
xcode=$(guest "xcodebuild -version 2>/dev/null | sed -n 's/^Xcode //p'" || true)
case ",$platforms," in *,ios,*) ;; *) echo "warning: no working xcodebuild: this template cannot build iOS (use a *-xcode base image)" >&2 ;; esac
case ",$platforms," in *,android,*) ;; *) echo "warning: no JDK and Android SDK (platform-tools, build-tools): this template cannot build Android (pass --android)" >&2 ;; esac
[ -n "$platforms" ] || die "the template can build neither iOS nor Android"

# The build user: a standard account (not admin) that runs every build
# command through `sudo -n -u`, started in its own launchd session by
# root's `launchctl asuser` (sudo -u alone keeps the caller's session,
# where actool and ibtool cannot reach CoreSimulatorService), which the
# drop-in allows the auto-login user and nobody else; its password is random and never leaves this command.
# Its home holds its keychains, caches and provisioning profiles. The
# Android SDK moves out of the auto-login user's private ~/Library to
# /opt/android-sdk, shared through the staff group both users are in
# (Gradle may install missing packages into it).
echo "--- build user $build_user"
sudoers=/etc/sudoers.d/freeagent-build-user
guest "sudo -n sh -c '
	set -e
	if ! id $build_user >/dev/null 2>&1; then
		sysadminctl -addUser $build_user -fullName \"Free Agent build\" -shell /bin/zsh -home /Users/$build_user \
			-password \"\$(openssl rand -base64 24)\" >/dev/null 2>&1
	fi
	id $build_user >/dev/null
	createhomedir -c -u $build_user >/dev/null
	dscl . -create /Users/$build_user IsHidden 1
	dseditgroup -o checkmember -m $build_user admin >/dev/null 2>&1 && { echo \"$build_user is an administrator\" >&2; exit 1; }
	bu_uid=\$(id -u $build_user)
	tmp=\$(mktemp)
	printf \"%s\\n\" \"# Free Agent: freeagent-vm (running as $user) starts build commands as $build_user,\" \
		\"# in the launchd session of $build_user (launchctl asuser as root, then sudo -u).\" \
		\"Defaults:$user !use_pty\" \"$user ALL=($build_user) NOPASSWD: ALL\" \
		\"$user ALL=(root) NOPASSWD: /bin/launchctl asuser \$bu_uid /usr/bin/sudo -n -u $build_user -- *\" >\"\$tmp\"
	visudo -cf \"\$tmp\" >/dev/null
	install -m 0440 -o root -g wheel \"\$tmp\" $sudoers
	rm -f \"\$tmp\"
	visudo -c >/dev/null
'" || die "cannot set up the build user $build_user"
android_home=$(sed -n "s/^ANDROID_HOME='\(.*\)'\$/\1/p" "$stage/freeagent-vm.env")
case $android_home in
/Users/*)
	echo "--- moving the Android SDK from $android_home to /opt/android-sdk"
	guest "sudo -n mkdir -p /opt && sudo -n mv '$android_home' /opt/android-sdk && ln -s /opt/android-sdk '$android_home'"
	sed -i '' "s#$android_home#/opt/android-sdk#g" "$stage/freeagent-vm.env"
	android_home=/opt/android-sdk
	;;
esac
if [ -n "$android_home" ]; then
	guest "sudo -n chown -R $user:staff '$android_home' && sudo -n chmod -R g+rwX '$android_home' &&
		sudo -n find '$android_home' -type d -exec chmod g+s {} +"
fi
printf "FREEAGENT_BUILD_USER='%s'\n" "$build_user" >>"$stage/freeagent-vm.env"

# Apple's WWDR intermediate certificates, in the System keychain: a
# distribution certificate is a valid code-signing identity (one that
# find-identity -v lists and codesign signs with) only when its chain
# reaches Apple's root through one of them. Xcode installs them only for the
# user that first launches it, and the build user searches its temporary
# keychain, its login keychain and the System keychain. Each comes from
# Apple over HTTPS and is added only when it is the WWDR authority, issued by
# an Apple root CA and verified against the system's roots; it counts when
# its SHA-1 is then in the System keychain (already there counts too).
wwdr_certs="G3 G4 G5 G6"
if [[ ,$platforms, == *,ios,* ]]; then
	echo "--- Apple's WWDR intermediate certificates ($wwdr_certs) into the System keychain"
	wwdr=$(guest "tmp=\$(mktemp -d) && cd \"\$tmp\" || exit 1
		system=/Library/Keychains/System.keychain
		for g in $wwdr_certs; do
			f=AppleWWDRCA\$g.cer
			if ! curl -fsSL --max-time 120 -o \$f https://www.apple.com/certificateauthority/\$f; then
				echo \"warning: cannot download \$f from https://www.apple.com/certificateauthority/\" >&2; continue
			fi
			subject=\$(openssl x509 -inform DER -in \$f -noout -subject 2>/dev/null) || subject=''
			issuer=\$(openssl x509 -inform DER -in \$f -noout -issuer 2>/dev/null) || issuer=''
			if ! printf '%s\n' \"\$subject\" | grep -Eq 'CN ?= ?Apple Worldwide Developer Relations Certification Authority *(\$|[,/])' ||
				! printf '%s\n' \"\$issuer\" | grep -Eq 'CN ?= ?Apple Root CA( - G[0-9]+)? *(\$|[,/])' ||
				! printf '%s\n' \"\$issuer\" | grep -Eq 'O ?= ?Apple Inc\.'; then
				echo \"warning: \$f is not Apple's WWDR intermediate issued by an Apple root CA (\$subject; \$issuer): skipped\" >&2; continue
			fi
			if ! security verify-cert -c \$f -p basic >/dev/null 2>&1; then
				echo \"warning: \$f does not verify against the system's root certificates: skipped\" >&2; continue
			fi
			sha1=\$(openssl x509 -inform DER -in \$f -noout -fingerprint -sha1 | sed 's/.*=//; s/://g')
			security find-certificate -a -Z \$system 2>/dev/null | grep -q \"SHA-1 hash: \$sha1\" ||
				sudo -n security add-certificates -k \$system \$f >&2 || true
			if security find-certificate -a -Z \$system 2>/dev/null | grep -q \"SHA-1 hash: \$sha1\"; then
				echo \$g
			else
				echo \"warning: \$f is not in \$system after security add-certificates\" >&2
			fi
		done
		cd / && rm -rf \"\$tmp\"") || die "installing Apple's WWDR intermediate certificates failed in the guest (above)"
	wwdr=${wwdr//$'\n'/ }
	[ -n "$wwdr" ] || die "none of Apple's WWDR intermediate certificates ($wwdr_certs) is in the guest's System keychain (see above), so no iOS build could sign: let the guest reach https://www.apple.com/certificateauthority/ and build the template again"
	echo "in the System keychain: $wwdr"
fi

# Exact Node.js versions, in nvm's layout (where freeagent-vm looks, see
# internal/toolchain) in a directory both users can read.
if [ -n "$node_versions" ]; then
	nvm_dir=$(sed -n "s/^NVM_DIR='\(.*\)'\$/\1/p" "$stage/freeagent-vm.env")
	if [ -z "$nvm_dir" ]; then
		nvm_dir=/usr/local/nvm
		printf "NVM_DIR='%s'\n" "$nvm_dir" >>"$stage/freeagent-vm.env"
	fi
	for v in ${node_versions//,/ }; do
		echo "--- Node.js $v (nodejs.org) into $nvm_dir"
		guest "set -e; tmp=\$(mktemp -d); cd \"\$tmp\"
			curl -fsSLO https://nodejs.org/dist/v$v/node-v$v-darwin-arm64.tar.gz
			curl -fsSLO https://nodejs.org/dist/v$v/SHASUMS256.txt
			grep ' node-v$v-darwin-arm64.tar.gz\$' SHASUMS256.txt | shasum -a 256 -c -
			sudo -n mkdir -p '$nvm_dir/versions/node/v$v'
			sudo -n tar -xzf node-v$v-darwin-arm64.tar.gz -C '$nvm_dir/versions/node/v$v' --strip-components 1
			'$nvm_dir/versions/node/v$v/bin/node' --version; rm -rf \"\$tmp\"" || die "cannot install Node.js $v"
	done
fi

# The build tools as builds will find them (the environment the launcher
# exports), for workers to advertise.
echo "--- build tools"
tools=$(guest "set -a && . '$setup/freeagent-vm.env' && set +a && '$setup/freeagent-vm' tools") || die "freeagent-vm tools failed in the guest"
echo "$tools"

echo "--- Free Agent launcher and LaunchAgent"
guest "sudo -n mkdir -p /usr/local/libexec/freeagent &&
	sudo -n install -m 0755 '$setup/freeagent-vm-launcher' '$setup/freeagent-vm' /usr/local/libexec/freeagent/ &&
	sudo -n install -d -o $user -m 0755 /usr/local/libexec/freeagent/run &&
	sudo -n install -m 0644 '$setup/freeagent-vm.env' /usr/local/libexec/freeagent/ &&
	mkdir -p /Users/$user/Library/LaunchAgents &&
	install -m 0644 '$setup/build.freeagent.vm.plist' /Users/$user/Library/LaunchAgents/ &&
	plutil -lint /Users/$user/Library/LaunchAgents/build.freeagent.vm.plist"
autologin=$(guest 'defaults read /Library/Preferences/com.apple.loginwindow autoLoginUser 2>/dev/null || true')
[ "$autologin" = "$user" ] || echo "warning: the guest does not log in $user automatically (autoLoginUser: '$autologin'), so the LaunchAgent will not start builds: enable automatic login" >&2

# Last, in one root shell that ends by shutting down: the auto-login user
# loses passwordless sudo (every NOPASSWD rule but the build-user drop-in
# is commented out, each file checked with visudo before it is replaced)
# and the image's well-known password (a random one, kept only in the
# auto-login file /etc/kcpassword), and sshd refuses passwords.
echo "--- locking the template down and shutting down"
guest "$brewenv && brew cleanup -s >/dev/null; rm -f /tmp/freeagent-vm.log" || true
# The image's well-known password, which must stop working (base64: any
# character survives the quoting below).
known_b64=$(printf '%s' "${FREEAGENT_TEMPLATE_SSH_PASSWORD:-admin}" | base64 | tr -d '\n')
guest "sudo -n sh -c '
	set -e
	for f in /etc/sudoers /etc/sudoers.d/*; do
		[ -f \"\$f\" ] && [ \"\$f\" != $sudoers ] || continue
		grep -Eq \"^[^#]*NOPASSWD\" \"\$f\" || continue
		sed -E \"/^[^#]*NOPASSWD/s/^/# removed by Free Agent: /\" \"\$f\" >\"\$f.freeagent\"
		visudo -cf \"\$f.freeagent\" >/dev/null
		cat \"\$f.freeagent\" >\"\$f\"
		rm -f \"\$f.freeagent\"
	done
	visudo -c >/dev/null
	su $user -c \"sudo -n -u $build_user true\" || { echo \"$user cannot run commands as $build_user\" >&2; exit 1; }
	bu_uid=\$(id -u $build_user)
	[ \"\$(su $user -c \"sudo -n /bin/launchctl asuser \$bu_uid /usr/bin/sudo -n -u $build_user -- /bin/launchctl manageruid\")\" = \"\$bu_uid\" ] ||
		{ echo \"$user cannot start commands in the launchd session of $build_user\" >&2; exit 1; }
	if su $user -c \"sudo -n /bin/launchctl asuser \$bu_uid /usr/bin/true\" >/dev/null 2>&1; then echo \"$user can run commands as root through launchctl\" >&2; exit 1; fi
	if su $user -c \"sudo -n true\" >/dev/null 2>&1; then echo \"$user still has passwordless sudo\" >&2; exit 1; fi
	mkdir -p /etc/ssh/sshd_config.d
	printf \"%s\\n\" \"# Free Agent: no password logins (the farm uses tart exec)\" \
		\"PasswordAuthentication no\" \"KbdInteractiveAuthentication no\" >/etc/ssh/sshd_config.d/000-freeagent.conf
	launchctl disable system/com.openssh.sshd 2>/dev/null || true
	launchctl print-disabled system | grep -Eq \"\\\"com.openssh.sshd\\\" => (disabled|true)\" ||
		{ echo \"sshd is not disabled\" >&2; exit 1; }
	pw=\$(openssl rand -base64 24)
	# dscl -passwd asks for the old password on macOS 26, even as root.
	sysadminctl -resetPasswordFor $user -newPassword \"\$pw\" >/dev/null 2>&1 || true
	dscl . -authonly $user \"\$pw\" >/dev/null 2>&1 || { echo \"the new password of $user was not set\" >&2; exit 1; }
	known=\$(echo $known_b64 | base64 -D)
	if dscl . -authonly $user \"\$known\" >/dev/null 2>&1; then echo \"the well-known password of $user still works\" >&2; exit 1; fi
	# The reset leaves the login keychain locked with the old password, and
	# every clone would log in to \"unable to unlock your login keychain\":
	# re-key it (the old password is known), or remove it so the next login
	# makes a new one with the new password.
	kc=/Users/$user/Library/Keychains/login.keychain-db
	if [ -f \"\$kc\" ]; then
		sudo -u $user security set-keychain-password -o \"\$known\" -p \"\$pw\" \"\$kc\" >/dev/null 2>&1 || true
		sudo -u $user security unlock-keychain -p \"\$pw\" \"\$kc\" >/dev/null 2>&1 || rm -f \"\$kc\"
		[ ! -f \"\$kc\" ] || sudo -u $user security lock-keychain \"\$kc\" >/dev/null 2>&1 || true
	fi
	sysadminctl -autologin set -userName $user -password \"\$pw\" >/dev/null 2>&1
	[ \"\$(defaults read /Library/Preferences/com.apple.loginwindow autoLoginUser 2>/dev/null)\" = $user ] ||
		{ echo \"$user no longer logs in automatically\" >&2; exit 1; }
	shutdown -h now
'" || {
	# Half locked down is worse than not built: it may still take the
	# well-known password or give passwordless sudo.
	tart stop "$name" >/dev/null 2>&1 || true
	tart delete "$name" >/dev/null 2>&1 || true
	die "locking the template down failed (above), so $name was deleted: no worker can use a template that is half locked down"
}
wait "$run_pid" || true
run_pid=""

# Workers advertise only what the template builds: they read this marker
# from the template's Tart directory (Tart ignores other files there;
# `tart delete` removes it with the VM, `tart rename` moves it along).
# Images carry no marker: there the worker's owner sets --platforms.
tart_home=${TART_HOME:-$HOME/.tart}
printf '{"platforms": ["%s"], "xcode_version": "%s", "tools": %s}\n' "$(printf '%s' "$platforms" | sed 's/,/", "/g')" "$xcode" "$tools" >"$tart_home/vms/$name/freeagent-template.json"

if [ -n "$push" ]; then
	echo "--- tart push $name $push"
	tart push --label "build.freeagent.platforms=$platforms" --label "build.freeagent.xcode=$xcode" "$name" "$push"
fi
echo "--- template $name is ready; it builds $platforms: freeagent run --template $name${push:+ (or --template $push --platforms $platforms)}"
