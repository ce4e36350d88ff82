#!/usr/bin/env bash
# make package-check: what can be checked of the Mac release on Linux.
# Cross-compiles every binary for darwin/arm64 and darwin/amd64 without cgo,
# assembles one FreeAgent.app per architecture (Linux has no lipo, so no
# universal binary here: `make app` on a Mac makes that one), ad-hoc signs
# the bundle's binaries with quill, and validates the bundle, its Info.plist,
# icon, entitlements and signatures, and the minimum macOS of every binary
# and of make app's cgo build.
set -euo pipefail
cd "$(dirname "$0")/.."

out=${PACKAGE_CHECK_DIR:-bin/package-check}
version=$(git describe --tags --always --dirty 2>/dev/null || echo unknown)
rm -rf "$out"
mkdir -p "$out/tools"

go build -o "$out/tools/" ./packaging/cmd/mkapp
mkapp=$out/tools/mkapp

for arch in arm64 amd64; do
	echo "--- darwin/$arch: build"
	GOOS=darwin GOARCH=$arch CGO_ENABLED=0 go build -o "$out/$arch/bin/" \
		./controller/cmd/freeagent-controller ./tray/cmd/freeagent ./vmbootstrap/cmd/freeagent-vm ./cli/cmd/expo-build
done

for arch in arm64 amd64; do
	echo "--- darwin/$arch: minimum macOS of every binary (LC_BUILD_VERSION)"
	"$mkapp" minos "$out/$arch"/bin/*
done

# make app's cgo build links through clang, which targets the build Mac's own
# macOS unless MACOSX_DEPLOYMENT_TARGET says otherwise. Linux cannot link it,
# so run make-app.sh with a stand-in uname and go up to that build and check
# the variable it exports is the bundle's LSMinimumSystemVersion.
echo "--- make-app.sh: the cgo build's MACOSX_DEPLOYMENT_TARGET is the bundle's minimum macOS"
go test -count=1 -run '^TestMakeAppBuildsForTheBundlesMinimumMacOS$' ./packaging/bundle

for arch in arm64 amd64; do
	echo "--- darwin/$arch: FreeAgent.app"
	"$mkapp" assemble --out "$out/$arch" --version "$version" \
		--freeagent "$out/$arch/bin/freeagent" --freeagent-vm "$out/arm64/bin/freeagent-vm"
	app=$out/$arch/FreeAgent.app
	go tool -modfile=packaging/quill.mod quill sign --quiet --ad-hoc --identity build.freeagent.FreeAgent \
		--entitlements packaging/FreeAgent.entitlements "$app/Contents/MacOS/freeagent"
	go tool -modfile=packaging/quill.mod quill sign --quiet --ad-hoc --identity build.freeagent.freeagent-vm \
		"$app/Contents/Resources/freeagent-vm"
	"$mkapp" validate --arch "$arch" --signed --entitlements packaging/FreeAgent.entitlements "$app"
	desc=$(go tool -modfile=packaging/quill.mod quill describe "$app/Contents/MacOS/freeagent")
	for want in build.freeagent.FreeAgent com.apple.security.network.client; do
		if ! grep -q "$want" <<<"$desc"; then
			echo "quill describe: the signature of $app/Contents/MacOS/freeagent lacks $want:" >&2
			echo "$desc" >&2
			exit 1
		fi
	done
done
echo "--- package-check passed ($version)"
