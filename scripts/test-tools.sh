#!/usr/bin/env bash
# Installs every program the farm and its tests run, and is the one list of
# them: `make run`, `make test` and so CI (.ci/run) run it first. A test
# that finds one of these missing fails naming this script
# (internal/testsupport/testtool).
#
#   scripts/test-tools.sh          install what is missing (as root, or
#                                  through sudo without a password)
#   scripts/test-tools.sh --check  only say what is missing (exit 1 if any)
#
# Where it cannot install (no apt-get, or no root), it installs nothing,
# names what is missing and the one command that installs it, and exits 1.
# Go is the one prerequisite it does not install.
set -euo pipefail

check_only=false
case "${1:-}" in
--check) check_only=true ;;
"") ;;
*) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac

has() { command -v "$1" >/dev/null 2>&1; }

# missing collects "program (Debian package)" for the report; packages the
# Debian packages to install.
missing=()
packages=()
need() { # need PROGRAM PACKAGE...
	local prog=$1; shift
	missing+=("$prog ($*)")
	packages+=("$@")
}

# PostgreSQL server binaries: the tests start throwaway clusters from them.
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && ! has initdb; then
	need initdb postgresql
fi
# npm: the end-to-end builds run a fixture project's `npm run freeagent:build`;
# cli/easjson, cli/appconfig, internal/xcode and internal/provisioning `npm ci`
# their locked oracles (@expo/eas-json, @expo/config, @expo/config-plugins,
# @expo/plist, from the npm registry) into temporary directories.
has npm || need npm nodejs npm
# Chromium: the dashboard's end-to-end tests drive it headless (chromedp).
has chromium || has chromium-browser || need chromium chromium
# The shellcheck tool: make vet checks the shell scripts (VM template, packaging, launcher).
has shellcheck || need shellcheck shellcheck
# dbus: the menu-bar test reads and clicks the app's menu over a private session bus.
has dbus-daemon || need dbus-daemon dbus
# JDK and Android build tools: the credentials tests make keystores with
# keytool; the signing tests sign APKs/AABs with apksigner, zipalign and
# jarsigner and compare our reading of the signatures with theirs.
has keytool || need keytool openjdk-17-jdk-headless
has jar || need jar openjdk-17-jdk-headless
# javac: `make standins` and the tests compile the stand-in Gradle's
# launcher class (internal/standins/fakegradle) that the real wrapper loads.
has javac || need javac openjdk-17-jdk-headless
has jarsigner || need jarsigner openjdk-17-jdk-headless
has apksigner || need apksigner apksigner
has zipalign || need zipalign zipalign
# aapt: the tests read the stand-in Gradle's APKs (application id,
# versions) with `aapt dump badging`, a reader independent of the writer.
has aapt || need aapt aapt
# openssl: the provisioning and iOS credentials tests sign profiles with
# `openssl cms` and export distribution certificates with `openssl pkcs12`.
has openssl || need openssl openssl
# promtool: deploy/'s tests check the alert rules and the dashboard's queries.
has promtool || need promtool prometheus
if [ "$(uname -s)" = Linux ]; then
	# iproute2 and iptables: the fake tart's vmnet emulation (FAKETART_NET=vmnet)
	# gives each end-to-end guest its own network namespace behind a NATed bridge.
	has ip || need ip iproute2
	has iptables || need iptables iptables
	# systemd-analyze: deploy/'s tests check the systemd unit.
	has systemd-analyze || need systemd-analyze systemd
	# sudo and useradd: vmbootstrap's build-user tests run build commands as
	# throwaway users through sudo -n -u, as freeagent-vm does in the VM.
	has sudo || need sudo sudo
	has useradd || need useradd passwd
fi
# zbar-tools: the install-link tests read the QR code back with zbarimg, a
# decoder independent of the encoder the controller uses.
has zbarimg || need zbarimg zbar-tools

# versitygw: the blob-store tests run against a real S3-compatible gateway
# (controller/blobs/s3blobs/s3test starts it from $(go env GOPATH)/bin).
# go install needs no root, so it is installed even when the rest cannot be;
# under sudo it is left to the user's own run, whose GOPATH the tests read.
versitygw=github.com/versity/versitygw/cmd/versitygw@v1.8.0
if [ -z "${SUDO_USER:-}" ] && ! has versitygw && [ ! -x "$(go env GOPATH)/bin/versitygw" ]; then
	if $check_only; then
		missing+=("versitygw (go install $versitygw)")
	else
		echo "--- installing versitygw"
		go install "$versitygw"
	fi
fi

if [ ${#missing[@]} -eq 0 ]; then
	exit 0
fi

# sort -u: one package may provide several programs.
if [ ${#packages[@]} -gt 0 ]; then
	mapfile -t packages < <(printf '%s\n' "${packages[@]}" | sort -u)
fi

report() {
	echo "The tests need programs this machine does not have:" >&2
	printf '  %s\n' "${missing[@]}" >&2
	echo "$1" >&2
	exit 1
}

if $check_only; then
	if [ ${#packages[@]} -eq 0 ]; then report "Install them with: $0"; fi
	report "Install them with: sudo $0 (then make test, which installs versitygw as you)"
fi
if ! has apt-get; then
	report "This script installs them with apt-get (Debian, Ubuntu); install the programs named above with this system's package manager (the Debian package is in parentheses; on macOS, Homebrew has them), then run make test again."
fi
if [ "$(id -u)" -eq 0 ]; then
	as_root() { "$@"; }
elif has sudo && sudo -n true 2>/dev/null; then
	as_root() { sudo -n "$@"; }
else
	report "Installing them needs root. Run: sudo $0 (then make test again)"
fi

echo "--- installing ${packages[*]}"
as_root apt-get update -qq
DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
