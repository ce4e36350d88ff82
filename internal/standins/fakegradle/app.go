package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
)

// appProject is what the stand-in reads of android/app/build.gradle: the
// forms the template (and `expo prebuild`'s config plugins) write.
type appProject struct {
	dir           string // android/app
	root          string // the React Native root: package.json's directory
	namespace     string
	applicationID string
	versionCode   int
	versionName   string
	minSdk        int
	targetSdk     int
	compileSdk    int
	signing       map[string]signingConfig // signingConfigs { name { … } }
	buildTypeSign map[string]string        // buildTypes { release { signingConfig signingConfigs.X } }
	react         reactConfig
	hermes        bool
}

type signingConfig struct {
	name, storeFile, storePassword, keyAlias, keyPassword, storeType string
}

// reactConfig is the react {} block, resolved as the React Native Gradle
// plugin resolves it (ReactExtension's conventions, PathUtils).
type reactConfig struct {
	entryFile, cliFile, bundleCommand, hermesCommand, reactNativeDir string
	hermesFlags                                                      []string
}

var (
	reNamespace   = regexp.MustCompile(`(?m)^\s*namespace\s+['"]([^'"]+)['"]`)
	reAppID       = regexp.MustCompile(`(?m)^\s*applicationId\s+['"]([^'"]+)['"]`)
	reVersionCode = regexp.MustCompile(`(?m)^\s*versionCode\s+(\d+)\s*$`)
	reVersionName = regexp.MustCompile(`(?m)^\s*versionName\s+['"]([^'"]*)['"]`)
	reSigningRef  = regexp.MustCompile(`signingConfig\s+signingConfigs\.(\w+)`)
	reGradleStr   = func(key string) *regexp.Regexp {
		return regexp.MustCompile(`(?m)^\s*` + key + `\s+(?:file\()?['"]([^'"]*)['"]\)?`)
	}
)

func readApp(dir string, props map[string]string) (*appProject, error) {
	src, err := readFirst(dir, "build.gradle")
	if err != nil {
		return nil, gradleFailure(fmt.Sprintf("Project ':app': build.gradle is missing in %s (the stand-in reads only Groovy build files).", dir))
	}
	a := &appProject{dir: dir, root: filepath.Dir(filepath.Dir(dir)), signing: map[string]signingConfig{}, buildTypeSign: map[string]string{},
		hermes: props["hermesEnabled"] != "false", versionName: ""}
	if m := reNamespace.FindStringSubmatch(src); m != nil {
		a.namespace = m[1]
	}
	a.applicationID = a.namespace
	if m := reAppID.FindStringSubmatch(src); m != nil {
		a.applicationID = m[1]
	}
	if a.applicationID == "" {
		return nil, gradleFailure("A problem occurred configuring project ':app'.\n> Namespace not specified. Specify a namespace in the module's build file.")
	}
	a.versionCode = 1
	if m := reVersionCode.FindStringSubmatch(src); m != nil {
		a.versionCode, _ = strconv.Atoi(m[1])
	}
	if m := reVersionName.FindStringSubmatch(src); m != nil {
		a.versionName = m[1]
	}
	a.minSdk, a.targetSdk, a.compileSdk = sdkVersions(a.root, props)
	if block := gradleBlock(src, "signingConfigs"); block != "" {
		for name, body := range gradleBlocks(block) {
			c := signingConfig{name: name}
			for key, dst := range map[string]*string{"storeFile": &c.storeFile, "storePassword": &c.storePassword, "keyAlias": &c.keyAlias, "keyPassword": &c.keyPassword, "storeType": &c.storeType} {
				if m := reGradleStr(key).FindStringSubmatch(body); m != nil {
					*dst = m[1]
				}
			}
			if c.storeFile != "" && !filepath.IsAbs(c.storeFile) {
				c.storeFile = filepath.Join(dir, c.storeFile) // file() is the module's
			}
			a.signing[name] = c
		}
	}
	if block := gradleBlock(src, "buildTypes"); block != "" {
		for name, body := range gradleBlocks(block) {
			if m := reSigningRef.FindStringSubmatch(body); m != nil {
				a.buildTypeSign[name] = m[1]
			}
		}
	}
	if gradleBlock(src, "productFlavors") != "" {
		return nil, gradleFailure("Project ':app': product flavors are beyond Free Agent's stand-in Gradle (internal/standins/fakegradle).")
	}
	react, err := readReact(a.root, gradleBlock(src, "react"))
	if err != nil {
		return nil, err
	}
	a.react = react
	return a, nil
}

// sdkVersions are the SDK levels the Expo root project plugin sets:
// gradle.properties' android.*SdkVersion, else React Native's version
// catalog.
func sdkVersions(root string, props map[string]string) (minSdk, targetSdk, compileSdk int) {
	catalog, _ := os.ReadFile(filepath.Join(root, "node_modules", "react-native", "gradle", "libs.versions.toml"))
	get := func(prop, key string, def int) int {
		if v, err := strconv.Atoi(props[prop]); err == nil {
			return v
		}
		if m := regexp.MustCompile(`(?m)^` + key + `\s*=\s*"(\d+)"`).FindSubmatch(catalog); m != nil {
			v, _ := strconv.Atoi(string(m[1]))
			return v
		}
		return def
	}
	return get("android.minSdkVersion", "minSdk", 24), get("android.targetSdkVersion", "targetSdk", 36), get("android.compileSdkVersion", "compileSdk", 36)
}

// readReact resolves the react {} block's settings the bundle task uses.
func readReact(root, block string) (reactConfig, error) {
	rc := reactConfig{bundleCommand: "bundle", hermesFlags: []string{"-O", "-output-source-map"}}
	settings := map[string]string{}
	for _, line := range strings.Split(block, "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "//") || strings.HasPrefix(line, "/*") || strings.HasPrefix(line, "*") {
			continue
		}
		if k, v, ok := strings.Cut(line, "="); ok {
			settings[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	eval := func(key string) (string, error) {
		expr, ok := settings[key]
		if !ok {
			return "", nil
		}
		if m := regexp.MustCompile(`^"([^"]*)"$|^'([^']*)'$`).FindStringSubmatch(expr); m != nil {
			return m[1] + m[2], nil
		}
		argv, rest, ok := nodeCall(expr)
		if !ok {
			return "", gradleFailure(fmt.Sprintf("Project ':app': react.%s = %s is beyond Free Agent's stand-in Gradle: it evaluates string literals and the template's [\"node\", …].execute(null, rootDir) forms.", key, expr))
		}
		for i, arg := range argv {
			if arg == "\x00projectRoot" {
				argv[i] = root
			}
		}
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Dir = filepath.Join(root, "android") // rootDir
		out, err := cmd.Output()
		if err != nil {
			return "", gradleFailure(fmt.Sprintf("A problem occurred evaluating project ':app'.\n> %s: %v", strings.Join(argv, " "), err))
		}
		value := strings.TrimSpace(string(out))
		switch {
		case strings.Contains(rest, "getParentFile()") && strings.Contains(rest, "+"):
			// new File(…).getParentFile().getAbsolutePath() + "/suffix"
			m := regexp.MustCompile(`\+\s*"([^"]*)"`).FindStringSubmatch(rest)
			if m == nil {
				return "", gradleFailure(fmt.Sprintf("Project ':app': react.%s = %s: unknown form", key, expr))
			}
			value = filepath.Dir(value) + m[1]
		case strings.Contains(rest, "getParentFile()"):
			value = filepath.Dir(value)
		}
		return value, nil
	}
	var err error
	if rc.entryFile, err = eval("entryFile"); err != nil {
		return rc, err
	}
	if rc.cliFile, err = eval("cliFile"); err != nil {
		return rc, err
	}
	if v, err := eval("bundleCommand"); err != nil {
		return rc, err
	} else if v != "" {
		rc.bundleCommand = v
	}
	if rc.hermesCommand, err = eval("hermesCommand"); err != nil {
		return rc, err
	}
	if rc.reactNativeDir, err = eval("reactNativeDir"); err != nil {
		return rc, err
	}
	// The plugin's conventions for what the block leaves out.
	if rc.reactNativeDir == "" {
		rc.reactNativeDir = filepath.Join(root, "node_modules", "react-native")
	}
	if rc.entryFile == "" {
		rc.entryFile = filepath.Join(root, "index.js")
		if _, err := os.Stat(filepath.Join(root, "index.android.js")); err == nil {
			rc.entryFile = filepath.Join(root, "index.android.js")
		}
	}
	if rc.cliFile == "" {
		rc.cliFile = filepath.Join(rc.reactNativeDir, "cli.js")
	}
	osBin := "linux64-bin"
	if runtime.GOOS == "darwin" {
		osBin = "osx-bin"
	}
	if rc.hermesCommand == "" {
		rc.hermesCommand = filepath.Join(root, "node_modules", "hermes-compiler", "hermesc", "%OS-BIN%", "hermesc")
	}
	rc.hermesCommand = strings.ReplaceAll(rc.hermesCommand, "%OS-BIN%", osBin)
	return rc, nil
}

// gradleBlock is the body of the first `name {` block in src.
func gradleBlock(src, name string) string {
	loc := regexp.MustCompile(`(?m)^\s*` + name + `\s*\{`).FindStringIndex(src)
	if loc == nil {
		return ""
	}
	depth, start := 1, loc[1]
	for i := start; i < len(src); i++ {
		switch src[i] {
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				return src[start:i]
			}
		}
	}
	return src[start:]
}

// gradleBlocks are the named blocks directly inside a block's body.
func gradleBlocks(body string) map[string]string {
	out := map[string]string{}
	re := regexp.MustCompile(`(?m)^\s*(\w+)\s*\{`)
	for pos := 0; pos < len(body); {
		loc := re.FindStringSubmatchIndex(body[pos:])
		if loc == nil {
			break
		}
		name := body[pos+loc[2] : pos+loc[3]]
		inner := gradleBlock(body[pos+loc[0]:], name)
		out[name] = inner
		pos += loc[1] + len(inner) + 1
	}
	return out
}

// nodeCall reads `[item, …].execute(null, rootDir).text.trim()` in a
// Groovy expression: items are string literals or the variable
// projectRoot (returned as "\x00projectRoot"). rest is what follows.
func nodeCall(expr string) (argv []string, rest string, ok bool) {
	i := strings.IndexByte(expr, '[')
	if i < 0 {
		return nil, "", false
	}
	for i++; i < len(expr); {
		switch c := expr[i]; {
		case c == ' ' || c == ',':
			i++
		case c == '\'' || c == '"':
			end := strings.IndexByte(expr[i+1:], c)
			if end < 0 {
				return nil, "", false
			}
			argv = append(argv, expr[i+1:i+1+end])
			i += end + 2
		case c == ']':
			rest, ok = strings.CutPrefix(expr[i+1:], ".execute(null, rootDir).text.trim()")
			return argv, rest, ok && len(argv) > 0
		case strings.HasPrefix(expr[i:], "projectRoot"):
			argv = append(argv, "\x00projectRoot")
			i += len("projectRoot")
		default:
			return nil, "", false
		}
	}
	return nil, "", false
}
