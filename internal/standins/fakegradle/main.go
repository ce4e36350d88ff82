// Command fakegradle stands in for Gradle and the Android Gradle Plugin
// (AGP), whose distributions and Maven repositories cannot be downloaded
// here, behind the project's real Gradle wrapper.
//
//	fakegradle install [--gradle-user-home DIR] [DISTRIBUTION_URL...]
//
// installs a stand-in distribution where the real wrapper (the
// gradle-wrapper.jar `expo prebuild` writes) looks before it downloads:
// $GRADLE_USER_HOME/wrapper/dists/<zip name>/<base-36 MD5 of the URL>/
// holding gradle-x.y/ and the marker <zip name>.ok. The wrapper loads
// lib/gradle-launcher-*.jar and calls org.gradle.launcher.GradleMain: here
// a small Java class (compiled at install with javac) that runs
// `lib/fakegradle run ARGS` and exits with its status.
//
// `fakegradle run` is the build: on the real project prebuild wrote, it
// reads settings.gradle, gradle.properties, -P properties and
// ORG_GRADLE_PROJECT_* variables (those the wrapper's /bin/sh passes on:
// dash drops dotted names), freeagent-vm's signing init script
// (--init-script; no other), and app/build.gradle (application id,
// versions, signing configs, the react {} block), runs the React Native
// plugin's bundle task as the plugin runs it (the real `expo export:embed`
// and the real hermesc), and writes AGP's outputs: an APK (zipaligned,
// signed by the real apksigner, v2+v3) or an AAB (signed by jarsigner)
// with the Hermes bundle, the generated assets and a binary
// AndroidManifest.xml that aapt reads. Nothing native is compiled: no
// classes.dex nor .so, so the artifact does not run on a device, and the
// build log says so. It fails where Gradle and AGP fail, with their
// messages and exit status 1.
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: fakegradle install [--gradle-user-home DIR] [DISTRIBUTION_URL...] | fakegradle run GRADLE_ARGS...")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "install":
		if err := installCommand(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "fakegradle install:", err)
			os.Exit(1)
		}
	case "run":
		os.Exit(runGradle(os.Args[2:]))
	default:
		fmt.Fprintf(os.Stderr, "fakegradle: unknown command %q (install or run)\n", os.Args[1])
		os.Exit(2)
	}
}
