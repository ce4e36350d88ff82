package main

import (
	"archive/zip"
	"encoding/xml"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// variant runs assemble<BuildType> (an APK) or bundle<BuildType> (an AAB)
// for buildType release or debug, with AGP's task names and outputs.
func (b *build) variant(action, buildType string) error {
	a := b.app
	BuildType := strings.ToUpper(buildType[:1]) + buildType[1:]
	sign, signed, err := b.signingFor(buildType)
	if err != nil {
		return err
	}
	if signed {
		fmt.Printf("> Task :app:validateSigning%s\n", BuildType)
		if _, err := os.Stat(sign.storeFile); err != nil {
			return gradleFailure(fmt.Sprintf("Execution failed for task ':app:validateSigning%s'.\n> Keystore file '%s' not found for signing config '%s'.", BuildType, sign.storeFile, sign.name))
		}
	}
	build := filepath.Join(a.dir, "build")
	assets := filepath.Join(build, "generated", "assets", "react", buildType)
	res := filepath.Join(build, "generated", "res", "react", buildType)
	// React Native's plugin bundles only variants not in
	// debuggableVariants (debug): a debug build loads from Metro.
	if buildType != "debug" {
		fmt.Printf("> Task :app:createBundle%sJsAndAssets\n", BuildType)
		if err := b.bundleJS(buildType, assets, res); err != nil {
			return gradleFailure(fmt.Sprintf("Execution failed for task ':app:createBundle%sJsAndAssets'.\n> %v", BuildType, err))
		}
	}
	manifest, err := a.mergedManifest()
	if err != nil {
		return err
	}
	fmt.Printf("> Task :app:process%sMainManifest\n", BuildType)

	var out string
	if action == "assemble" {
		fmt.Printf("> Task :app:package%s\n", BuildType)
		dir := filepath.Join(build, "outputs", "apk", buildType)
		unsigned := filepath.Join(dir, "app-"+buildType+"-unsigned.apk")
		if err := writeArchive(unsigned, "", manifest, assets, res); err != nil {
			return err
		}
		out = unsigned
		if signed {
			out = filepath.Join(dir, "app-"+buildType+".apk")
			if err := signAPK(unsigned, out, sign, BuildType); err != nil {
				return err
			}
			os.Remove(unsigned)
		}
	} else {
		fmt.Printf("> Task :app:sign%sBundle\n", BuildType)
		out = filepath.Join(build, "outputs", "bundle", buildType, "app-"+buildType+".aab")
		if err := writeArchive(out, "base/", manifest, assets, res); err != nil {
			return err
		}
		if signed {
			if err := signAAB(out, sign, BuildType); err != nil {
				return err
			}
		}
	}
	fmt.Printf("> Task :app:%s%s\n", action, BuildType)
	rel, _ := filepath.Rel(b.dir, out)
	fmt.Printf("▸ stand-in output %s: %s %s (versionCode %d), not runnable on a device\n", rel, a.applicationID, a.versionName, a.versionCode)
	return nil
}

// signingFor is the signing config AGP applies to buildType: the four
// injected properties when all are set, else the build type's
// signingConfig (an init script's when one set it for every build type). signed is false when there is none: AGP leaves the
// output unsigned.
func (b *build) signingFor(buildType string) (c signingConfig, signed bool, err error) {
	const p = "android.injected.signing."
	inj := signingConfig{name: "externalOverride", storeFile: b.props[p+"store.file"], storePassword: b.props[p+"store.password"],
		keyAlias: b.props[p+"key.alias"], keyPassword: b.props[p+"key.password"], storeType: b.props[p+"store.type"]}
	if inj.storeFile != "" && inj.storePassword != "" && inj.keyAlias != "" && inj.keyPassword != "" {
		return inj, true, nil
	}
	if b.initSigning != nil {
		return *b.initSigning, true, nil
	}
	name, ok := b.app.buildTypeSign[buildType]
	if !ok {
		if buildType != "debug" {
			return c, false, nil
		}
		name = "debug" // AGP signs debug with the debug config
	}
	c, ok = b.app.signing[name]
	if !ok {
		return c, false, gradleFailure(fmt.Sprintf("A problem occurred evaluating project ':app'.\n> Could not get unknown property '%s' for SigningConfig container.", name))
	}
	return c, true, nil
}

// bundleJS runs BundleHermesCTask as React Native's Gradle plugin does:
// the bundle command (Expo's `export:embed`), then hermesc over the
// bundle, whose bytecode replaces it, then the source maps composed.
func (b *build) bundleJS(buildType, assets, res string) error {
	a, rc := b.app, b.app.react
	inter := filepath.Join(a.dir, "build", "intermediates", "sourcemaps", "react", buildType)
	maps := filepath.Join(a.dir, "build", "generated", "sourcemaps", "react", buildType)
	for _, d := range []string{assets, res, inter, maps} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	bundle := filepath.Join(assets, "index.android.bundle")
	packagerMap := filepath.Join(inter, "index.android.bundle.packager.map")
	if !a.hermes {
		packagerMap = filepath.Join(maps, "index.android.bundle.map")
	}
	cmd := []string{"node", rc.cliFile, rc.bundleCommand, "--platform", "android", "--dev", "false", "--reset-cache",
		"--entry-file", rc.entryFile, "--bundle-output", bundle, "--assets-dest", res, "--sourcemap-output", packagerMap,
		"--minify", strconv.FormatBool(!a.hermes), "--verbose"}
	if err := b.exec(a.root, cmd); err != nil {
		return err
	}
	if !a.hermes {
		return nil
	}
	hbc := bundle + ".hbc"
	if err := b.exec(a.root, append([]string{rc.hermesCommand, "-w", "-emit-binary", "-max-diagnostic-width=80", "-out", hbc, bundle}, rc.hermesFlags...)); err != nil {
		return err
	}
	if err := os.Rename(hbc, bundle); err != nil {
		return err
	}
	compilerMap := filepath.Join(inter, "index.android.bundle.compiler.map")
	if err := os.Rename(hbc+".map", compilerMap); err != nil {
		return err
	}
	return b.exec(a.root, []string{"node", filepath.Join(rc.reactNativeDir, "scripts", "compose-source-maps.js"), packagerMap, compilerMap, "-o", filepath.Join(maps, "index.android.bundle.map")})
}

// exec runs a command as Gradle's exec does: output through, failure as
// Gradle reports it.
func (b *build) exec(dir string, argv []string) error {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return gradleFailure(fmt.Sprintf("Process 'command '%s'' finished with non-zero exit value %d", argv[0], ee.ExitCode()))
		}
		return gradleFailure(fmt.Sprintf("A problem occurred starting process 'command '%s''", argv[0]))
	}
	return nil
}

// xmlNode is a parsed manifest element.
type xmlNode struct {
	XMLName  xml.Name
	Attrs    []xml.Attr `xml:",any,attr"`
	Children []xmlNode  `xml:",any"`
}

var boolAttrs = map[string]bool{"exported": true, "allowBackup": true, "supportsRtl": true}

// mergedManifest is app/src/main/AndroidManifest.xml as AGP's merger
// leaves it, as far as aapt's badging goes: package, versions and
// <uses-sdk> added; @string references resolved from
// res/values/strings.xml (there is no resources.arsc); other references,
// tools: and unknown attributes dropped.
func (a *appProject) mergedManifest() ([]byte, error) {
	raw, err := os.ReadFile(filepath.Join(a.dir, "src", "main", "AndroidManifest.xml"))
	if err != nil {
		return nil, gradleFailure(fmt.Sprintf("Execution failed for task ':app:processReleaseMainManifest'.\n> %v", err))
	}
	var root xmlNode
	if err := xml.Unmarshal(raw, &root); err != nil {
		return nil, gradleFailure(fmt.Sprintf("Execution failed for task ':app:processReleaseMainManifest'.\n> AndroidManifest.xml: %v", err))
	}
	strs := a.strings()
	var convert func(n xmlNode) *xmlElem
	convert = func(n xmlNode) *xmlElem {
		e := &xmlElem{name: n.XMLName.Local}
		for _, at := range n.Attrs {
			if at.Name.Space != androidNS {
				continue
			}
			if _, ok := androidAttrIDs[at.Name.Local]; !ok {
				continue
			}
			v := at.Value
			if name, ok := strings.CutPrefix(v, "@string/"); ok {
				if v, ok = strs[name]; !ok {
					continue
				}
			} else if strings.HasPrefix(v, "@") {
				continue
			}
			switch {
			case boolAttrs[at.Name.Local]:
				e.attrs = append(e.attrs, boolAttr(at.Name.Local, v == "true"))
			case strings.HasSuffix(at.Name.Local, "SdkVersion"):
				n, _ := strconv.Atoi(v)
				e.attrs = append(e.attrs, intAttr(at.Name.Local, n))
			default:
				if at.Name.Local == "name" && strings.HasPrefix(v, ".") {
					v = a.namespace + v
				}
				e.attrs = append(e.attrs, strAttr(at.Name.Local, v))
			}
		}
		for _, c := range n.Children {
			e.children = append(e.children, convert(c))
		}
		return e
	}
	m := convert(root)
	m.attrs = append([]xmlAttr{intAttr("versionCode", a.versionCode), strAttr("versionName", a.versionName),
		intAttr("compileSdkVersion", a.compileSdk), {name: "package", str: a.applicationID, kind: typeString}}, m.attrs...)
	sdk := &xmlElem{name: "uses-sdk", attrs: []xmlAttr{intAttr("minSdkVersion", a.minSdk), intAttr("targetSdkVersion", a.targetSdk)}}
	m.children = append([]*xmlElem{sdk}, m.children...)
	return encodeAXML(m), nil
}

var reStringRes = regexp.MustCompile(`<string name="([^"]+)"[^>]*>([^<]*)</string>`)

// strings are the app's string resources.
func (a *appProject) strings() map[string]string {
	out := map[string]string{}
	b, _ := os.ReadFile(filepath.Join(a.dir, "src", "main", "res", "values", "strings.xml"))
	for _, m := range reStringRes.FindAllStringSubmatch(string(b), -1) {
		out[m[1]] = m[2]
	}
	return out
}

// standInNote marks every artifact as the stand-in's.
const standInNote = "Built by Free Agent's stand-in Gradle (internal/standins/fakegradle): the JavaScript bundle and its Hermes bytecode are real, native code is not. This archive does not run on a device.\n"

// writeArchive writes an APK (prefix "") or the base module of an AAB
// (prefix "base/", the manifest under base/manifest/): the manifest, the
// bundle and the generated resources (Metro's assets).
func writeArchive(dst, prefix string, manifest []byte, assets, res string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	f, err := os.Create(dst)
	if err != nil {
		return err
	}
	defer f.Close()
	z := zip.NewWriter(f)
	put := func(name string, r io.Reader) error {
		w, err := z.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Deflate})
		if err == nil {
			_, err = io.Copy(w, r)
		}
		return err
	}
	manifestPath := "AndroidManifest.xml"
	if prefix != "" {
		manifestPath = prefix + "manifest/AndroidManifest.xml"
	}
	if err := put(manifestPath, strings.NewReader(string(manifest))); err != nil {
		return err
	}
	if err := put(prefix+"assets/freeagent-stand-in.txt", strings.NewReader(standInNote)); err != nil {
		return err
	}
	for dir, into := range map[string]string{assets: prefix + "assets/", res: prefix + "res/"} {
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if os.IsNotExist(err) && p == dir {
					return nil // a debug build has no bundle
				}
				return err
			}
			if d.IsDir() {
				return nil
			}
			rel, _ := filepath.Rel(dir, p)
			in, err := os.Open(p)
			if err != nil {
				return err
			}
			defer in.Close()
			return put(into+filepath.ToSlash(rel), in)
		})
		if err != nil {
			return err
		}
	}
	if err := z.Close(); err != nil {
		return err
	}
	return f.Close()
}

// signAPK zipaligns and signs as AGP does for minSdk 24 and up (v2 and
// v3, no v1), with the real apksigner.
func signAPK(unsigned, out string, c signingConfig, BuildType string) error {
	aligned := unsigned + ".aligned"
	defer os.Remove(aligned)
	if o, err := exec.Command("zipalign", "-f", "4", unsigned, aligned).CombinedOutput(); err != nil {
		return gradleFailure(fmt.Sprintf("Execution failed for task ':app:package%s'.\n> zipalign: %v %s", BuildType, err, o))
	}
	args := []string{"sign", "--ks", c.storeFile, "--ks-pass", "env:FAKEGRADLE_STORE_PASS", "--ks-key-alias", c.keyAlias, "--key-pass", "env:FAKEGRADLE_KEY_PASS",
		"--min-sdk-version", "24", "--v1-signing-enabled", "false", "--v2-signing-enabled", "true", "--v3-signing-enabled", "true", "--v4-signing-enabled", "false"}
	if c.storeType != "" {
		args = append(args, "--ks-type", strings.ToUpper(c.storeType))
	}
	cmd := exec.Command("apksigner", append(args, "--out", out, aligned)...)
	cmd.Env = append(os.Environ(), "FAKEGRADLE_STORE_PASS="+c.storePassword, "FAKEGRADLE_KEY_PASS="+c.keyPassword)
	if o, err := cmd.CombinedOutput(); err != nil {
		return signingFailed(c, BuildType, string(o))
	}
	return nil
}

// signAAB signs a bundle with its JAR signature, as AGP does.
func signAAB(aab string, c signingConfig, BuildType string) error {
	args := []string{"-keystore", c.storeFile, "-storepass:env", "FAKEGRADLE_STORE_PASS", "-keypass:env", "FAKEGRADLE_KEY_PASS"}
	if c.storeType != "" {
		args = append(args, "-storetype", strings.ToUpper(c.storeType))
	}
	cmd := exec.Command("jarsigner", append(args, aab, c.keyAlias)...)
	cmd.Env = append(os.Environ(), "FAKEGRADLE_STORE_PASS="+c.storePassword, "FAKEGRADLE_KEY_PASS="+c.keyPassword)
	if o, err := cmd.CombinedOutput(); err != nil {
		return signingFailed(c, BuildType, string(o))
	}
	return nil
}

// signingFailed is AGP's report of a keystore it cannot use.
func signingFailed(c signingConfig, BuildType, toolOutput string) error {
	lines := strings.Split(strings.TrimSpace(toolOutput), "\n")
	return gradleFailure(fmt.Sprintf("Execution failed for task ':app:package%s'.\n> A failure occurred while executing com.android.build.gradle.tasks.PackageAndroidArtifact$IncrementalSplitterRunnable\n   > com.android.ide.common.signing.KeytoolException: Failed to read key %s from store \"%s\": %s",
		BuildType, c.keyAlias, c.storeFile, lines[len(lines)-1]))
}
