// Package solo runs the controller inside the Mac app, for one developer
// with one Mac and no server: its own PostgreSQL (Homebrew or Postgres.app
// binaries) and files under the app's data folder, a worker key kept in the
// secret store for the embedded worker, and a developer key in a file for
// `expo-build`. Build VMs reach it through the host's address on Tart's
// network (agent.GuestURL). The controller listens on loopback and on that
// address, bound once the bridge exists (it does only while a VM runs), and
// serves only this Mac and the VM network, closing any other connection as
// it is accepted.
package solo

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/freeagent-build/freeagent/agent/secrets"
	"github.com/freeagent-build/freeagent/controller/httpapi"
	"github.com/freeagent-build/freeagent/controller/serve"
	"github.com/freeagent-build/freeagent/controller/store"
)

// KeyWorker is the secret-store entry of the embedded worker's API key.
const KeyWorker = "solo-worker-key"

// DefaultListen is where the solo controller listens: this Mac's loopback
// and, at the same port, its address on Tart's VM network (Config.Bridge),
// bound once that bridge exists. Not every interface: the LAN does not
// reach it, and macOS's firewall has nothing to ask about.
const DefaultListen = "127.0.0.1:8420"

// DefaultBridge is this Mac's address on Tart's shared (vmnet) network, the
// address the VMs reach the host by (the worker's --host-address).
const DefaultBridge = "192.168.64.1"

// DefaultVMNetwork is Tart's shared (vmnet) network on macOS.
const DefaultVMNetwork = "192.168.64.0/24"

// loopback is this Mac.
var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}

// Config says where the solo controller lives.
type Config struct {
	DataDir string // the app's data folder; the controller uses DataDir/controller
	Listen  string // host:port
	// VMNetwork is the CIDR prefix of the build VMs' network, the only
	// addresses served beside loopback; "" is DefaultVMNetwork.
	VMNetwork string
	// Bridge is this Mac's address on the VM network, served beside
	// loopback when Listen is a loopback address; "" is DefaultBridge.
	Bridge  string
	Secrets secrets.Store
}

// listener is what the controller serves: loopback plus the VM bridge for a
// loopback Listen, else (an owner's explicit choice) Listen alone.
func (cfg Config) listener(log logrus.FieldLogger) (net.Listener, error) {
	listen := cmp.Or(cfg.Listen, DefaultListen)
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return nil, fmt.Errorf("--solo-listen %q is not host:port: %w", listen, err)
	}
	if ip, err := netip.ParseAddr(host); err != nil || !ip.IsLoopback() {
		ln, err := net.Listen("tcp", listen)
		if err != nil {
			return nil, fmt.Errorf("listen on %s: %w", listen, err)
		}
		return ln, nil
	}
	ln, err := listenLoopbackAndBridge(port, cmp.Or(cfg.Bridge, DefaultBridge), log)
	if err != nil {
		return nil, fmt.Errorf("listen on %s (choose another port with --solo-listen): %w", listen, err)
	}
	return ln, nil
}

// allowedClients is loopback and the VM network.
func (cfg Config) allowedClients() ([]netip.Prefix, error) {
	vmNet, err := netip.ParsePrefix(cmp.Or(cfg.VMNetwork, DefaultVMNetwork))
	if err != nil {
		return nil, fmt.Errorf("the VM network %q (--solo-vm-network) is not a CIDR prefix such as %s: %w", cfg.VMNetwork, DefaultVMNetwork, err)
	}
	return append(slices.Clone(loopback), vmNet.Masked()), nil
}

// Controller is a running solo controller.
type Controller struct {
	// URL is the controller on this Mac's loopback (the worker rewrites it
	// for the VMs); DeveloperKeyFile holds the key for expo-build.
	URL              string
	WorkerKey        string
	DeveloperKeyFile string
	ctl              *serve.Controller
}

// Dir is the controller's data folder under the app's.
func Dir(dataDir string) string { return filepath.Join(dataDir, "controller") }

// DeveloperKeyFile is where the developer key for expo-build is written.
func DeveloperKeyFile(dataDir string) string { return filepath.Join(Dir(dataDir), "developer-key") }

// Start starts the controller (creating its database on first use) and
// makes sure both keys exist and are valid.
func Start(ctx context.Context, cfg Config, log logrus.FieldLogger) (*Controller, error) {
	allowed, err := cfg.allowedClients()
	if err != nil {
		return nil, err
	}
	ln, err := cfg.listener(log)
	if err != nil {
		return nil, fmt.Errorf("start the controller on this Mac: %w", err)
	}
	ctl, err := serve.Start(ctx, serve.Config{Listener: ln, AllowClients: allowed, DataDir: Dir(cfg.DataDir), ReaperInterval: 30 * time.Second,
		Store: store.DefaultConfig(), Limits: httpapi.DefaultLimits()}, log.WithField("component", "controller"))
	if err != nil {
		ln.Close() // serve.Start may fail before it serves ln
		return nil, fmt.Errorf("start the controller on this Mac: %w", err)
	}
	c := &Controller{ctl: ctl, URL: loopbackURL(ctl.URL), DeveloperKeyFile: DeveloperKeyFile(cfg.DataDir)}
	if err := c.ensureKeys(ctx, cfg.Secrets); err != nil {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		ctl.Shutdown(sctx)
		return nil, err
	}
	log.WithFields(logrus.Fields{"url": c.URL, "developer_key": c.DeveloperKeyFile}).Info("controller running on this Mac")
	return c, nil
}

// loopbackURL turns http://0.0.0.0:P or http://[::]:P into 127.0.0.1.
func loopbackURL(u string) string {
	host, port, err := net.SplitHostPort(strings.TrimPrefix(u, "http://"))
	if err != nil {
		return u
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// ensureKeys reuses the stored keys while the database still knows them,
// else creates new ones.
func (c *Controller) ensureKeys(ctx context.Context, sec secrets.Store) error {
	st := c.ctl.Store()
	valid := func(key, role string) bool {
		k, err := st.AuthenticateKey(ctx, key)
		return key != "" && err == nil && k.Role == role
	}
	worker, err := sec.Get(KeyWorker)
	if err != nil && !errors.Is(err, secrets.ErrNotFound) {
		return err
	}
	if !valid(worker, "worker") {
		if _, worker, err = st.CreateKey(ctx, "this-mac", "worker"); err != nil {
			return fmt.Errorf("create the worker key: %w", err)
		}
		if err := sec.Set(KeyWorker, worker); err != nil {
			return err
		}
	}
	c.WorkerKey = worker
	b, err := os.ReadFile(c.DeveloperKeyFile)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("read %s: %w", c.DeveloperKeyFile, err)
	}
	if !valid(strings.TrimSpace(string(b)), "developer") {
		_, dev, err := st.CreateKey(ctx, "expo-build on this Mac", "developer")
		if err != nil {
			return fmt.Errorf("create the developer key: %w", err)
		}
		if err := os.WriteFile(c.DeveloperKeyFile, []byte(dev+"\n"), 0o600); err != nil {
			return fmt.Errorf("write %s: %w", c.DeveloperKeyFile, err)
		}
	}
	return nil
}

// Shutdown stops the controller and its database.
func (c *Controller) Shutdown(ctx context.Context) error { return c.ctl.Shutdown(ctx) }
