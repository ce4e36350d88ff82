package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/freeagent-build/freeagent/internal/config"
)

// cmdHealth asks a controller on this machine whether it is ready: the
// HEALTHCHECK of the container image, which has no curl. Without --url it
// reads FREEAGENT_LISTEN (and FREEAGENT_TLS_CERT for the scheme) as serve
// does, so it needs no argument inside the container.
func cmdHealth(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("freeagent-controller health", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := os.Getenv("FREEAGENT_LISTEN")
	if listen == "" {
		listen = defaultListen
	}
	scheme := "http"
	if os.Getenv("FREEAGENT_TLS_CERT") != "" {
		scheme = "https"
	}
	def := scheme + "://" + loopbackFor(listen) + "/health/ready"
	u := fs.String("url", def, "the readiness URL to ask (default: FREEAGENT_LISTEN's port on loopback)")
	timeout := 5 * time.Second
	fs.Var(&config.DurationValue{P: &timeout}, "timeout", "how long to wait for the answer (a `duration`)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, *u, nil)
	if err != nil {
		return usageError{fmt.Errorf("--url %q: %w", *u, err)}
	}
	// A probe of this machine's own controller, which carries no
	// credentials: its certificate names the public host, not loopback.
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("health: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("health: %s answered %s: %s", *u, resp.Status, strings.TrimSpace(string(body)))
	}
	fmt.Fprintf(stdout, "ready: %s\n", *u)
	return nil
}

// loopbackFor turns a listen address into one to dial on this machine: a
// wildcard or empty host becomes 127.0.0.1.
func loopbackFor(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return listen
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}
