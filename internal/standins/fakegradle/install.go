package main

import (
	"crypto/md5"
	_ "embed"
	"flag"
	"fmt"
	"math/big"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
)

// DefaultDistributions are the distributions the wrappers of the tests'
// projects name: testdata/expo-default's prebuild (Expo SDK 55, React
// Native 0.83) writes a wrapper for Gradle 9.0.0.
var DefaultDistributions = []string{"https://services.gradle.org/distributions/gradle-9.0.0-bin.zip"}

//go:embed GradleMain.java
var gradleMainJava []byte

func installCommand(args []string) error {
	fs := flag.NewFlagSet("install", flag.ContinueOnError)
	home := fs.String("gradle-user-home", "", "Gradle's user home (default $GRADLE_USER_HOME, else ~/.gradle)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *home == "" {
		*home = os.Getenv("GRADLE_USER_HOME")
	}
	if *home == "" {
		h, err := os.UserHomeDir()
		if err != nil {
			return fmt.Errorf("no home directory for ~/.gradle: %w", err)
		}
		*home = filepath.Join(h, ".gradle")
	}
	urls := fs.Args()
	if len(urls) == 0 {
		urls = DefaultDistributions
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find this program to install it: %w", err)
	}
	for _, u := range urls {
		dir, err := install(*home, u, self)
		if err != nil {
			return err
		}
		fmt.Printf("installed the stand-in Gradle for %s in %s\n", u, dir)
		fmt.Println("  (a stand-in: the JS bundle and Hermes bytecode are built for real, native code is not; its artifacts do not run on a device)")
	}
	return nil
}

var distName = regexp.MustCompile(`^gradle-([0-9][0-9A-Za-z.\-]*)-(bin|all)\.zip$`)

// distributionDir is where the Gradle wrapper looks for the distribution
// of distributionURL (its PathAssembler): the zip's name without .zip, then
// the MD5 of the URL as a base-36 number; and the zip's base name.
func distributionDir(gradleUserHome, distributionURL string) (dir, zipName, version string, err error) {
	u, err := url.Parse(distributionURL)
	if err != nil || u.Path == "" {
		return "", "", "", fmt.Errorf("distribution URL %q: not a URL", distributionURL)
	}
	u.User = nil // the wrapper hashes the URL without credentials
	zipName = path.Base(u.Path)
	m := distName.FindStringSubmatch(zipName)
	if m == nil {
		return "", "", "", fmt.Errorf("distribution URL %q: expected a name like gradle-9.0.0-bin.zip", distributionURL)
	}
	sum := md5.Sum([]byte(u.String()))
	hash := new(big.Int).SetBytes(sum[:]).Text(36)
	return filepath.Join(gradleUserHome, "wrapper", "dists", strings.TrimSuffix(zipName, ".zip"), hash), zipName, m[1], nil
}

// install lays out the stand-in distribution for distributionURL and
// returns its directory. It replaces an earlier one.
func install(gradleUserHome, distributionURL, self string) (string, error) {
	for _, tool := range []string{"javac", "jar"} {
		if _, err := exec.LookPath(tool); err != nil {
			return "", fmt.Errorf("%s is needed to build the launcher jar (a JDK: openjdk-17-jdk-headless): %w", tool, err)
		}
	}
	dir, zipName, version, err := distributionDir(gradleUserHome, distributionURL)
	if err != nil {
		return "", err
	}
	if err := os.RemoveAll(dir); err != nil {
		return "", fmt.Errorf("remove the old distribution: %w", err)
	}
	home := filepath.Join(dir, "gradle-"+version)
	lib := filepath.Join(home, "lib")
	bin := filepath.Join(home, "bin")
	for _, d := range []string{lib, bin} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return "", fmt.Errorf("create the distribution: %w", err)
		}
	}
	prog, err := os.ReadFile(self)
	if err == nil {
		err = os.WriteFile(filepath.Join(lib, "fakegradle"), prog, 0o755)
	}
	if err != nil {
		return "", fmt.Errorf("copy fakegradle into the distribution: %w", err)
	}
	if err := launcherJar(filepath.Join(lib, "gradle-launcher-"+version+".jar")); err != nil {
		return "", err
	}
	script := "#!/bin/sh\n# The stand-in Gradle (fakegradle).\nexec \"$(dirname \"$0\")/../lib/fakegradle\" run \"$@\"\n"
	if err := os.WriteFile(filepath.Join(bin, "gradle"), []byte(script), 0o755); err != nil {
		return "", fmt.Errorf("write bin/gradle: %w", err)
	}
	// Last: with the marker the wrapper takes the directory as installed.
	if err := os.WriteFile(filepath.Join(dir, zipName+".ok"), nil, 0o644); err != nil {
		return "", fmt.Errorf("write the wrapper's marker: %w", err)
	}
	return dir, nil
}

// launcherJar compiles GradleMain.java into the jar at dst.
func launcherJar(dst string) error {
	tmp, err := os.MkdirTemp("", "fakegradle-jar-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	src := filepath.Join(tmp, "GradleMain.java")
	if err := os.WriteFile(src, gradleMainJava, 0o644); err != nil {
		return err
	}
	classes := filepath.Join(tmp, "classes")
	// --release 8: any JDK the project's wrapper runs on loads it.
	if out, err := exec.Command("javac", "--release", "8", "-nowarn", "-d", classes, src).CombinedOutput(); err != nil {
		return fmt.Errorf("javac GradleMain.java: %w\n%s", err, out)
	}
	if out, err := exec.Command("jar", "--create", "--file", dst, "-C", classes, ".").CombinedOutput(); err != nil {
		return fmt.Errorf("jar the launcher: %w\n%s", err, out)
	}
	return nil
}
