#!/usr/bin/env bash
# make app: the release build of FreeAgent.app, on a Mac only (cgo with the
# macOS SDK for the Keychain and the menu bar, lipo, codesign, notarytool,
# stapler, hdiutil). Produces in $APP_DIR (default bin/app):
#   FreeAgent.app (universal: arm64 + amd64), FreeAgent-<version>.zip,
#   FreeAgent-<version>.dmg and free-agent.rb (the Homebrew cask for that dmg).
#
# Signing for distribution needs, in the environment:
#   FREEAGENT_SIGN_IDENTITY   a "Developer ID Application: …" identity in the keychain
#                             (list them: security find-identity -v -p codesigning)
#   FREEAGENT_NOTARY_PROFILE  a notarytool keychain profile, made once with
#                             xcrun notarytool store-credentials NAME --apple-id … --team-id …
# Without them the app is signed ad hoc (it runs on this Mac only) and not
# notarized, and the script says so.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(uname -s)" != Darwin ]; then
	echo "make app needs macOS (cgo with the macOS SDK, lipo, codesign, notarytool, hdiutil)." >&2
	echo "On Linux, make package-check builds and checks the bundle without them." >&2
	exit 1
fi

out=${APP_DIR:-bin/app}
identity=${FREEAGENT_SIGN_IDENTITY:-}
profile=${FREEAGENT_NOTARY_PROFILE:-}
entitlements=packaging/FreeAgent.entitlements
describe=$(git describe --tags --always --dirty)
rm -rf "$out"
mkdir -p "$out"

# cgo links through clang, which without a deployment target builds for the
# build Mac's own macOS: made on macOS 15, the app would refuse to start on 13
# and 14 (and mkapp validate rejects it). The target is the bundle's
# LSMinimumSystemVersion, from the constant that writes Info.plist.
MACOSX_DEPLOYMENT_TARGET=$(go run ./packaging/cmd/mkapp minimum-macos)
export MACOSX_DEPLOYMENT_TARGET

echo "--- build (cgo, arm64 + amd64, macOS $MACOSX_DEPLOYMENT_TARGET and later)"
for arch in arm64 amd64; do
	GOOS=darwin GOARCH=$arch CGO_ENABLED=1 go build -o "$out/$arch/" ./tray/cmd/freeagent
done
# The guest binary runs in Tart VMs, which are Apple silicon only.
GOOS=darwin GOARCH=arm64 CGO_ENABLED=0 go build -o "$out/arm64/" ./vmbootstrap/cmd/freeagent-vm
lipo -create -output "$out/freeagent" "$out/arm64/freeagent" "$out/amd64/freeagent"

echo "--- assemble"
go run ./packaging/cmd/mkapp assemble --out "$out" --version "$describe" \
	--freeagent "$out/freeagent" --freeagent-vm "$out/arm64/freeagent-vm"
app=$out/FreeAgent.app
version=$(/usr/libexec/PlistBuddy -c "Print :CFBundleShortVersionString" "$app/Contents/Info.plist")

echo "--- sign"
if [ -z "$identity" ]; then
	echo "FREEAGENT_SIGN_IDENTITY is not set: signing ad hoc. This app runs on this Mac only and cannot be notarized;"
	echo "set FREEAGENT_SIGN_IDENTITY to your 'Developer ID Application: …' identity to sign it for distribution."
	sign=(codesign --force --options runtime --sign -)
else
	sign=(codesign --force --options runtime --timestamp --sign "$identity")
fi
# Inside out: the guest binary (sealed as a resource, but notarization
# checks every Mach-O), then the bundle with its main executable.
"${sign[@]}" --identifier build.freeagent.freeagent-vm "$app/Contents/Resources/freeagent-vm"
"${sign[@]}" --entitlements "$entitlements" "$app"
codesign --verify --deep --strict --verbose=2 "$app"
go run ./packaging/cmd/mkapp validate --arch arm64,amd64 --signed --entitlements "$entitlements" "$app"

zip=$out/FreeAgent-$version.zip
ditto -c -k --keepParent "$app" "$zip"
if [ -n "$identity" ] && [ -n "$profile" ]; then
	echo "--- notarize (this waits for Apple, usually a few minutes)"
	xcrun notarytool submit "$zip" --keychain-profile "$profile" --wait
	xcrun stapler staple "$app"
	xcrun stapler validate "$app"
	spctl --assess --type execute --verbose "$app"
	rm "$zip"
	ditto -c -k --keepParent "$app" "$zip" # again, now with the ticket stapled
else
	echo "FREEAGENT_SIGN_IDENTITY or FREEAGENT_NOTARY_PROFILE is not set: not notarizing."
	echo "Gatekeeper will refuse this app on other Macs; see the header of $0 to set them up."
fi

echo "--- dmg"
dmg=$out/FreeAgent-$version.dmg
staging=$out/dmg
mkdir -p "$staging"
cp -R "$app" "$staging/"
ln -s /Applications "$staging/Applications"
hdiutil create -volname "Free Agent" -srcfolder "$staging" -ov -format UDZO "$dmg"
rm -rf "$staging"
if [ -n "$identity" ]; then
	codesign --force --timestamp --sign "$identity" "$dmg"
	if [ -n "$profile" ]; then
		xcrun notarytool submit "$dmg" --keychain-profile "$profile" --wait
		xcrun stapler staple "$dmg"
	fi
fi

sha=$(shasum -a 256 "$dmg" | cut -d' ' -f1)
sed -e "s/@VERSION@/$version/" -e "s/@SHA256@/$sha/" packaging/homebrew/free-agent.rb >"$out/free-agent.rb"
echo "--- done: $app, $zip, $dmg, $out/free-agent.rb"
