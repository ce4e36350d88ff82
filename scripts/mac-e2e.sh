#!/usr/bin/env bash
# Opt-in end-to-end run on a real Mac (never in CI): what Linux CI can only
# do against fakes. See --help.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
	cat <<'USAGE'
Usage: scripts/mac-e2e.sh [--template NAME] [--skip-build]

On a Mac with Tart, in order:
  1. the Tart driver's contract tests against the real tart (FREEAGENT_TEST_REAL_TART=1),
     on a throwaway `tart create --linux` VM;
  2. the Keychain tests against this Mac's login keychain (FREEAGENT_TEST_REAL_KEYCHAIN=1;
     they use the service build.freeagent.test and delete what they write), with cgo
     (Keychain API) and without (/usr/bin/security), and the launchd and packaging tests;
  3. a whole build: a controller on its own PostgreSQL (needs initdb and postgres on PATH,
     e.g. brew install postgresql@16), a worker with the tart driver cloning the template
     (default freeagent-template, made by scripts/build-vm-template.sh), and expo-build
     submitting a project whose freeagent:build script writes an artifact, downloaded and
     compared. --skip-build stops after step 2.
Work files go to a temp folder, kept (and named) when a step fails. The controller
listens on port FREEAGENT_E2E_PORT (default 8787) of every address, for the VM.
USAGE
}

template=freeagent-template
skip_build=0
while [ $# -gt 0 ]; do
	case $1 in
	--template) template=${2:?--template needs a VM name}; shift 2 ;;
	--skip-build) skip_build=1; shift ;;
	-h | --help) usage; exit 0 ;;
	*) echo "mac-e2e.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
	esac
done

die() { echo "mac-e2e.sh: $*" >&2; exit 1; }
[ "$(uname -s)" = Darwin ] || die "this runs on a Mac with Tart; on Linux, make test covers the same code against fakes"
command -v tart >/dev/null || die "tart is not installed: brew install cirruslabs/cli/tart"

work=$(mktemp -d -t freeagent-e2e)
pids=()
contract_vm=fa-contract-template-$$
finish() {
	status=$?
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	tart delete "$contract_vm" >/dev/null 2>&1 || true
	if [ "$status" = 0 ]; then rm -rf "$work"; else echo "mac-e2e.sh: failed; logs and files in $work" >&2; fi
}
trap finish EXIT

echo "--- 1. Tart driver contract tests against the real tart"
tart create --linux "$contract_vm"
FREEAGENT_TEST_REAL_TART=1 FREEAGENT_TEST_TART_TEMPLATE=$contract_vm go test -count=1 ./agent/tart/

echo "--- 2. Keychain, launchd and packaging on macOS"
FREEAGENT_TEST_REAL_KEYCHAIN=1 CGO_ENABLED=1 go test -count=1 ./agent/secrets/ ./launchd/ ./packaging/... ./tray/...
FREEAGENT_TEST_REAL_KEYCHAIN=1 CGO_ENABLED=0 go test -count=1 ./agent/secrets/
[ "$skip_build" = 1 ] && { echo "--- passed (build skipped)"; exit 0; }

echo "--- 3. a whole build in a Tart VM cloned from $template"
tart list --source local --format json | grep -q "\"Name\" *: *\"$template\"" ||
	die "no local VM $template: make one with scripts/build-vm-template.sh (or pass --template)"
go build -o "$work/bin/" ./controller/cmd/freeagent-controller ./tray/cmd/freeagent ./cli/cmd/expo-build
GOOS=darwin GOARCH=arm64 CGO_ENABLED=0 go build -o "$work/guest/" ./vmbootstrap/cmd/freeagent-vm

# The guest reaches the controller at the host's address on Tart's network
# (the agent rewrites the loopback URL for it), so listen on every address.
port=${FREEAGENT_E2E_PORT:-8787}
"$work/bin/freeagent-controller" serve --data-dir "$work/controller" --listen "0.0.0.0:$port" >"$work/controller.log" 2>&1 &
pids+=($!)
url=http://127.0.0.1:$port
for i in $(seq 1 300); do
	grep -q "listening on" "$work/controller.log" && break
	kill -0 "${pids[0]}" 2>/dev/null || die "the controller exited; see $work/controller.log"
	[ "$i" = 300 ] && die "the controller did not start within 30 s; see $work/controller.log"
	sleep 0.1
done
keys() { "$work/bin/freeagent-controller" keys create --name "$1" --role "$2" --data-dir "$work/controller"; }
worker_key=$(keys mac-e2e-worker worker)
dev_key=$(keys mac-e2e-developer developer)

FREEAGENT_API_KEY=$worker_key "$work/bin/freeagent" run --controller-url "$url" --vm-driver tart \
	--template "$template" --bootstrap "$work/guest/freeagent-vm" --data-dir "$work/agent" \
	--name mac-e2e >"$work/agent.log" 2>&1 &
pids+=($!)

project=$work/project
mkdir -p "$project"
cat >"$project/package.json" <<'JSON'
{
  "name": "mac-e2e",
  "version": "1.0.0",
  "scripts": {
    "freeagent:build": "node -e \"require('fs').writeFileSync(process.env.FREEAGENT_ARTIFACTS_DIR + '/hello.txt', 'built in ' + require('os').platform() + '\\n')\""
  }
}
JSON
echo '{"expo": {"name": "mac-e2e", "slug": "mac-e2e", "android": {"package": "build.freeagent.mace2e"}}}' >"$project/app.json"

EXPO_CONTROLLER_URL=$url EXPO_CONTROLLER_API_KEY=$dev_key \
	"$work/bin/expo-build" submit "$project" --platform android --wait --output "$work/out"
got=$(cat "$work/out/hello.txt")
[ "$got" = "built in darwin" ] || die "artifact says '$got', want 'built in darwin' (a build in the VM)"
echo "--- passed: a build ran in a Tart VM and its artifact came back"
