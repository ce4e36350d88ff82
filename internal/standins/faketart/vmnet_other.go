//go:build !linux

package main

import (
	"errors"
	"os"
	"os/exec"
)

var errNoVMNet = errors.New("faketart: FAKETART_NET=vmnet needs Linux network namespaces")

func ensureBridge(string) error { return errNoVMNet }

func (l *vmnetLease) wrap(*exec.Cmd) (*exec.Cmd, *os.File, error) { return nil, nil, errNoVMNet }

func (l *vmnetLease) attach(int, *os.File) error { return errNoVMNet }

func fakeVMNetGuest([]string) int { return 64 }

func removeSoftnet(int) {}

func applySoftnet(*vmnetLease, *softnetPolicy) error { return errNoVMNet }
