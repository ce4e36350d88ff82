package httpapi_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/freeagent-build/freeagent/api"
)

// Truncated uploads over a raw connection

// biSendTruncated writes a request whose Content-Length announces body but
// sends only its first half. With abrupt it then resets the connection;
// otherwise it half-closes and returns the answer.
func biSendTruncated(t *testing.T, e *env, path string, body []byte, abrupt bool, hdr ...string) (status int, answer []byte) {
	t.Helper()
	pu, err := url.Parse(e.URL)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", pu.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var head bytes.Buffer
	fmt.Fprintf(&head, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n", path, pu.Host, len(body))
	for i := 0; i+1 < len(hdr); i += 2 {
		fmt.Fprintf(&head, "%s: %s\r\n", hdr[i], hdr[i+1])
	}
	head.WriteString("\r\n")
	if _, err := conn.Write(append(head.Bytes(), body[:len(body)/2]...)); err != nil {
		t.Fatal(err)
	}
	tc := conn.(*net.TCPConn)
	if abrupt {
		time.Sleep(100 * time.Millisecond) // let the server start on the body
		tc.SetLinger(0)                    // close with a reset
		tc.Close()
		return 0, nil
	}
	tc.CloseWrite()
	conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("read the answer to a truncated request: %v", err)
	}
	defer resp.Body.Close()
	answer, _ = io.ReadAll(resp.Body)
	return resp.StatusCode, answer
}

func TestTruncatedUploads(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	big := biGzipLike(200 << 10)

	t.Run("submit", func(t *testing.T) {
		body := biMultipart(biBoundary, biField("platform", "android"), biFile("source", "s.tar.gz", big))
		for _, abrupt := range []bool{false, true} {
			status, answer := biSendTruncated(t, e, "/api/builds", body, abrupt, api.HeaderAPIKey, e.devKey, "Content-Type", biMPType(biBoundary))
			if !abrupt {
				biReply{Status: status, Header: http.Header{"Content-Type": {"application/json"}}, Body: answer}.
					wantError(t, http.StatusBadRequest, api.CodeBadRequest)
			}
			biEventually(t, 3*time.Second, func() string {
				if n := biCount(t, e, `SELECT count(*) FROM builds`); n != 0 {
					return fmt.Sprintf("%d builds rows after a truncated submit", n)
				}
				if ents, _ := os.ReadDir(biBuildsDir(e)); len(ents) != 0 {
					return fmt.Sprintf("left under files/builds: %v (dirs %d)", biFiles(t, biBuildsDir(e)), len(ents))
				}
				return ""
			})
		}
	})

	t.Run("worker result", func(t *testing.T) {
		w := biRegister(t, e, "mac", api.PlatformAndroid)
		R := biStartLive(t, e, w, api.PlatformAndroid, nil, false)
		body := biResultBody(R.Job, true, biFile("result", "app.apk", big))
		want := []string{R.ID + "/source"}
		for _, abrupt := range []bool{false, true} {
			status, answer := biSendTruncated(t, e, "/api/workers/upload", body, abrupt,
				api.HeaderAPIKey, e.workKey, api.HeaderWorkerToken, w.Token, "Content-Type", biMPType(biBoundary))
			if !abrupt {
				biReply{Status: status, Header: http.Header{"Content-Type": {"application/json"}}, Body: answer}.
					wantError(t, http.StatusBadRequest, api.CodeBadRequest)
			}
			biEventually(t, 3*time.Second, func() string {
				if got := biFiles(t, biBuildsDir(e)); !slices.Equal(got, want) {
					return fmt.Sprintf("files after a truncated result upload: %v, want %v", got, want)
				}
				return ""
			})
			if b := e.build(R.ID); b.Status != api.StatusBuilding || len(b.Artifacts) != 0 {
				t.Errorf("build after a truncated result upload: %s %v", b.Status, b.Artifacts)
			}
			if n := biCount(t, e, `SELECT count(*) FROM artifacts`); n != 0 {
				t.Errorf("%d artifact rows", n)
			}
		}
		// The worker's next, complete upload still goes through.
		res, err := e.worker.Upload(context.Background(), w.Token, api.Result{BuildID: R.ID, AttemptID: R.Job.AttemptID,
			LeaseToken: R.Job.LeaseToken, Success: true, FileName: "app.apk", File: bytes.NewReader(big)})
		if err != nil || res.Status != api.StatusCompleted {
			t.Fatalf("complete upload after truncated ones: %+v %v", res, err)
		}
	})

	t.Run("VM artifact", func(t *testing.T) {
		w := biRegister(t, e, "mac-2", api.PlatformIOS)
		R := biStartLive(t, e, w, api.PlatformIOS, nil, true)
		before := biFiles(t, biBuildsDir(e))
		body := biMultipart(biBoundary, biFile("artifact", "app.ipa", big))
		for _, abrupt := range []bool{false, true} {
			status, answer := biSendTruncated(t, e, "/api/builds/"+R.ID+"/artifacts", body, abrupt, api.HeaderVMToken, R.VM, "Content-Type", biMPType(biBoundary))
			if !abrupt {
				biReply{Status: status, Header: http.Header{"Content-Type": {"application/json"}}, Body: answer}.
					wantError(t, http.StatusBadRequest, api.CodeBadRequest)
			}
			biEventually(t, 3*time.Second, func() string {
				if got := biFiles(t, biBuildsDir(e)); !slices.Equal(got, before) {
					return fmt.Sprintf("files after a truncated artifact upload: %v, want %v", got, before)
				}
				return ""
			})
			if n := biCount(t, e, `SELECT count(*) FROM artifacts WHERE build_id = $1`, R.ID); n != 0 {
				t.Errorf("%d artifact rows", n)
			}
		}
	})
}
