package main

import (
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
	"time"
)

// Tart's automatic pruning (Sources/tart/Commands/Prune.swift,
// reclaimIfNeeded and reclaimIfPossible): after a clone, and before a pull
// that knows the image's size, Tart frees the space the new VM may need by
// deleting OCI cache images (and IPSWs, which the fake does not keep),
// least recently accessed first, sparing only the image the clone came
// from. A local template's base image is not spared. Setting
// TART_NO_AUTO_PRUNE (to any value, even empty) turns it off.

// reclaimIfNeeded is Prune.reclaimIfNeeded: required bytes against the free
// space of TART_HOME's volume (FAKETART_FREE_BYTES, else the real volume's).
// initiator is the directory the clone came from ("" for a pull).
func (a *app) reclaimIfNeeded(required uint64, initiator string) error {
	if _, ok := os.LookupEnv("TART_NO_AUTO_PRUNE"); ok {
		return nil
	}
	free, err := a.home.freeBytes()
	if err != nil {
		return genericErr("%v", err)
	}
	if free <= 0 || required < free {
		return nil
	}
	return a.reclaimIfPossible(required-free, initiator)
}

// freeBytes is the volume's available capacity: FAKETART_FREE_BYTES, else
// statfs of TART_HOME (Tart asks the volume of its cache directory).
func (h *tartHome) freeBytes() (uint64, error) {
	if s := os.Getenv("FAKETART_FREE_BYTES"); s != "" {
		return strconv.ParseUint(s, 10, 64)
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(h.dir, &st); err != nil {
		return 0, err
	}
	return uint64(st.Bavail) * uint64(st.Bsize), nil //nolint:unconvert // Bsize is uint32 on darwin
}

// reclaimIfPossible is Prune.reclaimIfPossible: nothing when the whole
// cache is smaller than what is needed, else delete images, oldest access
// first, until more than reclaim bytes are freed.
func (a *app) reclaimIfPossible(reclaim uint64, initiator string) error {
	type prunable struct {
		path      string
		allocated int64
		access    time.Time
	}
	var ps []prunable
	var used int64
	for _, e := range a.home.listOCI() {
		if fi, err := os.Lstat(e.dir.path); err != nil || fi.Mode()&os.ModeSymlink != 0 {
			continue // VMStorageOCI.prunables: the digest directories, not the tags
		}
		_, alloc := e.dir.sizes()
		ps = append(ps, prunable{path: e.dir.path, allocated: alloc, access: accessTime(e.dir.path)})
		used += alloc
	}
	if uint64(used) < reclaim {
		return nil
	}
	sort.SliceStable(ps, func(i, j int) bool { return ps[i].access.Before(ps[j].access) })
	if initiator != "" {
		if r, err := filepath.EvalSymlinks(initiator); err == nil {
			initiator = r
		}
	}
	var reclaimed int64
	for _, p := range ps {
		if uint64(reclaimed) > reclaim {
			break
		}
		if p.path == initiator {
			continue // do not prune the initiator
		}
		reclaimed += p.allocated
		if err := os.RemoveAll(p.path); err != nil {
			return genericErr("%v", err)
		}
	}
	return nil
}

// accessTime is the last access time of path (Tart's contentAccessDate).
func accessTime(path string) time.Time {
	fi, err := os.Stat(path)
	if err != nil {
		return time.Time{}
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return statAtime(st)
	}
	return fi.ModTime()
}
