package main

import (
	"archive/zip"
	"bytes"
	"context"
	"fmt"
	"mime/multipart"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/freeagent-build/freeagent/api"
	"github.com/freeagent-build/freeagent/controller/pgtest"
)

// certsBomb is a certificates zip of under half a megabyte that expands to
// 450 MiB: 45 profiles of 10 MiB of zeros each, beside a .p12 and its
// password (what the security review saw take 575 MB of controller memory).
func certsBomb(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	add := func(name string, body []byte) {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(body); err != nil {
			t.Fatal(err)
		}
	}
	add("dist.p12", []byte("P12"))
	add("password.txt", []byte("pw"))
	zeros := make([]byte, 10<<20)
	for i := range 45 {
		add(fmt.Sprintf("profile-%02d.mobileprovision", i), zeros)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if buf.Len() > 600<<10 {
		t.Fatalf("the bomb is %d bytes; it should be small", buf.Len())
	}
	return buf.Bytes()
}

// peakRSS reads a process's peak resident set (VmHWM) in bytes.
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatalf("read the controller's memory figures (this test needs Linux's /proc): %v", err)
	}
	m := regexp.MustCompile(`(?m)^VmHWM:\s+(\d+) kB$`).FindSubmatch(raw)
	if m == nil {
		t.Fatalf("no VmHWM in /proc/%d/status", pid)
	}
	kb, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return kb << 10
}

// TestCertsZipBombPeakMemory posts a certificates zip bomb to a real
// controller process, on submit and on retry: both are refused with a 4xx
// and the process's peak memory stays under 150 MB.
func TestCertsZipBombPeakMemory(t *testing.T) {
	bin := controllerBinary(t)
	t.Setenv("DATABASE_URL", pgtest.NewDatabase(t))
	c := startReplica(t, bin, "--data-dir", t.TempDir())
	key, _, code := runCmd(t, "keys", "create", "--name", "dev", "--role", "developer")
	if code != 0 {
		t.Fatal("keys create failed")
	}
	dev := &api.Client{BaseURL: c.URL, APIKey: strings.TrimSpace(key)}
	ctx := context.Background()
	bomb := certsBomb(t)
	src := []byte("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03\x03\x00\x00\x00\x00\x00\x00\x00\x00\x00") // an empty tar.gz
	for range 3 {
		_, err := dev.Submit(ctx, api.SubmitRequest{Platform: "ios", Source: bytes.NewReader(src), Certs: bytes.NewReader(bomb)})
		if st := api.StatusOf(err); st < 400 || st >= 500 {
			t.Fatalf("submitting the bomb: want a 4xx, got %d (%v)", st, err)
		}
	}
	// A retry that sends its certificates again parses them too.
	var good bytes.Buffer
	zw := zip.NewWriter(&good)
	for name, body := range map[string]string{"dist.p12": "P12", "password.txt": "pw"} {
		w, _ := zw.Create(name)
		w.Write([]byte(body))
	}
	zw.Close()
	sub, err := dev.Submit(ctx, api.SubmitRequest{Platform: "ios", Source: bytes.NewReader(src), Certs: &good})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dev.Cancel(ctx, sub.ID); err != nil {
		t.Fatal(err)
	}
	var body bytes.Buffer
	mw := newMultipart(&body, "certs", "certs.zip", bomb)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, c.URL+"/api/builds/"+sub.ID+"/retry", &body)
	req.Header.Set("Content-Type", mw)
	req.Header.Set(api.HeaderAPIKey, dev.APIKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode < 400 || resp.StatusCode >= 500 {
		t.Fatalf("retrying with the bomb: want a 4xx, got %d", resp.StatusCode)
	}
	if peak := peakRSS(t, c.cmd.Process.Pid); peak >= 150<<20 {
		t.Fatalf("the controller's peak memory reached %d MB", peak>>20)
	} else {
		t.Logf("controller peak memory: %d MB", peak>>20)
	}
}

// newMultipart writes a multipart body with one file field and returns its
// Content-Type.
func newMultipart(buf *bytes.Buffer, field, name string, data []byte) string {
	mw := multipart.NewWriter(buf)
	fw, _ := mw.CreateFormFile(field, name)
	fw.Write(data)
	mw.Close()
	return mw.FormDataContentType()
}
