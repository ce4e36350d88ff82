//go:build !linux

package main

import (
	"syscall"
	"time"
)

func statAtime(st *syscall.Stat_t) time.Time { return time.Unix(st.Atimespec.Unix()) }
