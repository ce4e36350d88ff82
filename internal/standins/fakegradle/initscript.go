package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// The one init script form the stand-in evaluates: freeagent-vm's signing
// script (vmbootstrap/android_signing.go), which reads a JSON file of the
// keystore's path and passwords and, in AGP's finalizeDsl, gives every
// build type of the app the signing config it names.
var (
	reInitJSON    = regexp.MustCompile(`new groovy\.json\.JsonSlurper\(\)\.parse\(new File\('((?:[^'\\]|\\.)*)'\)\)`)
	reInitSigning = regexp.MustCompile(`finalizeDsl[\s\S]*signingConfigs\.maybeCreate\('(\w+)'\)[\s\S]*buildTypes\.all \{ it\.signingConfig = `)
	groovyUnquote = strings.NewReplacer(`\\`, `\`, `\'`, `'`, `\n`, "\n", `\r`, "\r")
)

// initScript evaluates the init script at path as Gradle would, before
// the settings: a script the stand-in cannot read fails the build.
func (b *build) initScript(path string) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	src, err := os.ReadFile(abs)
	if err != nil {
		return gradleFailure(fmt.Sprintf("The specified initialization script '%s' does not exist.", abs))
	}
	file, config := reInitJSON.FindStringSubmatch(string(src)), reInitSigning.FindStringSubmatch(string(src))
	if file == nil || config == nil {
		return gradleFailure(fmt.Sprintf("Initialization script '%s' is beyond Free Agent's stand-in Gradle: it evaluates only freeagent-vm's signing script.", abs))
	}
	jsonPath := groovyUnquote.Replace(file[1])
	data, err := os.ReadFile(jsonPath)
	if err != nil {
		return gradleFailure(fmt.Sprintf("A problem occurred evaluating initialization script.\n> %s (No such file or directory)", jsonPath))
	}
	var s struct{ StoreFile, StorePassword, KeyAlias, KeyPassword, StoreType string }
	if err := json.Unmarshal(data, &s); err != nil {
		return gradleFailure(fmt.Sprintf("A problem occurred evaluating initialization script.\n> groovy.json.JsonException: %s: %v", jsonPath, err))
	}
	b.initSigning = &signingConfig{name: config[1], storeFile: s.StoreFile, storePassword: s.StorePassword, keyAlias: s.KeyAlias, keyPassword: s.KeyPassword, storeType: s.StoreType}
	return nil
}
