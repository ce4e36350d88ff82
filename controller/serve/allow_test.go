package serve

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
)

// dialFrom connects to addr from local address from and sends one HTTP
// request; it returns the status line, or the error the connection ended with.
func dialFrom(t *testing.T, from, addr string) (string, error) {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial from %s: %v", from, err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"); err != nil {
		return "", err
	}
	return bufio.NewReader(c).ReadString('\n')
}

// A wildcard listener limited to 127.0.0.1 serves a connection from
// 127.0.0.1 and closes one from 127.0.0.2 (another loopback address, so
// the test needs no other interface) without answering.
func TestAllowOnlyClosesOtherClients(t *testing.T) {
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	log := logrus.New()
	log.SetOutput(io.Discard)
	ln = AllowOnly(ln, []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("192.168.64.0/24")}, log)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello") })}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(ln.Addr().(*net.TCPAddr).Port))
	if status, err := dialFrom(t, "127.0.0.1", addr); err != nil || !strings.Contains(status, " 200 ") {
		t.Fatalf("from an allowed address: %q %v", status, err)
	}
	status, err := dialFrom(t, "127.0.0.2", addr)
	if err == nil || status != "" {
		t.Fatalf("from 127.0.0.2: answered %q (want the connection closed unanswered)", status)
	}
	// The listener still serves allowed clients after refusing one.
	if status, err := dialFrom(t, "127.0.0.1", addr); err != nil || !strings.Contains(status, " 200 ") {
		t.Fatalf("from an allowed address after a refusal: %q %v", status, err)
	}
}
