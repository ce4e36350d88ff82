package main

import (
	"archive/zip"
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/pgtest"
)

// ctl runs the controller binary with args, as an admin at a shell does.
func ctl(t *testing.T, bin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return out.String(), errb.String(), ee.ExitCode()
	}
	if err != nil {
		t.Fatalf("run %v: %v", args, err)
	}
	return out.String(), errb.String(), 0
}

// createKey runs keys create --json and returns the key's id and secret.
func createKey(t *testing.T, bin string, args ...string) (id, secret string) {
	t.Helper()
	out, stderr, code := ctl(t, bin, append([]string{"keys", "create", "--json"}, args...)...)
	var k struct{ ID, Key string }
	if code != 0 || json.Unmarshal([]byte(out), &k) != nil || k.Key == "" {
		t.Fatalf("keys create %v: %d %s %s", args, code, out, stderr)
	}
	return k.ID, k.Key
}

// eventually retries cond until it holds: the controller caches an
// authenticated key for a moment, so a binding takes effect on a later
// request, not necessarily the next.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
	}
}

func plainSource() *bytes.Reader {
	return bytes.NewReader([]byte("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03\x03\x00\x00\x00\x00\x00\x00\x00\x00\x00")) // an empty tar.gz
}

// TestAdminCommandsAgainstRunningController drives keys create|bind|unbind,
// pools set and projects pools through the binary and checks their effect
// on a running controller process over HTTP.
func TestAdminCommandsAgainstRunningController(t *testing.T) {
	bin := controllerBinary(t)
	t.Setenv("DATABASE_URL", pgtest.NewDatabase(t))
	c := startReplica(t, bin, "--data-dir", t.TempDir())
	ctx := context.Background()
	_, adminKey := createKey(t, bin, "--name", "ops", "--role", "admin")
	admin := &api.Client{BaseURL: c.URL, APIKey: adminKey}
	_, workKey := createKey(t, bin, "--name", "macs", "--role", "worker")
	worker := &api.Client{BaseURL: c.URL, APIKey: workKey}
	dev1ID, dev1Key := createKey(t, bin, "--name", "team-1", "--role", "developer", "--project", "p1")
	dev2ID, dev2Key := createKey(t, bin, "--name", "team-2", "--role", "developer", "--project", "p2")
	dev2 := &api.Client{BaseURL: c.URL, APIKey: dev2Key}

	// keys create is one transaction: a refused binding leaves no key.
	for _, args := range [][]string{
		{"--name", "orphan-1", "--role", "developer", "--project", "not a project"},
		{"--name", "orphan-2", "--role", "worker", "--max-capacity", "2", "--pool", "bad/pool"},
	} {
		if _, stderr, code := ctl(t, bin, append([]string{"keys", "create"}, args...)...); code == 0 || !strings.Contains(stderr, "name") {
			t.Fatalf("keys create %v: exit %d %q", args, code, stderr)
		}
	}
	out, _, _ := ctl(t, bin, "keys", "list", "--json")
	if strings.Contains(out, "orphan") {
		t.Fatalf("a refused keys create left a key behind:\n%s", out)
	}

	// keys bind / unbind: p2's key reads p1's build only while bound to p1.
	b1, err := (&api.Client{BaseURL: c.URL, APIKey: dev1Key}).Submit(ctx, api.SubmitRequest{Platform: api.PlatformAndroid, Project: "p1", Source: plainSource()})
	if err != nil {
		t.Fatal(err)
	}
	status := func() int {
		_, err := dev2.GetBuild(ctx, b1.ID)
		if err == nil {
			return http.StatusOK
		}
		return api.StatusOf(err)
	}
	if s := status(); s != http.StatusNotFound {
		t.Fatalf("p2's key reads p1's build: %d", s)
	}
	if _, stderr, code := ctl(t, bin, "keys", "bind", dev2ID, "--project", "p1"); code != 0 {
		t.Fatalf("keys bind: %d %s", code, stderr)
	}
	eventually(t, "p2's key, bound to p1 too, reads p1's build", func() bool { return status() == http.StatusOK })
	out, _, _ = ctl(t, bin, "keys", "list", "--json")
	var keys []struct {
		ID       string
		Projects []string
	}
	json.Unmarshal([]byte(out), &keys)
	for _, k := range keys {
		if k.ID == dev2ID && strings.Join(k.Projects, ",") != "p1,p2" {
			t.Fatalf("keys list: team-2's projects %v", k.Projects)
		}
	}
	if _, stderr, code := ctl(t, bin, "keys", "unbind", dev2ID, "--project", "p1"); code != 0 {
		t.Fatalf("keys unbind: %d %s", code, stderr)
	}
	eventually(t, "p2's key, unbound from p1, no longer reads p1's build", func() bool { return status() == http.StatusNotFound })
	if _, stderr, code := ctl(t, bin, "keys", "bind", dev2ID, "--pool", "ci"); code == 0 || !strings.Contains(stderr, "only worker keys") {
		t.Fatalf("binding a developer key to a pool: %d %q", code, stderr)
	}

	// pools set --trusted [--allow-local]: a credentialed build reaches a
	// local-driver worker only once its pool allows it.
	register := func(name, pool, driver, platform string) func() *api.Job {
		reg, err := worker.Register(ctx, api.RegisterRequest{Name: name, Capabilities: api.Capabilities{Platforms: []string{platform}, MaxConcurrentBuilds: 1, Pool: pool, VMDriver: driver}})
		if err != nil {
			t.Fatal(err)
		}
		token := reg.AccessToken
		return func() *api.Job {
			resp, err := worker.Poll(ctx, token, 0)
			if err != nil {
				t.Fatal(err)
			}
			if resp.AccessToken != "" {
				token = resp.AccessToken
			}
			return resp.Job
		}
	}
	if _, stderr, code := ctl(t, bin, "pools", "set", "ci", "--allow-local"); code != 2 || !strings.Contains(stderr, "--trusted") {
		t.Fatalf("pools set --allow-local alone: %d %q", code, stderr)
	}
	if _, stderr, code := ctl(t, bin, "pools", "set", "ci", "--trusted"); code != 0 {
		t.Fatalf("pools set --trusted: %d %s", code, stderr)
	}
	pollLocal := register("ci-runner", "ci", api.VMDriverLocal, api.PlatformIOS)
	var certs bytes.Buffer
	zw := zip.NewWriter(&certs)
	for name, body := range map[string]string{"dist.p12": "P12", "password.txt": "pw"} {
		w, _ := zw.Create(name)
		w.Write([]byte(body))
	}
	zw.Close()
	signed, err := admin.Submit(ctx, api.SubmitRequest{Platform: api.PlatformIOS, Project: "p1", Source: plainSource(), Certs: &certs})
	if err != nil {
		t.Fatal(err)
	}
	if j := pollLocal(); j != nil {
		t.Fatalf("a local-driver worker of a trusted pool without --allow-local claimed credentialed build %s", j.ID)
	}
	pools, err := admin.ListPools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pools.Pools {
		if p.Name == "ci" && (!p.Trusted || p.AllowLocal) {
			t.Fatalf("GET /api/pools after pools set ci --trusted: %+v", p)
		}
	}
	// Trusting a pool shows its workers and whether the trust reaches them.
	if out, stderr, code := ctl(t, bin, "pools", "set", "ci", "--trusted", "--allow-local"); code != 0 ||
		!regexp.MustCompile(`(?m)^  ci-runner +\S+ +\S+ +online +yes$`).MatchString(out) {
		t.Fatalf("pools set --trusted --allow-local: %d %q %s", code, out, stderr)
	}
	if j := pollLocal(); j == nil || j.ID != signed.ID {
		t.Fatalf("the local-driver worker of an --allow-local pool: %+v, want %s", j, signed.ID)
	}

	// projects pools: a project limited to pools is built only there.
	if out, stderr, code := ctl(t, bin, "projects", "pools", "p3", "walled"); code != 0 || !strings.Contains(out, "p3 may use pools walled") {
		t.Fatalf("projects pools p3 walled: %d %q %s", code, out, stderr)
	}
	var pp api.ProjectPools
	if out, _, _ := ctl(t, bin, "projects", "pools", "p3", "--json"); json.Unmarshal([]byte(out), &pp) != nil || strings.Join(pp.Pools, ",") != "walled" {
		t.Fatalf("projects pools p3 --json: %q", out)
	}
	walled, err := admin.Submit(ctx, api.SubmitRequest{Platform: api.PlatformAndroid, Project: "p3", Source: plainSource()})
	if err != nil {
		t.Fatal(err)
	}
	pollOutside := register("outside", "community", "tart", api.PlatformAndroid)
	for {
		j := pollOutside()
		if j == nil {
			break
		}
		if j.ID == walled.ID {
			t.Fatal("a worker outside project p3's pools claimed its build")
		}
		pollOutside = register("outside-"+j.ID, "community", "tart", api.PlatformAndroid) // it holds p1's plain build; another takes the next
	}
	if j := register("inside", "walled", "tart", api.PlatformAndroid)(); j == nil || j.ID != walled.ID {
		t.Fatalf("a worker of p3's pool: %+v", j)
	}
	if out, _, code := ctl(t, bin, "projects", "pools", "p3", "any"); code != 0 || !strings.Contains(out, "p3 may use any pool") {
		t.Fatalf("projects pools p3 any: %d %q", code, out)
	}

	// projects cache-domain: split by default, one when the admin says so.
	if out, stderr, code := ctl(t, bin, "projects", "cache-domain", "p3"); code != 0 || !strings.Contains(out, "p3: caches split") {
		t.Fatalf("projects cache-domain p3: %d %q %s", code, out, stderr)
	}
	if out, stderr, code := ctl(t, bin, "projects", "cache-domain", "p3", "one"); code != 0 || !strings.Contains(out, "p3: one cache domain") {
		t.Fatalf("projects cache-domain p3 one: %d %q %s", code, out, stderr)
	}
	if _, _, code := ctl(t, bin, "projects", "cache-domain", "p3", "maybe"); code != 2 {
		t.Fatalf("projects cache-domain p3 maybe: exit %d, want a usage error", code)
	}

	// keys revoke: the build token of a build the key submitted dies with it.
	owner := &api.Client{BaseURL: c.URL, BuildToken: b1.AccessToken}
	if _, err := owner.GetBuild(ctx, b1.ID); err != nil {
		t.Fatalf("the build token before its key is revoked: %v", err)
	}
	if _, stderr, code := ctl(t, bin, "keys", "revoke", dev1ID); code != 0 {
		t.Fatalf("keys revoke: %d %s", code, stderr)
	}
	eventually(t, "the build token of a revoked key's build is refused", func() bool {
		_, err := owner.GetBuild(ctx, b1.ID)
		return api.StatusOf(err) == http.StatusUnauthorized
	})
}

// TestSlowBodyAgainstTheBinary: an unauthenticated client that trickles
// its body to a controller process with its default settings is answered
// or cut off within 5 s.
func TestSlowBodyAgainstTheBinary(t *testing.T) {
	bin := controllerBinary(t)
	t.Setenv("DATABASE_URL", pgtest.NewDatabase(t))
	c := startReplica(t, bin, "--data-dir", t.TempDir())
	for name, header := range map[string]string{"no key": "", "a wrong key": api.HeaderAPIKey + ": fak_wrong\r\n"} {
		conn, err := net.Dial("tcp", strings.TrimPrefix(c.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		conn.Write([]byte("POST /api/builds HTTP/1.1\r\nHost: controller\r\nContent-Type: multipart/form-data; boundary=b\r\n" +
			header + "Content-Length: 100000\r\n\r\n--b\r\n"))
		stop := make(chan struct{})
		go func() { // a byte every 200 ms, until the controller closes the connection
			for {
				select {
				case <-stop:
					return
				case <-time.After(200 * time.Millisecond):
					if _, err := conn.Write([]byte("x")); err != nil {
						return
					}
				}
			}
		}()
		// The bound under test: the read gives up at 5 s.
		conn.SetReadDeadline(start.Add(5 * time.Second))
		br := bufio.NewReader(conn)
		statusLine, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("%s: no answer within 5 s (%v)", name, err)
		}
		for err == nil { // then the connection is closed
			_, err = br.ReadByte()
		}
		var ne net.Error
		if isTimeout := errors.As(err, &ne) && ne.Timeout(); isTimeout {
			t.Fatalf("%s: answered %q but the connection stayed open past 5 s", name, strings.TrimSpace(statusLine))
		}
		close(stop)
		conn.Close()
		if !strings.Contains(statusLine, " 401 ") {
			t.Fatalf("%s: answered %q, want 401", name, strings.TrimSpace(statusLine))
		}
		t.Logf("%s: %s, closed after %v", name, strings.TrimSpace(statusLine), time.Since(start).Round(time.Millisecond))
	}
}
