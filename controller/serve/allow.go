package serve

import (
	"net"
	"net/netip"
	"slices"

	"github.com/sirupsen/logrus"
)

// AllowOnly wraps ln so that Accept returns only connections from allowed
// addresses; any other is closed at once, before anything is read from it
// or written to it.
func AllowOnly(ln net.Listener, allowed []netip.Prefix, log logrus.FieldLogger) net.Listener {
	return &allowListener{Listener: ln, allowed: slices.Clone(allowed), log: log}
}

type allowListener struct {
	net.Listener
	allowed []netip.Prefix
	log     logrus.FieldLogger
}

func (l *allowListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.allows(c.RemoteAddr()) {
			return c, nil
		}
		l.log.WithField("client", c.RemoteAddr().String()).Debug("refused a connection from an address this controller does not serve")
		c.Close()
	}
}

func (l *allowListener) allows(a net.Addr) bool {
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return false
	}
	ip := ap.Addr().Unmap()
	return slices.ContainsFunc(l.allowed, func(p netip.Prefix) bool { return p.Contains(ip) })
}
