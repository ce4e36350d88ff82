package solo

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
)

// bridgeListener serves loopback and this Mac's address on Tart's VM
// network, and nothing else: not 0.0.0.0, which would expose the
// controller to the LAN and make macOS's firewall ask about it. The bridge
// (192.168.64.1 on bridge100) exists only while a VM runs, so it is bound
// when it appears: retried every retryEvery until it is; once bound, the
// socket keeps serving the address whenever the bridge is back.
type bridgeListener struct {
	loopback net.Listener
	bridge   string // host:port on the VM bridge
	listen   func(addr string) (net.Listener, error)
	retry    <-chan time.Time // a tick: try binding the bridge again
	log      logrus.FieldLogger

	conns  chan net.Conn
	stop   context.CancelFunc
	ctx    context.Context
	wg     sync.WaitGroup
	closed sync.Once
}

// retryEvery is how often the bridge address is tried until it can be
// bound: the first VM of a session brings it up a few seconds before it
// asks the controller for anything.
const retryEvery = 2 * time.Second

// listenLoopbackAndBridge listens on 127.0.0.1:port and, once it exists,
// bridgeIP:port (the same port).
func listenLoopbackAndBridge(port, bridgeIP string, log logrus.FieldLogger) (net.Listener, error) {
	tick := time.NewTicker(retryEvery)
	l, err := newBridgeListener(port, bridgeIP, func(addr string) (net.Listener, error) { return net.Listen("tcp", addr) }, tick.C, log)
	if err != nil {
		tick.Stop()
		return nil, err
	}
	l.wg.Go(func() { <-l.ctx.Done(); tick.Stop() })
	return l, nil
}

func newBridgeListener(port, bridgeIP string, listen func(string) (net.Listener, error), retry <-chan time.Time, log logrus.FieldLogger) (*bridgeListener, error) {
	lo, err := listen(net.JoinHostPort("127.0.0.1", port))
	if err != nil {
		return nil, err
	}
	_, bound, _ := net.SplitHostPort(lo.Addr().String()) // port 0 picked one
	ctx, stop := context.WithCancel(context.Background())
	l := &bridgeListener{loopback: lo, bridge: net.JoinHostPort(bridgeIP, bound), listen: listen, retry: retry, log: log,
		conns: make(chan net.Conn), ctx: ctx, stop: stop}
	l.wg.Go(func() { l.accept(lo) })
	l.wg.Go(l.bindBridge)
	return l, nil
}

// bindBridge binds the bridge address now or at a later tick.
func (l *bridgeListener) bindBridge() {
	for {
		ln, err := l.listen(l.bridge)
		if err == nil {
			l.log.WithField("address", l.bridge).Info("the controller on this Mac listens on the VM network")
			l.accept(ln)
			return
		}
		l.log.WithError(err).Debug("the VM network is not up yet")
		select {
		case <-l.ctx.Done():
			return
		case <-l.retry:
		}
	}
}

// accept forwards ln's connections until the listener closes.
func (l *bridgeListener) accept(ln net.Listener) {
	l.wg.Go(func() { <-l.ctx.Done(); ln.Close() })
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		select {
		case l.conns <- c:
		case <-l.ctx.Done():
			c.Close()
			return
		}
	}
}

func (l *bridgeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.ctx.Done():
		return nil, fmt.Errorf("accept on %s: %w", l.loopback.Addr(), net.ErrClosed)
	}
}

// Close stops both listeners and waits for their goroutines.
func (l *bridgeListener) Close() error {
	l.closed.Do(func() {
		l.stop()
		l.wg.Wait()
	})
	return nil
}

// Addr is the loopback address: the URL this Mac uses.
func (l *bridgeListener) Addr() net.Addr { return l.loopback.Addr() }
