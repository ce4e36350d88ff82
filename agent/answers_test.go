package agent

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/freeagent-build/freeagent/api"
)

// silentController never answers the first call to each path, as a
// connection that died without either end hearing of it; later calls get
// the answer. Whether and when the client gave the silent call up is recorded.
type silentController struct {
	answer any
	ended  chan struct{} // closed when the test ends: the silent calls return

	mu        sync.Mutex
	seen      map[string]int
	abandoned map[string]bool
	answered  chan string // paths of answered calls
}

func newSilentController(t *testing.T, answer any) (*silentController, *api.Client) {
	c := &silentController{answer: answer, ended: make(chan struct{}), seen: map[string]int{},
		abandoned: map[string]bool{}, answered: make(chan string, 16)}
	srv := httptest.NewServer(c)
	t.Cleanup(func() {
		close(c.ended)
		srv.Close()
	})
	return c, &api.Client{BaseURL: srv.URL, APIKey: "k", HTTP: srv.Client()}
}

func (c *silentController) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	c.mu.Lock()
	c.seen[r.URL.Path]++
	first := c.seen[r.URL.Path] == 1
	c.mu.Unlock()
	if first {
		select {
		case <-r.Context().Done(): // the client gave the call up and closed its connection
			c.mu.Lock()
			c.abandoned[r.URL.Path] = true
			c.mu.Unlock()
		case <-c.ended:
		}
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(c.answer)
	select {
	case c.answered <- r.URL.Path:
	default: // enough answers are waiting to be read
	}
}

// waitAnswered waits for an answered call to path after the silent one;
// with givenUp, the silent one must have been given up by then.
func (c *silentController) waitAnswered(t *testing.T, path, what string, givenUp bool) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case p := <-c.answered:
			if p != path {
				continue
			}
			if givenUp && !c.givenUp(path) {
				t.Fatalf("%s: the unanswered call was not given up before the next one", what)
			}
			return
		case <-deadline:
			t.Fatalf("%s: an unanswered call held back the next one for 30 s", what)
		}
	}
}

func (c *silentController) givenUp(path string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.abandoned[path]
}

func silentAgent(client *api.Client) *Agent {
	log := logrus.New()
	log.SetOutput(io.Discard)
	return &Agent{cfg: Config{PollWait: 100 * time.Millisecond, AnswerGrace: 200 * time.Millisecond,
		BackoffMin: 50 * time.Millisecond, BackoffMax: 200 * time.Millisecond},
		client: client, log: log, heartbeat: 100 * time.Millisecond, running: map[string]*build{}}
}

func silentBuild(a *Agent) *build {
	return &build{a: a, job: &api.Job{ID: "b1", AttemptID: "a1", LeaseToken: "l"}, beat: make(chan struct{}, 1), log: a.log}
}

// A heartbeat that gets no answer must not hold back the next: the lease
// would expire behind it and the build be lost. It is given up in the end.
func TestUnansweredHeartbeatHoldsNothingBack(t *testing.T) {
	c, client := newSilentController(t, api.HeartbeatResponse{})
	b := silentBuild(silentAgent(client))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.heartbeats(ctx, func(error) {})
	}()
	c.waitAnswered(t, "/api/workers/heartbeat", "heartbeat", false)
	for deadline := time.Now().Add(30 * time.Second); !c.givenUp("/api/workers/heartbeat"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the unanswered heartbeat was never given up")
		}
	}
	cancel()
	<-done
}

// A result report that gets no answer is sent again, not waited on until
// the report gives up and the finished build is requeued.
func TestUnansweredResultIsSentAgain(t *testing.T) {
	c, client := newSilentController(t, api.ResultResponse{Status: api.StatusCompleted})
	b := silentBuild(silentAgent(client))
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.report(context.Background(), outcome{success: true})
	}()
	c.waitAnswered(t, "/api/workers/upload", "result", true)
	<-done
}

// A long poll that gets no answer past its wait is given up, and the
// worker polls again.
func TestUnansweredPollIsGivenUp(t *testing.T) {
	c, client := newSilentController(t, api.PollResponse{})
	a := silentAgent(client)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 2; i++ {
			a.poll(context.Background())
		}
	}()
	c.waitAnswered(t, "/api/workers/poll", "poll", true)
	<-done
}

// A cancel watch that gets no answer past its wait is given up, and the
// build watches again.
func TestUnansweredCancelWatchIsGivenUp(t *testing.T) {
	c, client := newSilentController(t, api.CancelWatchResponse{Status: api.StatusCompleted})
	b := silentBuild(silentAgent(client))
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.watchCancel(context.Background(), func(error) {})
	}()
	c.waitAnswered(t, "/api/workers/builds/b1/cancel", "cancel watch", true)
	<-done
}

// Over HTTP/2 every call shares one connection, and giving a call up only
// resets its stream: a connection that died unheard must be found and
// replaced, or every later call would wait on it too.
func TestDeadHTTP2ConnectionIsReplaced(t *testing.T) {
	var h2 atomic.Bool
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h2.Store(r.ProtoMajor == 2)
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte("{}"))
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	hole := newBlackHole(t, srv.Listener.Addr().String())

	a := silentAgent(nil)
	transport := controllerTransport(a.cfg)
	transport.TLSClientConfig = srv.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	a.client = &api.Client{BaseURL: "https://" + hole.addr, APIKey: "k", HTTP: &http.Client{Transport: transport}}

	if _, err := a.poll(context.Background()); err != nil || !h2.Load() {
		t.Fatalf("first poll: %v (HTTP/2: %v)", err, h2.Load())
	}
	hole.swallowOpenConnections()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := a.poll(context.Background()); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("every poll for 30 s went to the dead connection")
		}
	}
	if hole.accepted() < 2 {
		t.Fatalf("a poll was answered on the dead connection (%d accepted)", hole.accepted())
	}
}

// blackHole forwards TCP connections to target until told to swallow the
// open ones: from then on their bytes are read and dropped in both
// directions and nothing is closed, as on a path that died. Connections
// made later pass.
type blackHole struct {
	addr   string
	target string
	mu     sync.Mutex
	gen    int
	conns  int
}

func newBlackHole(t *testing.T, target string) *blackHole {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &blackHole{addr: ln.Addr().String(), target: target}
	var wg sync.WaitGroup
	var open []net.Conn
	var openMu sync.Mutex
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			openMu.Lock()
			open = append(open, c, up)
			openMu.Unlock()
			h.mu.Lock()
			h.conns++
			gen := h.gen
			h.mu.Unlock()
			for _, pair := range [][2]net.Conn{{c, up}, {up, c}} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					h.forward(pair[0], pair[1], gen)
				}()
			}
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		openMu.Lock()
		for _, c := range open {
			c.Close()
		}
		openMu.Unlock()
		wg.Wait()
	})
	return h
}

func (h *blackHole) forward(from, to net.Conn, gen int) {
	buf := make([]byte, 32<<10)
	for {
		n, err := from.Read(buf)
		if err != nil {
			return
		}
		h.mu.Lock()
		dead := h.gen != gen
		h.mu.Unlock()
		if dead {
			continue
		}
		if _, err := to.Write(buf[:n]); err != nil {
			return
		}
	}
}

func (h *blackHole) swallowOpenConnections() {
	h.mu.Lock()
	h.gen++
	h.mu.Unlock()
}

func (h *blackHole) accepted() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.conns
}
