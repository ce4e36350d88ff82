#!/usr/bin/env bash
# Opt-in: a real submission to your own Google Play internal track (never in
# CI: it needs Google, a Play app and its service account). See --help.
set -euo pipefail

usage() {
	cat <<'USAGE'
Usage: scripts/play-submit.sh --project DIR --key FILE [--build ID]

Sends an Android build of the Expo app in DIR to Google Play through your controller, as
`expo-build submit` does, and prints Play's answer. Before it:
  - the app exists in the Play Console and its first release was uploaded by hand (Play
    requires that once for a new app);
  - FILE is a JSON key of a Google Cloud service account with the Google Play Android
    Developer API enabled, invited in the Play Console (Users and permissions) with the
    release permissions for the app;
  - expo-build is configured for the controller (expo-build config) and that controller
    can reach Google (androidpublisher.googleapis.com, oauth2.googleapis.com).
Without --build it builds first (`expo-build build --platform android`, which waits). The track
and release status are eas.json's submit profile "production" (default: internal, completed).
The key is kept for the project on the farm (`expo-build credentials set
--service-account-key`), which a submit profile without serviceAccountKeyPath uses.
USAGE
}

dir="" key="" build=""
while [ $# -gt 0 ]; do
	case "$1" in
	--project) dir=$2; shift 2 ;;
	--key) key=$2; shift 2 ;;
	--build) build=$2; shift 2 ;;
	-h | --help) usage; exit 0 ;;
	*) echo "unknown argument: $1" >&2; usage >&2; exit 2 ;;
	esac
done
if [ -z "$dir" ] || [ -z "$key" ]; then
	usage >&2
	exit 2
fi
key=$(cd "$(dirname "$key")" && pwd)/$(basename "$key")
cd "$dir"
command -v expo-build >/dev/null || { echo "expo-build is not on PATH (make install, or go build ./cli/cmd/expo-build)" >&2; exit 2; }

expo-build credentials set --platform android --service-account-key "$key"
if [ -z "$build" ]; then
	out=$(mktemp)
	trap 'rm -f "$out"' EXIT
	expo-build build --platform android --json >"$out"
	build=$(sed -n 's/.*"id": *"\([^"]*\)".*/\1/p' "$out" | head -n 1)
	echo "build $build completed"
fi
expo-build submit --platform android --id "$build"
