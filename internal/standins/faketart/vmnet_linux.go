//go:build linux

package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
)

// ensureBridge creates the bridge with the gateway address once per host;
// it outlives the runs, as vmnet's bridge100 does while VMs come and go.
func ensureBridge(ip string) error {
	if exec.Command(ip, "link", "show", "dev", vmnetBridge).Run() == nil {
		return ensureNAT()
	}
	for _, args := range [][]string{
		{"link", "add", vmnetBridge, "type", "bridge"},
		{"addr", "add", vmnetGateway + "/24", "dev", vmnetBridge},
		{"link", "set", vmnetBridge, "up"},
	} {
		if err := runIPCmd(ip, args...); err != nil {
			return fmt.Errorf("faketart: FAKETART_NET=vmnet needs root (CAP_NET_ADMIN) to create bridge %s: %w", vmnetBridge, err)
		}
	}
	return ensureNAT()
}

// ensureNAT gives guests vmnet's way out: the host forwards and
// masquerades what they send beyond the bridge (package registries, DNS).
// Like Docker's bridge, it turns on IPv4 forwarding host-wide.
func ensureNAT() error {
	iptables, err := exec.LookPath("iptables")
	if err != nil {
		return fmt.Errorf("faketart: FAKETART_NET=vmnet needs iptables for vmnet's NAT (apt-get install iptables): %v", err)
	}
	const forward = "/proc/sys/net/ipv4/ip_forward"
	if cur, err := os.ReadFile(forward); err != nil || string(bytes.TrimSpace(cur)) != "1" {
		if err := os.WriteFile(forward, []byte("1\n"), 0o644); err != nil {
			return fmt.Errorf("faketart: FAKETART_NET=vmnet: turning on IPv4 forwarding: %w", err)
		}
	}
	rule := []string{"POSTROUTING", "-s", vmnetNet + "0/24", "!", "-o", vmnetBridge, "-j", "MASQUERADE"}
	if exec.Command(iptables, append([]string{"-t", "nat", "-C"}, rule...)...).Run() == nil {
		return nil
	}
	if out, err := exec.Command(iptables, append([]string{"-t", "nat", "-A"}, rule...)...).CombinedOutput(); err != nil {
		return fmt.Errorf("faketart: FAKETART_NET=vmnet: adding vmnet's NAT rule: %v: %s", err, bytes.TrimSpace(out))
	}
	return nil
}

func runIPCmd(ip string, args ...string) error {
	out, err := exec.Command(ip, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %v: %v: %s", args, err, bytes.TrimSpace(out))
	}
	return nil
}

// wrap makes cmd start in a new network namespace, through
// `tart __fake vmnet-guest`, which waits for attach to plug it in, then
// configures the guest's side and executes the guest program.
func (l *vmnetLease) wrap(cmd *exec.Cmd) (*exec.Cmd, *os.File, error) {
	self, err := selfExe()
	if err != nil {
		return nil, nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	args := append([]string{"__fake", "vmnet-guest", l.ip, l.addr(), cmd.Path, "--"}, cmd.Args...)
	wrapped := exec.Command(self, args...)
	wrapped.Args[0] = os.Args[0]
	wrapped.Env, wrapped.Dir, wrapped.Stdout, wrapped.Stderr = cmd.Env, cmd.Dir, cmd.Stdout, cmd.Stderr
	wrapped.ExtraFiles = []*os.File{r}
	return wrapped, w, nil
}

// attach plugs the namespace of the guest pid into the bridge, then tells
// the guest to go on (ready is closed either way: on failure without a
// byte, and the guest exits).
func (l *vmnetLease) attach(pid int, ready *os.File) error {
	defer ready.Close()
	// A previous run's pair can linger for a moment while its last guest
	// process dies; the name is this lease's, so it is stale.
	_ = exec.Command(l.ip, "link", "del", l.hostIf()).Run()
	steps := [][]string{
		{"link", "add", l.hostIf(), "type", "veth", "peer", "name", "eth0", "netns", strconv.Itoa(pid)},
		{"link", "set", l.hostIf(), "master", vmnetBridge, "up"},
	}
	if l.isolated {
		steps = append(steps, []string{"link", "set", "dev", l.hostIf(), "type", "bridge_slave", "isolated", "on"})
	}
	for _, args := range steps {
		if err := runIPCmd(l.ip, args...); err != nil {
			return fmt.Errorf("faketart: attaching the VM to %s: %w", vmnetBridge, err)
		}
	}
	_, err := ready.Write([]byte{'1'})
	return err
}

// fakeVMNetGuest is `tart __fake vmnet-guest <ip> <addr> <path> -- <argv…>`,
// the first process of a guest's network namespace.
func fakeVMNetGuest(args []string) int {
	if len(args) < 5 || args[3] != "--" {
		return 64
	}
	ip, addr, path, argv := args[0], args[1], args[2], args[4:]
	ready := os.NewFile(3, "ready")
	buf := make([]byte, 1)
	if n, _ := ready.Read(buf); n != 1 {
		fmt.Fprintln(os.Stderr, "faketart: the VM's network was not set up")
		return 1
	}
	ready.Close()
	for _, a := range [][]string{
		{"link", "set", "lo", "up"},
		{"addr", "add", addr + "/24", "dev", "eth0"},
		{"link", "set", "eth0", "up"},
		{"route", "add", "default", "via", vmnetGateway},
	} {
		if err := runIPCmd(ip, a...); err != nil {
			fmt.Fprintf(os.Stderr, "faketart: configuring the guest's network: %v\n", err)
			return 1
		}
	}
	err := syscall.Exec(path, argv, os.Environ())
	fmt.Fprintf(os.Stderr, "faketart: failed to start guest program %q: %v\n", path, err)
	return 1
}
