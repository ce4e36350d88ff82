package api

import (
	"fmt"
	"net"
	"net/url"
	"strings"
)

// InsecureURLError is CheckTransport's refusal of a plain-HTTP controller
// URL on another machine: API keys, worker and build tokens, sources,
// signing certificates and artifacts would cross the network readable and
// changeable by anyone on the path.
type InsecureURLError struct {
	URL string // redacted
}

func (e *InsecureURLError) Error() string {
	return fmt.Sprintf("%s is plain http to another machine: keys, tokens, sources and signing credentials would cross the network unencrypted; use https://", e.URL)
}

// CheckTransport returns an *InsecureURLError for an http:// URL whose
// host is not this machine (localhost, 127.0.0.0/8, ::1), nil otherwise.
// Each client decides, through its own setting (expo-build --insecure,
// FREEAGENT_INSECURE=1), whether to go on anyway, and then says so loudly
// (InsecureWarning).
//
// The in-VM bootstrap is not checked: its URL is the one the agent gave it,
// after the agent checked its own; for a controller on the agent's
// loopback that is http:// to the agent's address on the host-only VM
// network (GuestURL), which never leaves the Mac.
func CheckTransport(rawURL string) error {
	u, err := url.Parse(strings.TrimSpace(rawURL))
	if err != nil || !strings.EqualFold(u.Scheme, "http") || IsLoopbackHost(u.Hostname()) {
		return nil // not a URL, https or this machine: other checks judge the rest
	}
	return &InsecureURLError{URL: u.Redacted()}
}

// IsLoopbackHost is true for localhost and loopback addresses.
func IsLoopbackHost(host string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// InsecureWarning is what a client prints when its owner let it use a
// plain-HTTP URL anyway.
func InsecureWarning(rawURL, setting string) string {
	return fmt.Sprintf("INSECURE: talking to %s over plain HTTP (%s): anyone on the network between here and the controller can read and change "+
		"API keys, tokens, sources, signing credentials and artifacts. Serve the controller over HTTPS "+
		"(freeagent-controller serve --tls-cert/--tls-key, or a TLS proxy) and drop %s.", rawURL, setting, setting)
}
