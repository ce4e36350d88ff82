//go:build !linux

package main

import (
	"os"
	"syscall"
	"time"
)

// accessTime is the last access time of path (Tart's contentAccessDate).
func accessTime(path string) time.Time {
	fi, err := os.Stat(path)
	if err != nil {
		return time.Time{}
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return time.Unix(st.Atimespec.Unix())
	}
	return fi.ModTime()
}
