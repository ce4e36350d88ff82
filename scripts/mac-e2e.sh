#!/usr/bin/env bash
# Opt-in end-to-end run on a real Mac (never in CI): what Linux CI can only
# do against fakes. See --help.
set -euo pipefail
caller_dir=$PWD
cd "$(dirname "$0")/.."

usage() {
	cat <<'USAGE'
Usage: scripts/mac-e2e.sh [--template NAME] [--skip-build]
       scripts/mac-e2e.sh ios [--template NAME] [--credentials DIR] [--bundle-id ID] [--name NAME]

On a Mac with Tart, in order:
  1. the Tart driver's contract tests against the real tart (FREEAGENT_TEST_REAL_TART=1),
     on a throwaway `tart create --linux` VM;
  2. the Keychain tests against this Mac's login keychain (FREEAGENT_TEST_REAL_KEYCHAIN=1;
     they use the service build.freeagent.test and delete what they write), with cgo
     (Keychain API) and without (/usr/bin/security), and the launchd and packaging tests;
  3. a worker started as launchd starts the app (launchd's PATH, through a symlink, no
     --tart or --bootstrap) beside a controller on its own PostgreSQL (needs initdb and
     postgres on PATH, e.g. brew install postgresql@16), and `freeagent doctor` in the
     same environment;
  4. a whole build: expo-build submits a project whose freeagent:build script writes an
     artifact after 20 s in a VM cloned from the template (default freeagent-template,
     made by scripts/build-vm-template.sh; a remote image is pulled only when absent);
     while it runs, the Mac is kept awake and a second worker starting on this Mac leaves
     the VM alone; the artifact is downloaded and compared; the power assertion ends.
     --skip-build stops after step 2.
Each check prints PASS or FAIL, the list is printed again at the end, and the run exits 1
when any failed. Only VMs this run creates are touched.

The ios mode proves the default iOS pipeline on a real Expo app instead (the template must
build iOS: a *-xcode base image). It creates an app with `npx create-expo-app@latest
--template blank` (named NAME, default FreeAgentE2E; bundle id ID, else the one of the
credentials' provisioning profile, else build.freeagent.mace2e), with an eas.json holding a
`simulator` profile (ios.simulator) and a `preview` profile (internal distribution, local
credentials), starts the farm of step 3 and:
  - builds `simulator` without credentials and checks the .tar.gz: NAME.app, its bundle id,
    an executable built for the iOS simulator (lipo, file, vtool);
  - with --credentials DIR (a credentials.json and the files it names, paths relative to
    DIR), copies them into the app, builds `preview` and checks the .ipa: codesign's
    authority and team, every bundle's embedded profile (name, UUID, application
    identifier, devices), the bundle ids of the app and its extensions, and
    `codesign --verify --deep --strict`.
It prints PASS or FAIL for each check, then the list, and exits 1 when any failed.
FREEAGENT_E2E_IOS_TIMEOUT sets each iOS build's time limit (default 60m).

Work files go to a temp folder, kept (and named) when a step fails. The controller
listens on port FREEAGENT_E2E_PORT (default 8787) of every address, for the VM.
USAGE
}

mode=all
if [ "${1:-}" = ios ]; then
	mode=ios
	shift
fi
template=freeagent-template
skip_build=0
credentials=""
bundle_id=""
app_name=FreeAgentE2E
while [ $# -gt 0 ]; do
	case $1 in
	--template) template=${2:?--template needs a VM name}; shift 2 ;;
	--skip-build) skip_build=1; shift ;;
	--credentials) credentials=${2:?--credentials needs a directory}; shift 2 ;;
	--bundle-id) bundle_id=${2:?--bundle-id needs a bundle identifier}; shift 2 ;;
	--name) app_name=${2:?--name needs an app name}; shift 2 ;;
	-h | --help) usage; exit 0 ;;
	*) echo "mac-e2e.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
	esac
done

die() { echo "mac-e2e.sh: $*" >&2; exit 1; }
if [ "$mode" = all ]; then
	if [ -n "$credentials$bundle_id" ] || [ "$app_name" != FreeAgentE2E ]; then
		die "--credentials, --bundle-id and --name belong to the ios mode: scripts/mac-e2e.sh ios ..."
	fi
else
	[ "$skip_build" = 0 ] || die "--skip-build has no meaning in the ios mode, which is a build"
	# Prebuild names the Xcode target, the scheme and the .app after the
	# name with everything but letters and digits removed: keep it intact.
	[[ $app_name =~ ^[A-Za-z][A-Za-z0-9]*$ ]] || die "--name $app_name: use letters and digits only, starting with a letter"
	[ -z "$bundle_id" ] || [[ $bundle_id =~ ^[A-Za-z0-9][A-Za-z0-9.-]*$ ]] ||
		die "--bundle-id $bundle_id is not a bundle identifier (letters, digits, dots and hyphens)"
	if [ -n "$credentials" ]; then
		case $credentials in /*) ;; *) credentials=$caller_dir/$credentials ;; esac
		[ -f "$credentials/credentials.json" ] || die "--credentials $credentials: no credentials.json in it"
		credentials=$(cd "$credentials" && pwd)
	fi
fi
[ "$(uname -s)" = Darwin ] || die "this runs on a Mac with Tart; on Linux, make test covers the same code against fakes"
command -v tart >/dev/null || die "tart is not installed: brew install cirruslabs/cli/tart"
if [ "$mode" = ios ]; then
	for tool in node npx plutil security codesign lipo vtool file unzip tar; do
		command -v "$tool" >/dev/null || die "$tool is not installed: the ios mode needs Node.js (brew install node) and Xcode's command-line tools (xcode-select --install)"
	done
fi

work=$(mktemp -d -t freeagent-e2e)
pids=()
worker_pids=() # the workers start_worker started, among pids
contract_vm=fa-contract-template-$$
summary=""
finish() {
	status=$?
	# ${a[@]+...}: bash 3.2 (macOS's) calls an empty array unbound under set -u.
	for p in ${pids[@]+"${pids[@]}"}; do kill -TERM "$p" 2>/dev/null || true; done
	for p in ${pids[@]+"${pids[@]}"}; do wait "$p" 2>/dev/null || true; done
	tart delete "$contract_vm" >/dev/null 2>&1 || true
	if [ -n "$summary" ]; then
		echo "--- what the real Mac verified"
		printf '%s' "$summary"
	fi
	if [ "$status" = 0 ]; then rm -rf "$work"; else echo "mac-e2e.sh: failed; logs and files in $work" >&2; fi
}
trap finish EXIT

# start_farm starts a controller on its own PostgreSQL and a worker whose
# tart driver clones $template, and sets url, dev_key, worker_key and
# worker_pid. The worker starts as launchd starts the app: launchd's PATH
# (no Homebrew on it), through a symlink as the cask installs it, and
# without --tart or --bootstrap: it must find tart in Homebrew's prefixes
# and the freeagent-vm beside the real binary.
start_farm() {
	case $template in
	*/*) ;; # a remote image: the worker pulls it when it is not in Tart's cache
	*)
		tart list --source local --format json | grep -q "\"Name\" *: *\"$template\"" ||
			die "no local VM $template: make one with scripts/build-vm-template.sh (or pass --template)"
		;;
	esac
	go build -o "$work/bin/" ./controller/cmd/freeagent-controller ./tray/cmd/freeagent ./cli/cmd/expo-build
	GOOS=darwin GOARCH=arm64 CGO_ENABLED=0 go build -o "$work/bin/" ./vmbootstrap/cmd/freeagent-vm
	mkdir -p "$work/link"
	ln -sf "$work/bin/freeagent" "$work/link/freeagent"

	# The guest reaches the controller at the host's address on Tart's network
	# (the agent rewrites the loopback URL for it), so listen on every address.
	local port=${FREEAGENT_E2E_PORT:-8787} i
	"$work/bin/freeagent-controller" serve --data-dir "$work/controller" --listen "0.0.0.0:$port" >"$work/controller.log" 2>&1 &
	pids+=($!)
	url=http://127.0.0.1:$port
	for i in $(seq 1 300); do
		grep -q "listening on" "$work/controller.log" && break
		kill -0 "${pids[0]}" 2>/dev/null || die "the controller exited; see $work/controller.log"
		[ "$i" = 300 ] && die "the controller did not start within 30 s; see $work/controller.log"
		sleep 0.1
	done
	worker_key=$(keys mac-e2e-worker worker)
	dev_key=$(keys mac-e2e-developer developer)
	start_worker mac-e2e "$work/agent"
	worker_pid=$last_pid
}
keys() { "$work/bin/freeagent-controller" keys create --name "$1" --role "$2" --data-dir "$work/controller"; }

# start_worker NAME DATA-DIR [FLAGS…] starts a worker in launchd's environment; its
# pid is in last_pid (not printed: a $(...) subshell would lose pids).
start_worker() {
	env -i HOME="$HOME" USER="$USER" LOGNAME="$USER" TMPDIR="${TMPDIR:-/tmp}" PATH=/usr/bin:/bin:/usr/sbin:/sbin \
		FREEAGENT_API_KEY="$worker_key" "$work/link/freeagent" run --controller-url "$url" --vm-driver tart \
		--template "$template" --data-dir "$2" --name "$1" "${@:3}" >"$work/$1.log" 2>&1 &
	last_pid=$!
	pids+=("$last_pid")
	worker_pids+=("$last_pid")
}

# agent_vms lists the running VMs this Mac's agents named (fa-...).
agent_vms() { tart list --source local --format json | tr -d ' \n' | grep -o '"Name":"fa-[^"]*"[^}]*"Running":true' | sed 's/"Name":"\([^"]*\)".*/\1/' || true; }

# all_mode: the real Tart, the real Keychain, launchd's environment, and a
# build in a VM, each check a PASS or FAIL line.
all_mode() {
	echo "--- 1. Tart driver contract tests against the real tart"
	tart create --linux "$contract_vm"
	if FREEAGENT_TEST_REAL_TART=1 FREEAGENT_TEST_TART_TEMPLATE=$contract_vm go test -count=1 ./agent/tart/; then
		pass "the Tart driver's contract holds against $(tart --version | head -1)"
	else
		fail "the Tart driver's contract against the real tart (go test output above)"
	fi

	echo "--- 2. Keychain, launchd and packaging on macOS"
	if FREEAGENT_TEST_REAL_KEYCHAIN=1 CGO_ENABLED=1 go test -count=1 ./agent/secrets/ ./launchd/ ./packaging/... ./tray/...; then
		pass "Keychain (API), launchd plists, the app bundle (Info.plist keys, deployment target) and the menu-bar app"
	else
		fail "Keychain, launchd, packaging or tray tests with cgo (go test output above)"
	fi
	local tty="without a terminal"
	[ -t 0 ] && tty="with this terminal attached, which security(1) must not prompt on"
	if FREEAGENT_TEST_REAL_KEYCHAIN=1 CGO_ENABLED=0 go test -count=1 ./agent/secrets/; then
		pass "Keychain through /usr/bin/security, $tty"
	else
		fail "Keychain through /usr/bin/security (go test output above)"
	fi
	echo "--- 3. start at login from a disk image is refused"
	# An app run from a mounted disk image (or an App Translocation copy)
	# is gone after a restart: its login item must be refused, with the
	# fix, and nothing written. HOME is a scratch folder, so a refusal that
	# failed would not touch this user's login items.
	local dmg_src=$work/dmg-src mnt="" out
	mkdir -p "$dmg_src" "$work/dmg-home"
	go build -o "$dmg_src/freeagent" ./tray/cmd/freeagent
	if hdiutil create -quiet -srcfolder "$dmg_src" -volname "FreeAgent e2e" -ov "$work/freeagent-e2e.dmg" &&
		mnt=$(hdiutil attach -nobrowse -readonly "$work/freeagent-e2e.dmg" | awk -F'\t' '/\/Volumes\//{print $NF}') && [ -n "$mnt" ]; then
		out=$(HOME="$work/dmg-home" "$mnt/freeagent" service install 2>&1) || true
		hdiutil detach -quiet "$mnt" || true
		if printf '%s\n' "$out" | grep -q "gone after a restart" && [ ! -e "$work/dmg-home/Library/LaunchAgents/build.freeagent.agent.plist" ]; then
			pass "start at login from a disk image is refused, naming the fix"
		else
			fail "start at login from a disk image: $out"
		fi
	else
		fail "could not make and mount a disk image with hdiutil"
	fi

	if [ "$skip_build" = 1 ]; then
		echo "--- build skipped (--skip-build)"
		[ "$failed" = 0 ] || exit 1
		return
	fi

	echo "--- 4. a worker in launchd's environment, and doctor"
	local cached_before=no
	tart list --source oci --format json | grep -q "\"Name\" *: *\"$template\"" && cached_before=yes
	start_farm
	local doctor
	doctor=$(env -i HOME="$HOME" USER="$USER" PATH=/usr/bin:/bin:/usr/sbin:/sbin FREEAGENT_API_KEY="$worker_key" \
		"$work/link/freeagent" doctor --controller-url "$url" --vm-driver tart --template "$template" --data-dir "$work/agent" 2>&1) || true
	show "freeagent doctor (launchd's PATH)" "$doctor"
	if printf '%s\n' "$doctor" | grep -q "^✓ tart"; then pass "tart found with launchd's PATH (Homebrew prefixes)"; else fail "tart not found with launchd's PATH"; fi
	if printf '%s\n' "$doctor" | grep -q "^✓ template"; then pass "doctor: the template's platforms"; else fail "doctor: template check (see above)"; fi
	# Softnet must be able to become root from a tart run without a
	# terminal (its setuid bit, or passwordless sudo): a `brew upgrade
	# softnet` takes the bit away and every VM stops at once.
	if printf '%s\n' "$doctor" | grep -q "^✓ softnet"; then pass "doctor: softnet can become root without a terminal"; else fail "doctor: softnet cannot become root (see the fix above)"; fi
	if printf '%s\n' "$doctor" | grep -q "^✓ dhcp_lease"; then
		pass "doctor: vmnet's DHCP lease time"
	else
		echo "NOTE  doctor warns about vmnet's DHCP leases (see above): a host setting, not a failure of this run"
	fi
	# The same checks as launchd runs the login item: macOS grants the
	# Local Network permission per app, so what Terminal may reach says
	# nothing of the worker. The controller is asked at this Mac's LAN
	# address (loopback needs no permission); the job reads its key as the
	# login item does, so a missing or unknown key is fine here: only an
	# unreachable controller fails.
	local lan_ip
	lan_ip=$(ipconfig getifaddr en0 2>/dev/null || ipconfig getifaddr en1 2>/dev/null || true)
	if [ -z "$lan_ip" ]; then
		echo "NOTE  this Mac has no LAN address on en0/en1: doctor --launchd's Local Network check was skipped"
	else
		doctor=$("$work/link/freeagent" doctor --launchd --controller-url "http://$lan_ip:${url##*:}" --insecure --vm-driver tart \
			--template "$template" --data-dir "$work/agent" 2>&1) || true
		show "freeagent doctor --launchd (as launchd runs the login item)" "$doctor"
		if printf '%s\n' "$doctor" | grep -E "^. controller " | grep -qv "unreachable"; then
			pass "doctor --launchd: a LaunchAgent of this binary reaches the controller on the LAN (Local Network permission)"
		else
			fail "doctor --launchd: the login item's context cannot reach the controller at http://$lan_ip:${url##*:} (see above)"
		fi
	fi

	echo "--- 5. a whole build in a Tart VM cloned from $template"
	local project=$work/project got vm="" i caffeinated=no
	mkdir -p "$project"
	# The build reports who it runs as, whether it may sudo and whether it
	# reaches this Mac's LAN address (the controller listens there too, so
	# only Softnet stops it), then lasts 20 s so the run can look at the
	# host while it runs.
	cat >"$project/package.json" <<'JSON'
{
  "name": "mac-e2e",
  "version": "1.0.0",
  "scripts": {
    "freeagent:build": "node build.js"
  }
}
JSON
	cat >"$project/build.js" <<'JS'
const fs = require('fs'), net = require('net'), os = require('os'), cp = require('child_process');
const out = process.env.FREEAGENT_ARTIFACTS_DIR;
const [lan, port] = fs.readFileSync('lan-address.txt', 'utf8').trim().split(' ');
let sudo = 'refused';
try { cp.execFileSync('sudo', ['-n', 'true'], { stdio: 'ignore' }); sudo = 'allowed'; } catch {}
// The launchd session the build runs in must be its own user's (sudo -u
// alone keeps the caller's): Xcode's asset catalog and storyboard
// compilers reach CoreSimulatorService through it.
const session = cp.execFileSync('launchctl', ['manageruid']).toString().trim();
let simulators = 'no-xcode';
try { cp.execFileSync('xcode-select', ['-p'], { stdio: 'ignore' }); simulators = 'unreachable'; } catch {}
if (simulators !== 'no-xcode') {
  try { cp.execFileSync('xcrun', ['simctl', 'list', 'runtimes'], { stdio: 'ignore', timeout: 120000 }); simulators = 'reachable'; } catch {}
}
fs.writeFileSync(out + '/checks.txt', `user ${os.userInfo().username}\nsudo ${sudo}\nsession ${session === String(process.getuid()) ? 'own' : 'uid ' + session}\nsimulators ${simulators}\n`);
const finish = (lanResult) => {
  fs.appendFileSync(out + '/checks.txt', `lan ${lanResult}\n`);
  setTimeout(() => fs.writeFileSync(out + '/hello.txt', 'built in ' + os.platform() + '\n'), 20000);
};
if (!lan) finish('no-address');
else {
  const s = net.connect({ host: lan, port: Number(port), timeout: 5000 });
  s.on('connect', () => { s.destroy(); finish('reached'); });
  s.on('timeout', () => { s.destroy(); finish('blocked'); });
  s.on('error', () => finish('blocked'));
}
JS
	echo "$(ipconfig getifaddr en0 2>/dev/null || ipconfig getifaddr en1 2>/dev/null || true) ${url##*:}" >"$project/lan-address.txt"
	echo '{"expo": {"name": "mac-e2e", "slug": "mac-e2e", "android": {"package": "build.freeagent.mace2e"}}}' >"$project/app.json"

	# -o names the directory the artifacts go into.
	EXPO_CONTROLLER_URL=$url EXPO_CONTROLLER_API_KEY=$dev_key \
		"$work/bin/expo-build" build "$project" --platform android --output "$work/out/" >"$work/submit.log" 2>&1 &
	local submit=$!
	for i in $(seq 1 600); do
		vm=$(agent_vms | head -1)
		[ -n "$vm" ] && break
		kill -0 "$submit" 2>/dev/null || break
		sleep 1
	done
	if [ -n "$vm" ]; then
		pgrep -f "caffeinate -i -w $worker_pid" >/dev/null && caffeinated=yes
		expect "the Mac is kept awake (caffeinate -i) while $vm builds" "$caffeinated" yes
		# Tart's clone prunes cached images (the template's base among them)
		# unless TART_NO_AUTO_PRUNE is in its environment; ps -E shows it.
		local prune="absent"
		ps -E -ww -o command= -p "$(pgrep -f "tart run .*$vm" | head -1)" 2>/dev/null | grep -q "TART_NO_AUTO_PRUNE=1" && prune="set"
		expect "tart runs with TART_NO_AUTO_PRUNE=1 (no pruning of the owner's images)" "$prune" set
		# The template's lockdown: the image's well-known password no
		# longer works, its user has no passwordless sudo, sshd is off.
		local known="works" sudo_ok="yes" sshd="on"
		tart exec "$vm" dscl . -authonly admin "${FREEAGENT_TEMPLATE_SSH_PASSWORD:-admin}" >/dev/null 2>&1 || known="refused"
		tart exec "$vm" sudo -n true >/dev/null 2>&1 || sudo_ok="no"
		tart exec "$vm" launchctl print-disabled system 2>/dev/null | grep -Eq '"com.openssh.sshd" => (disabled|true)' && sshd="off"
		expect "the build VM refuses the image's well-known password" "$known" refused
		expect "the build VM's user has no passwordless sudo" "$sudo_ok" no
		expect "the build VM's sshd is disabled" "$sshd" off
		# The lockdown re-keyed the login keychain to the new password, so
		# the auto-login unlocked it (a locked one means a dialog on every
		# clone's screen); show-keychain-info fails on a locked keychain.
		local keychain="locked"
		tart exec "$vm" security show-keychain-info login.keychain-db >/dev/null 2>&1 && keychain="unlocked"
		expect "the auto-login unlocked the login keychain" "$keychain" unlocked
		# An iOS template put Apple's WWDR intermediates in the System
		# keychain, where the build user's code signing finds them (the
		# chain of a distribution certificate needs one).
		if grep -q '"ios"' "${TART_HOME:-$HOME/.tart}/vms/$template/freeagent-template.json" 2>/dev/null; then
			local wwdr="missing"
			tart exec "$vm" sudo -n -u freeagent-build security find-certificate -c "Apple Worldwide Developer Relations" \
				/Library/Keychains/System.keychain >/dev/null 2>&1 && wwdr="found"
			expect "the build user finds Apple's WWDR intermediate in the System keychain" "$wwdr" found
		else
			echo "NOTE  $template builds no iOS (or is a remote image without its marker): Apple's WWDR intermediates were not checked"
		fi
		# A second worker on this Mac (the menu-bar app beside `freeagent
		# run`) sweeps orphans when it starts: it must leave this VM alone.
		start_worker mac-e2e-second "$work/agent-second"
		sleep 5
		if agent_vms | grep -qx "$vm"; then pass "a second worker's start left the running $vm alone"; else fail "a second worker's start removed $vm"; fi
	else
		fail "no running fa-* VM appeared (see $work/submit.log and $work/mac-e2e.log)"
	fi
	if wait "$submit"; then
		got=$(cat "$work/out/hello.txt" 2>/dev/null || true)
		expect "the artifact, written by the VM through the shared folder" "$got" "built in darwin"
		expect "build commands run as the unprivileged build user" "$(sed -n 's/^user //p' "$work/out/checks.txt")" freeagent-build
		expect "the build user has no sudo" "$(sed -n 's/^sudo //p' "$work/out/checks.txt")" refused
		expect "build commands run in the build user's own launchd session" "$(sed -n 's/^session //p' "$work/out/checks.txt")" own
		if grep -q "^simulators no-xcode" "$work/out/checks.txt"; then
			echo "NOTE  the template has no Xcode: the simulator service was not checked"
		else
			expect "the build user reaches the simulator service (xcrun simctl list runtimes)" "$(sed -n 's/^simulators //p' "$work/out/checks.txt")" reachable
		fi
		if grep -q "^lan no-address" "$work/out/checks.txt"; then
			echo "NOTE  this Mac has no LAN address on en0/en1: Softnet's LAN isolation was not checked"
		else
			expect "Softnet keeps the VM off this Mac's LAN address" "$(sed -n 's/^lan //p' "$work/out/checks.txt")" blocked
		fi
	else
		cat "$work/submit.log"
		fail "the build completed (see $work/submit.log and $work/mac-e2e.log)"
	fi
	for i in $(seq 1 20); do
		pgrep -f "caffeinate -i -w $worker_pid" >/dev/null || break
		sleep 1
	done
	if pgrep -f "caffeinate -i -w $worker_pid" >/dev/null; then fail "the power assertion outlived the build"; else pass "the power assertion was released once idle"; fi
	case $template in
	*/*)
		local pulls
		pulls=$(grep -c "pulling the VM template" "$work/mac-e2e.log" || true)
		if [ "$cached_before" = yes ]; then
			expect "the cached remote template was not pulled again" "$pulls" 0
		else
			expect "the remote template was pulled once" "$pulls" 1
		fi
		;;
	esac
	spare_checks
	handback_checks
	[ "$failed" = 0 ] || exit 1
	echo "--- passed: every check"
}

# build_json ID prints the controller's view of a build (api.Build).
build_json() { curl -fsS -H "X-API-Key: $dev_key" "$url/api/builds/$1"; }

# handback_checks: launchd gives a job seconds at logout, restart or
# shutdown, not the minutes a build takes. A headless worker (what
# `service install --headless` installs: --on-sigterm hand-back) hands its
# running build back at the first SIGTERM, so the build runs again rather
# than waiting out its lease.
handback_checks() {
	echo "--- 7. a headless worker hands its running build back on SIGTERM (logout, restart, shutdown)"
	local long=$work/long id="" i state="" pid
	# The farm's workers drain (they run nothing now) and leave the build
	# to the headless one.
	for pid in "${worker_pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
	for pid in "${worker_pids[@]}"; do wait "$pid" 2>/dev/null || true; done
	start_worker mac-e2e-headless "$work/agent-headless" --on-sigterm hand-back
	pid=$last_pid
	mkdir -p "$long"
	echo '{"name": "mac-e2e-long", "version": "1.0.0", "scripts": {"freeagent:build": "node build.js"}}' >"$long/package.json"
	echo '{"expo": {"name": "mac-e2e-long", "slug": "mac-e2e-long", "android": {"package": "build.freeagent.mace2elong"}}}' >"$long/app.json"
	echo "console.log('long build running'); setTimeout(() => {}, 900000);" >"$long/build.js"
	id=$(EXPO_CONTROLLER_URL=$url EXPO_CONTROLLER_API_KEY=$dev_key "$work/bin/expo-build" build "$long" --platform android --no-wait --json 2>>"$work/submit-long.log" |
		grep -o '"id": *"[^"]*"' | head -1 | sed 's/.*"\([^"]*\)"$/\1/')
	if [ -z "$id" ]; then
		fail "the long build was not queued (see $work/submit-long.log)"
		return
	fi
	for i in $(seq 1 600); do
		build_json "$id" | grep -q '"status": *"building"' && state=building && break
		sleep 1
	done
	if [ "$state" != building ]; then
		fail "the long build $id did not start within 600 s"
		return
	fi
	sleep 10 # past the VM's boot, into the build
	kill -TERM "$pid"
	state=still-running
	for i in $(seq 1 30); do
		if ! kill -0 "$pid" 2>/dev/null; then state=exited; break; fi
		sleep 1
	done
	expect "the headless worker exits within 30 s of SIGTERM" "$state" exited
	if build_json "$id" | grep -q '"error_code": *"released"'; then
		pass "the running build was handed back (its attempt ended released)"
	else
		fail "the running build was not handed back: $(build_json "$id" | head -c 2000)"
	fi
	EXPO_CONTROLLER_URL=$url EXPO_CONTROLLER_API_KEY=$dev_key "$work/bin/expo-build" build:cancel "$id" >/dev/null 2>&1 || true
}

# spare_checks: the worker (warm spares on by default) boots the next
# build's VM before the build comes; two quick builds, each submitted once
# a spare is ready, must say in their logs that they ran on a warm spare,
# and the VM phase they report (claim to the bootstrap's first line, on
# the host's clock) is printed: the figure docs/performance.md compares.
spare_checks() {
	echo "--- 6. warm spares"
	local quick=$work/quick n ready phase
	mkdir -p "$quick"
	echo '{"name": "mac-e2e-quick", "version": "1.0.0", "scripts": {"freeagent:build": "node build.js"}}' >"$quick/package.json"
	echo '{"expo": {"name": "mac-e2e-quick", "slug": "mac-e2e-quick", "android": {"package": "build.freeagent.mace2equick"}}}' >"$quick/app.json"
	echo "require('fs').writeFileSync(process.env.FREEAGENT_ARTIFACTS_DIR + '/hello.txt', 'quick');" >"$quick/build.js"
	for n in 1 2; do
		ready=0
		for _ in $(seq 1 300); do
			[ "$(grep -c "warm spare ready" "$work/mac-e2e.log" || true)" -ge "$n" ] && ready=1 && break
			sleep 1
		done
		if [ "$ready" = 0 ]; then
			fail "no warm spare became ready within 300 s (see $work/mac-e2e.log)"
			return
		fi
		if ! EXPO_CONTROLLER_URL=$url EXPO_CONTROLLER_API_KEY=$dev_key \
			"$work/bin/expo-build" build "$quick" --platform android --output "$work/out-quick-$n/" >"$work/submit-quick-$n.log" 2>&1; then
			fail "quick build $n (see $work/submit-quick-$n.log)"
			continue
		fi
		phase=$(grep -o "▸ VM: .*" "$work/submit-quick-$n.log" | head -1)
		echo "      build $n: ${phase:-no VM line in the log}"
		case $phase in
		*"a warm spare"*) pass "quick build $n ran on a warm spare" ;;
		*) fail "quick build $n did not run on a warm spare (see $work/submit-quick-$n.log)" ;;
		esac
	done
}

# The ios mode's checks: each prints a PASS or FAIL line and joins the
# summary that finish prints; any FAIL makes the run exit 1.
failed=0
pass() { echo "PASS  $*"; summary="${summary}PASS  $*"$'\n'; }
fail() { echo "FAIL  $*"; summary="${summary}FAIL  $*"$'\n'; failed=1; }
# expect DESCRIPTION GOT WANT
expect() {
	if [ "$2" = "$3" ]; then pass "$1: $2"; else fail "$1: got '$2', want '$3'"; fi
}
# show TITLE TEXT prints a tool's output, indented, for the owner to read.
show() { echo "  $1:"; printf '%s\n' "$2" | sed 's/^/    /'; }
# plist FILE KEYPATH prints a string, number or boolean value, or nothing.
plist() { plutil -extract "$2" raw -o - "$1" 2>/dev/null || true; }
# names DIR lists what a folder holds, on one line.
names() {
	local list
	list=$(find "$1" -mindepth 1 -maxdepth 1 2>&1 | sed 's|.*/||' | tr '\n' ' ') || true
	echo "${list:-nothing}"
}
# devices PROFILE-PLIST counts a decoded profile's ProvisionedDevices.
devices() {
	{ plutil -extract ProvisionedDevices xml1 -o - "$1" 2>/dev/null || true; } | grep -c '<string>' || true
}
# only_one GLOB-RESULTS... is the single match of a glob, or nothing.
only_one() { if [ $# = 1 ] && [ -e "$1" ]; then echo "$1"; fi; }
# covers APP-IDENTIFIER BUNDLE-ID: a profile's application-identifier
# (TEAM.id, TEAM.prefix.* or TEAM.*) covers the bundle id.
covers() {
	local pattern=${1#*.}
	# shellcheck disable=SC2053 # the profile's * is a glob on purpose
	[[ $2 == $pattern ]]
}

# credential_files prints "target|profile|certificate" per target of
# credentials.json (target "-" for the single-target form: the app's).
credential_files() {
	node -e '
const fs = require("fs");
const fail = (msg) => { console.error("credentials.json: " + msg); process.exit(1); };
const ios = (JSON.parse(fs.readFileSync(process.argv[1], "utf8")) || {}).ios;
if (!ios || typeof ios !== "object") fail("no ios section");
const targets = typeof ios.provisioningProfilePath === "string" ? {"-": ios} : ios;
for (const [name, t] of Object.entries(targets)) {
  const cert = (t && t.distributionCertificate) || {};
  if (typeof (t || {}).provisioningProfilePath !== "string" || typeof cert.path !== "string")
    fail("ios target " + name + " lacks provisioningProfilePath or distributionCertificate.path");
  console.log([name, t.provisioningProfilePath, cert.path].join("|"));
}' "$1"
}

# verify_simulator OUT-DIR checks the simulator build's artifact.
verify_simulator() {
	local tgz dir app exe platforms
	tgz=$(only_one "$1"/*.tar.gz)
	if [ -z "$tgz" ]; then
		fail "simulator artifact: want one .tar.gz, the build gave: $(names "$1")"
		return
	fi
	pass "simulator artifact is a .tar.gz: $(basename "$tgz")"
	dir=$work/simulator
	mkdir -p "$dir"
	if ! tar -xzf "$tgz" -C "$dir"; then
		fail "$(basename "$tgz") unpacks with tar -xz"
		return
	fi
	app=$dir/$app_name.app
	if [ ! -d "$app" ]; then
		fail "the archive holds $app_name.app: it holds $(names "$dir")"
		return
	fi
	pass "the archive holds $app_name.app"
	expect "simulator app CFBundleIdentifier" "$(plist "$app/Info.plist" CFBundleIdentifier)" "$bundle_id"
	expect "simulator app CFBundleSupportedPlatforms" "$(plist "$app/Info.plist" CFBundleSupportedPlatforms.0)" iPhoneSimulator
	exe=$app/$(plist "$app/Info.plist" CFBundleExecutable)
	if [ ! -f "$exe" ]; then
		fail "the app's CFBundleExecutable exists: no $exe"
		return
	fi
	show "lipo -info" "$(lipo -info "$exe" 2>&1)"
	show "file" "$(file -b "$exe" 2>&1)"
	show "vtool -show-build" "$(vtool -show-build "$exe" 2>&1)"
	# Every architecture's LC_BUILD_VERSION names the platform (7 is
	# PLATFORM_IOSSIMULATOR, for a vtool that prints numbers).
	platforms=$(vtool -show-build "$exe" 2>/dev/null | awk '$1 == "platform" { print ($2 == "7" ? "IOSSIMULATOR" : $2) }' | sort -u | tr '\n' ' ') || true
	expect "executable's build platform (vtool)" "$platforms" "IOSSIMULATOR "
}

# verify_bundle BUNDLE WHAT checks a signed bundle's embedded profile against
# its bundle id and the profiles the owner supplied, and prints the profile.
# It sets bundle_team and bundle_devices for the caller.
verify_bundle() {
	local bundle=$1 what=$2 id decoded appid uuid
	bundle_team="" bundle_devices=""
	id=$(plist "$bundle/Info.plist" CFBundleIdentifier)
	echo "  $what bundle id: $id"
	if [ ! -f "$bundle/embedded.mobileprovision" ]; then
		fail "$what ($id) has its own embedded.mobileprovision"
		return
	fi
	decoded=$work/ipa-profiles/$(basename "$bundle").plist
	mkdir -p "$work/ipa-profiles"
	if ! security cms -D -i "$bundle/embedded.mobileprovision" >"$decoded" 2>/dev/null; then
		fail "$what's embedded.mobileprovision decodes with security cms -D"
		return
	fi
	appid=$(plist "$decoded" Entitlements.application-identifier)
	uuid=$(plist "$decoded" UUID)
	bundle_team=$(plist "$decoded" TeamIdentifier.0)
	bundle_devices=$(devices "$decoded")
	show "security cms -D -i $what/embedded.mobileprovision" "Name: $(plist "$decoded" Name)
UUID: $uuid
application-identifier: $appid
ProvisionedDevices: $bundle_devices
ProvisionsAllDevices: $(plist "$decoded" ProvisionsAllDevices | grep . || echo false)"
	if covers "$appid" "$id"; then
		pass "$what's profile application-identifier $appid matches its bundle id $id"
	else
		fail "$what's profile application-identifier $appid matches its bundle id $id"
	fi
	case " $supplied_uuids " in
	*" $uuid "*) pass "$what embeds a profile from credentials.json: $uuid" ;;
	*) fail "$what embeds a profile from credentials.json: $uuid is none of$supplied_uuids" ;;
	esac
}

# verify_ipa OUT-DIR checks the signed build's .ipa.
verify_ipa() {
	local ipa dir app sig authority team appex appex_id
	ipa=$(only_one "$1"/*.ipa)
	if [ -z "$ipa" ]; then
		fail "signed artifact: want one .ipa, the build gave: $(names "$1")"
		return
	fi
	pass "signed artifact is an .ipa: $(basename "$ipa")"
	dir=$work/ipa
	if ! unzip -q "$ipa" -d "$dir"; then
		fail "$(basename "$ipa") unzips"
		return
	fi
	app=$(only_one "$dir"/Payload/*.app)
	if [ -z "$app" ]; then
		fail "the IPA holds one Payload/*.app: it holds $(names "$dir/Payload")"
		return
	fi
	expect "the IPA's app" "$(basename "$app")" "$app_name.app"

	sig=$(codesign -dv --verbose=4 "$app" 2>&1) || true
	show "codesign -dv --verbose=4 Payload/$(basename "$app")" "$sig"
	authority=$(printf '%s\n' "$sig" | sed -n 's/^Authority=//p' | sed -n 1p)
	team=$(printf '%s\n' "$sig" | sed -n 's/^TeamIdentifier=//p')
	case $authority in
	*Distribution:*) pass "signed by a distribution certificate: $authority" ;;
	*) fail "signed by a distribution certificate: the leaf authority is '$authority'" ;;
	esac

	expect "app CFBundleIdentifier" "$(plist "$app/Info.plist" CFBundleIdentifier)" "$bundle_id"
	verify_bundle "$app" app
	expect "codesign TeamIdentifier is the profile's team" "$team" "$bundle_team"
	# Internal distribution installs on the profile's devices (ad hoc) or on
	# any device (enterprise); a store profile cannot be installed.
	if [ "$bundle_devices" -gt 0 ] 2>/dev/null; then
		pass "ad hoc profile: $bundle_devices provisioned devices"
	elif [ "$(plist "$work/ipa-profiles/$(basename "$app").plist" ProvisionsAllDevices)" = true ]; then
		pass "enterprise profile: provisions all devices"
	else
		fail "internal distribution profile: no ProvisionedDevices and no ProvisionsAllDevices (a store profile?)"
	fi

	for appex in "$app"/PlugIns/*.appex; do
		[ -d "$appex" ] || { echo "  no app extensions (PlugIns/*.appex) in the IPA"; break; }
		appex_id=$(plist "$appex/Info.plist" CFBundleIdentifier)
		case $appex_id in
		"$bundle_id".*) pass "extension $(basename "$appex") bundle id $appex_id is under the app's" ;;
		*) fail "extension $(basename "$appex") bundle id $appex_id is under the app's $bundle_id" ;;
		esac
		verify_bundle "$appex" "PlugIns/$(basename "$appex")"
	done

	if sig=$(codesign --verify --deep --strict --verbose=2 "$app" 2>&1); then
		pass "codesign --verify --deep --strict"
	else
		fail "codesign --verify --deep --strict"
	fi
	show "codesign --verify --deep --strict --verbose=2" "$sig"
}

# submit PROFILE OUT-DIR builds the app with an eas.json profile and
# downloads its artifacts; false when the build did not complete.
submit() {
	EXPO_CONTROLLER_URL=$url EXPO_CONTROLLER_API_KEY=$dev_key \
		"$work/bin/expo-build" build "$project" --platform ios --profile "$1" --non-interactive \
		--build-timeout "${FREEAGENT_E2E_IOS_TIMEOUT:-60m}" --output "$2/"
}

# ios_mode: a create-expo-app app through the default iOS pipeline.
ios_mode() {
	local target profile cert decoded appid marker f
	supplied_uuids=""
	if [ -n "$credentials" ]; then
		echo "--- the provisioning profiles of $credentials/credentials.json"
		credential_files "$credentials/credentials.json" >"$work/credential-files" ||
			die "cannot read $credentials/credentials.json (see the error above)"
		mkdir -p "$work/profiles"
		while IFS='|' read -r target profile cert; do
			[ "$target" != - ] || target=$app_name
			case $profile in /*) ;; *) profile=$credentials/$profile ;; esac
			decoded=$work/profiles/$(basename "$profile").plist
			security cms -D -i "$profile" >"$decoded" 2>/dev/null ||
				die "$profile (target $target) is not a provisioning profile security cms -D can decode"
			supplied_uuids="$supplied_uuids $(plist "$decoded" UUID)"
			appid=$(plist "$decoded" Entitlements.application-identifier)
			echo "  target $target: $(plist "$decoded" Name) ($(plist "$decoded" UUID)), $appid, certificate $cert"
			if [ -z "$bundle_id" ] && [ "$target" = "$app_name" ]; then
				bundle_id=${appid#*.}
				case $bundle_id in *'*'*) die "target $target's profile is a wildcard ($appid): pass --bundle-id" ;; esac
			fi
		done <"$work/credential-files"
		[ -n "$bundle_id" ] || die "credentials.json names no target $app_name (the app's): pass --name with its target's name, or --bundle-id"
	fi
	bundle_id=${bundle_id:-build.freeagent.mace2e}

	marker=${TART_HOME:-$HOME/.tart}/vms/$template/freeagent-template.json
	if [ -f "$marker" ]; then
		grep -q '"ios"' "$marker" || die "the template $template cannot build iOS ($marker: $(cat "$marker")): make one from a *-xcode base image with scripts/build-vm-template.sh"
	else
		echo "warning: $marker is missing: the worker may not advertise ios (rebuild the template with scripts/build-vm-template.sh)" >&2
	fi

	echo "--- 1. a fresh Expo app: $app_name ($bundle_id), npx create-expo-app@latest --template blank"
	project=$work/$app_name
	(cd "$work" && CI=1 npx --yes create-expo-app@latest "$app_name" --template blank --yes)
	[ -f "$project/app.json" ] || die "create-expo-app made no $project/app.json"
	node -e '
const fs = require("fs");
const [file, name, id] = process.argv.slice(1);
const doc = JSON.parse(fs.readFileSync(file, "utf8"));
const expo = doc.expo || {};
doc.expo = {...expo, name, slug: name.toLowerCase(), ios: {...(expo.ios || {}), bundleIdentifier: id}};
fs.writeFileSync(file, JSON.stringify(doc, null, 2) + "\n");' "$project/app.json" "$app_name" "$bundle_id"
	cat >"$project/eas.json" <<'JSON'
{
  "build": {
    "simulator": {
      "ios": { "simulator": true }
    },
    "preview": {
      "distribution": "internal",
      "credentialsSource": "local"
    }
  }
}
JSON
	if [ -n "$credentials" ]; then
		# As EAS advises, the credentials stay out of git; expo-build reads
		# them anyway and never uploads them.
		cp "$credentials/credentials.json" "$project/"
		echo credentials.json >>"$project/.gitignore"
		while IFS='|' read -r target profile cert; do
			for f in "$profile" "$cert"; do
				case $f in /*) continue ;; esac
				mkdir -p "$project/$(dirname "$f")"
				cp "$credentials/$f" "$project/$f"
				grep -qxF "/$f" "$project/.gitignore" || echo "/$f" >>"$project/.gitignore"
			done
		done <"$work/credential-files"
	fi

	echo "--- 2. the farm: a controller and a worker cloning $template"
	start_farm

	echo "--- 3. simulator build (profile simulator, no credentials)"
	if submit simulator "$work/out-simulator"; then
		pass "the simulator build completed"
		verify_simulator "$work/out-simulator"
	else
		fail "the simulator build completed (see expo-build's output above and $work/mac-e2e.log)"
	fi

	if [ -z "$credentials" ]; then
		echo "--- 4. signed build skipped: no --credentials"
	else
		echo "--- 4. signed internal build (profile preview, credentials.json)"
		if submit preview "$work/out-preview"; then
			pass "the signed build completed"
			verify_ipa "$work/out-preview"
		else
			fail "the signed build completed (see expo-build's output above and $work/mac-e2e.log)"
		fi
	fi
	[ "$failed" = 0 ] || exit 1
	echo "--- passed: every check"
}

if [ "$mode" = ios ]; then ios_mode; else all_mode; fi
