package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
)

// Tart's default network is Apple's vmnet "shared" mode: each VM gets an
// address on 192.168.64.0/24 and sees the host at the bridge's address,
// 192.168.64.1 — never at 127.0.0.1, which is the guest's own loopback.
// With FAKETART_NET=vmnet the fake reproduces that on Linux: every guest
// runs in its own network namespace, joined by a veth pair to a host bridge
// holding the gateway address. A controller listening on the host's
// loopback is then unreachable from the guest, as on a Mac.
const (
	vmnetBridge  = "fa-vmnet0"
	vmnetGateway = "192.168.64.1"
	vmnetNet     = "192.168.64."
)

// vmnetEnabled reports whether guests get their own network.
func vmnetEnabled() bool { return os.Getenv("FAKETART_NET") == "vmnet" }

// vmnetLease is a VM's address, held (fcntl lock on its lease file in the
// host-wide FAKETART_VMNET_DIR) for as long as `tart run` lives.
type vmnetLease struct {
	n        int
	file     *os.File
	ip       string // path of the ip(8) binary
	softnet  bool   // Softnet's rules are installed (applySoftnet)
	isolated bool   // the guest's bridge port is isolated (Softnet, vmnet's bridge isolation)
}

func (l *vmnetLease) addr() string { return vmnetNet + strconv.Itoa(l.n) }

// hostIf is the host end of the VM's veth pair (at most 15 bytes).
func (l *vmnetLease) hostIf() string { return "fa-vm" + strconv.Itoa(l.n) }

func vmnetDir() string {
	return envOr("FAKETART_VMNET_DIR", filepath.Join(os.TempDir(), "faketart-vmnet"))
}

// acquireVMNet takes the lowest free address and makes sure the bridge
// exists, under the lease directory's flock so concurrent runs (of any
// TART_HOME on this host) neither share an address nor race on the bridge.
func acquireVMNet(vmName string) (*vmnetLease, error) {
	ip, err := exec.LookPath("ip")
	if err != nil {
		return nil, fmt.Errorf("faketart: FAKETART_NET=vmnet needs ip(8) from iproute2 (apt-get install iproute2): %v", err)
	}
	dir := vmnetDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	dl, _, err := flockPath(dir, true)
	if err != nil {
		return nil, err
	}
	defer dl.Close()
	if err := ensureBridge(ip); err != nil {
		return nil, err
	}
	for n := 2; n < 255; n++ {
		p := filepath.Join(dir, strconv.Itoa(n)+".lease")
		if lockHolder(p) != 0 {
			continue
		}
		f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			return nil, err
		}
		if ok, err := tryLock(f); err != nil || !ok {
			f.Close()
			continue
		}
		_, _ = f.WriteString(vmName + "\n")
		return &vmnetLease{n: n, file: f, ip: ip}, nil
	}
	return nil, errors.New("faketart: no free address left on " + vmnetNet + "0/24")
}
