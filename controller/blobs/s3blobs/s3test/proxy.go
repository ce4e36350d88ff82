package s3test

import (
	"io"
	"net"
	"strings"
	"sync"
	"testing"
)

// Proxy forwards TCP connections to a server and breaks them on demand: the
// network between a controller and its store failing, with the store itself
// untouched.
type Proxy struct {
	ln     net.Listener
	target string

	mu       sync.Mutex
	conns    map[net.Conn]struct{}
	down     bool
	failNext int
	refused  int
}

// NewProxy forwards a new local port to the bucket's gateway; the
// returned bucket's Endpoint is the proxy.
func NewProxy(t testing.TB, b Bucket) (*Proxy, Bucket) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, target: strings.TrimPrefix(b.Endpoint, "http://"), conns: map[net.Conn]struct{}{}}
	go p.serve()
	t.Cleanup(p.close)
	b.Endpoint = "http://" + ln.Addr().String()
	return p, b
}

// Down breaks every open connection and refuses new ones until Up.
func (p *Proxy) Down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	p.closeConns()
}

// Up lets connections through again.
func (p *Proxy) Up() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
}

// FailNext breaks every open connection and refuses the next n new ones.
func (p *Proxy) FailNext(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.failNext = n
	p.closeConns()
}

// Refused is how many connections were refused so far.
func (p *Proxy) Refused() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refused
}

func (p *Proxy) closeConns() {
	for c := range p.conns {
		c.Close()
	}
}

func (p *Proxy) close() {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closeConns()
}

func (p *Proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		refuse := p.down || p.failNext > 0
		if refuse {
			p.refused++
			if p.failNext > 0 {
				p.failNext--
			}
		} else {
			p.conns[c] = struct{}{}
		}
		p.mu.Unlock()
		if refuse {
			c.Close()
			continue
		}
		go p.forward(c)
	}
}

func (p *Proxy) forward(c net.Conn) {
	defer func() {
		p.mu.Lock()
		delete(p.conns, c)
		p.mu.Unlock()
		c.Close()
	}()
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	p.mu.Lock()
	p.conns[up] = struct{}{}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.conns, up)
		p.mu.Unlock()
		up.Close()
	}()
	done := make(chan struct{}, 2)
	go func() { io.Copy(up, c); done <- struct{}{} }()
	go func() { io.Copy(c, up); done <- struct{}{} }()
	<-done
}
