package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// gradleFailure is a failed build: Gradle's "What went wrong" text.
type gradleFailure string

func (f gradleFailure) Error() string { return string(f) }

// build is one invocation: the project and what it was asked.
type build struct {
	dir         string // the root project's directory (android/)
	name        string // rootProject.name
	tasks       []string
	props       map[string]string // -P, then ORG_GRADLE_PROJECT_*, then gradle.properties
	initSigning *signingConfig    // set by an init script (--init-script) for every build type
	app         *appProject
	started     time.Time
}

// runGradle runs a Gradle command line and returns the exit status.
func runGradle(args []string) int {
	b := &build{started: time.Now(), props: map[string]string{}}
	if err := b.run(args); err != nil {
		fmt.Fprintf(os.Stderr, "\nFAILURE: Build failed with an exception.\n\n* What went wrong:\n%s\n\n* Try:\n> Run with --stacktrace option to get the stack trace.\n> Run with --info or --debug option to get more log output.\n\nBUILD FAILED in %s\n", err, b.elapsed())
		return 1
	}
	return 0
}

func (b *build) elapsed() string {
	return fmt.Sprintf("%ds", int(time.Since(b.started).Seconds())+1)
}

func (b *build) run(args []string) error {
	cli := map[string]string{}
	var initScripts []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-P" || a == "--project-prop":
			if i+1 >= len(args) {
				return gradleFailure("Option '" + a + "' requires an argument.")
			}
			i++
			k, v, _ := strings.Cut(args[i], "=")
			cli[k] = v
		case strings.HasPrefix(a, "-P"):
			k, v, _ := strings.Cut(strings.TrimPrefix(a, "-P"), "=")
			cli[k] = v
		case a == "-I" || a == "--init-script":
			if i+1 >= len(args) {
				return gradleFailure("Option '" + a + "' requires an argument.")
			}
			i++
			initScripts = append(initScripts, args[i])
		case strings.HasPrefix(a, "--init-script="):
			initScripts = append(initScripts, strings.TrimPrefix(a, "--init-script="))
		case a == "-p" || a == "--project-dir":
			if i+1 >= len(args) {
				return gradleFailure("Option '" + a + "' requires an argument.")
			}
			i++
			b.dir = args[i]
		case strings.HasPrefix(a, "-"):
			// --no-daemon, --stacktrace, -q, --info, …: no effect here.
		default:
			b.tasks = append(b.tasks, a)
		}
	}
	if b.dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return err
		}
		b.dir = wd
	}
	// Init scripts run first, before settings.
	for _, path := range initScripts {
		if err := b.initScript(path); err != nil {
			return err
		}
	}
	settings, err := readFirst(b.dir, "settings.gradle", "settings.gradle.kts")
	if err != nil {
		return gradleFailure(fmt.Sprintf("Directory '%s' does not contain a Gradle build.\n\nA Gradle build should contain a 'settings.gradle' or 'settings.gradle.kts' file in its root directory. It may also contain a 'build.gradle' or 'build.gradle.kts' file.", b.dir))
	}
	b.name = filepath.Base(b.dir)
	if m := regexp.MustCompile(`rootProject\.name\s*=\s*['"]([^'"]+)['"]`).FindStringSubmatch(settings); m != nil {
		b.name = m[1]
	}
	b.readProperties(cli)
	if regexp.MustCompile(`include\s*\(?\s*['"]:app['"]`).MatchString(settings) {
		app, err := readApp(filepath.Join(b.dir, "app"), b.props)
		if err != nil {
			return err
		}
		b.app = app
	}
	if len(b.tasks) == 0 {
		b.tasks = []string{"help"}
	}

	// Every task is resolved before any runs, as Gradle does.
	var plan []func() error
	for _, task := range b.tasks {
		step, err := b.resolve(task)
		if err != nil {
			return err
		}
		plan = append(plan, step)
	}
	fmt.Println("▸ stand-in Gradle (Free Agent's fakegradle): the JavaScript bundle and its Hermes bytecode are built for real; native compilation is a stand-in (no Java/Kotlin, no classes.dex, no native libraries), so the artifact does not run on a device")
	for _, step := range plan {
		if err := step(); err != nil {
			return err
		}
	}
	fmt.Printf("\nBUILD SUCCESSFUL in %s\n", b.elapsed())
	return nil
}

// readProperties fills b.props: a -P argument wins over an
// ORG_GRADLE_PROJECT_ variable, which wins over gradle.properties.
func (b *build) readProperties(cli map[string]string) {
	if data, err := os.ReadFile(filepath.Join(b.dir, "gradle.properties")); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			line = strings.TrimSpace(line)
			if line == "" || line[0] == '#' || line[0] == '!' {
				continue
			}
			k, v, ok := strings.Cut(line, "=")
			if ok {
				b.props[strings.TrimSpace(k)] = strings.TrimSpace(v)
			}
		}
	}
	for _, kv := range os.Environ() {
		if rest, ok := strings.CutPrefix(kv, "ORG_GRADLE_PROJECT_"); ok {
			k, v, _ := strings.Cut(rest, "=")
			b.props[k] = v
		}
	}
	for k, v := range cli {
		b.props[k] = v
	}
}

var variantTask = regexp.MustCompile(`^(assemble|bundle)(Release|Debug)$`)

// resolve finds a task as Gradle does, by path or by name in every
// project, and returns what runs it.
func (b *build) resolve(task string) (func() error, error) {
	name, where := task, fmt.Sprintf("root project '%s'", b.name)
	if p, n, ok := strings.Cut(strings.TrimPrefix(task, ":"), ":"); ok {
		if p != "app" || b.app == nil {
			return nil, gradleFailure(fmt.Sprintf("Project '%s' not found in root project '%s'.", p, b.name))
		}
		name, where = n, "project ':app'"
	}
	switch {
	case name == "help":
		return func() error {
			fmt.Println("> Task :help\n\nWelcome to Gradle (Free Agent's stand-in for Gradle and the Android Gradle Plugin).")
			return nil
		}, nil
	case name == "clean":
		return func() error {
			fmt.Println("> Task :app:clean")
			return os.RemoveAll(filepath.Join(b.dir, "app", "build"))
		}, nil
	}
	if m := variantTask.FindStringSubmatch(name); m != nil && b.app != nil {
		return func() error { return b.variant(m[1], strings.ToLower(m[2])) }, nil
	}
	return nil, gradleFailure(fmt.Sprintf("Task '%s' not found in %s.", name, where))
}

func readFirst(dir string, names ...string) (string, error) {
	var err error
	for _, n := range names {
		var b []byte
		if b, err = os.ReadFile(filepath.Join(dir, n)); err == nil {
			return string(b), nil
		}
	}
	return "", err
}
