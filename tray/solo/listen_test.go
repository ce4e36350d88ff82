package solo

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
)

// The solo controller listens on loopback and this Mac's address on the VM
// network, never on every interface (the LAN, and macOS's firewall prompt).
func TestSoloListensOnLoopbackAndTheBridgeOnly(t *testing.T) {
	log := logrus.New()
	log.SetOutput(io.Discard)
	ln, err := Config{Listen: "127.0.0.1:0"}.listener(log)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	bl, ok := ln.(*bridgeListener)
	if !ok {
		t.Fatalf("a loopback --solo-listen gives %T, want loopback plus the bridge", ln)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	if host, _, _ := net.SplitHostPort(ln.Addr().String()); host != "127.0.0.1" || bl.bridge != "192.168.64.1:"+port {
		t.Fatalf("listens on %s and %s, want 127.0.0.1 and 192.168.64.1 at one port", ln.Addr(), bl.bridge)
	}
	if DefaultListen != "127.0.0.1:8420" {
		t.Fatalf("DefaultListen %s: not loopback", DefaultListen)
	}
}

// The bridge exists only while a VM runs: loopback is served at once, the
// bridge address once it can be bound.
func TestBridgeIsBoundWhenItAppears(t *testing.T) {
	log := logrus.New()
	log.SetOutput(io.Discard)
	const bridgeIP = "127.0.0.2" // stands in for 192.168.64.1 on Linux's 127/8 loopback
	var mu sync.Mutex
	up := false
	listen := func(addr string) (net.Listener, error) {
		if host, _, _ := net.SplitHostPort(addr); host == bridgeIP {
			mu.Lock()
			defer mu.Unlock()
			if !up {
				return nil, errors.New("bind: can't assign requested address")
			}
		}
		return net.Listen("tcp", addr)
	}
	retry := make(chan time.Time)
	l, err := newBridgeListener("0", bridgeIP, listen, retry, log)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())

	serve := func(addr string) {
		t.Helper()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("dial %s: %v", addr, err)
		}
		defer c.Close()
		s, err := l.Accept()
		if err != nil {
			t.Fatalf("accept from %s: %v", addr, err)
		}
		s.Close()
	}
	serve(l.Addr().String())

	mu.Lock()
	up = true // the first VM brought the bridge up
	mu.Unlock()
	retry <- time.Now() // taken: bindBridge waits for it while the bridge is down
	bridge := net.JoinHostPort(bridgeIP, port)
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := net.Dial("tcp", bridge)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the bridge address was never bound: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if s, err := l.Accept(); err != nil {
		t.Fatal(err)
	} else {
		s.Close()
	}
	serve(bridge)

	l.Close()
	if _, err := l.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after Close: %v", err)
	}
}
