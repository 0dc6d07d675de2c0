package ipc

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// A peer process that dies closes all its control connections, but each
// connection's reader learns of it when it is next scheduled: the
// endpoints of this process connected to the dead one (one per NIC of an
// engine) would otherwise be marked dead one by one, and for a while an
// engine would find one of them dead and the others alive. So the reader
// that first sees a connection end asks the kernel whether the process at
// the other end is exiting, and if so marks every outgoing connection of
// this process to it dead before its own: whoever learns from that
// connection that the peer is gone finds all its endpoints gone too.

// peerProcs holds this process's outgoing connections by the pid of the
// process at their other end (as this process's pid namespace numbers
// it). A connection leaves it when its reader ends, before its domain can
// finish closing, so what is found here may be signalled.
var peerProcs struct {
	mu sync.Mutex
	m  map[int][]*outPeer
}

func addPeerProcess(p *outPeer) {
	if p.pid <= 0 {
		return
	}
	peerProcs.mu.Lock()
	defer peerProcs.mu.Unlock()
	if peerProcs.m == nil {
		peerProcs.m = map[int][]*outPeer{}
	}
	peerProcs.m[p.pid] = append(peerProcs.m[p.pid], p)
}

func removePeerProcess(p *outPeer) {
	if p.pid <= 0 {
		return
	}
	peerProcs.mu.Lock()
	defer peerProcs.mu.Unlock()
	l := peerProcs.m[p.pid]
	for i, q := range l {
		if q == p {
			l[i] = l[len(l)-1]
			l[len(l)-1] = nil
			l = l[:len(l)-1]
			break
		}
	}
	if len(l) == 0 {
		delete(peerProcs.m, p.pid)
	} else {
		peerProcs.m[p.pid] = l
	}
}

// processEnded marks dead every outgoing connection of this process to
// the process pid, except skip, if that process has exited or is exiting.
// Called by a reader whose connection to pid ended.
func processEnded(pid int, skip *outPeer) bool {
	if pid <= 0 || !processExiting(pid) {
		return false
	}
	peerProcs.mu.Lock()
	defer peerProcs.mu.Unlock()
	for _, q := range peerProcs.m[pid] {
		if q != skip {
			q.processGone()
		}
	}
	return true
}

// pfExiting is the kernel's PF_EXITING task flag.
const pfExiting = 0x4

// processExiting reports whether the process pid has exited or is on its
// way out: no such process, a zombie, or its main thread marked exiting.
// The kernel marks a dying process's threads exiting before it closes the
// process's files, so a reader that saw a connection end because its
// process is dying always finds it so. A live process that closed its
// domain is not. A pid reused since can only make a process that has
// ended look alive, never the reverse.
func processExiting(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ESRCH) {
		return true
	}
	if err != nil {
		return false
	}
	// "pid (comm) state ppid pgrp session tty tpgid flags ...": comm may
	// hold anything, so the fields are counted from its closing ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 7 {
		return false
	}
	switch string(f[0]) {
	case "Z", "X", "x":
		return true
	}
	flags, err := strconv.ParseUint(string(f[6]), 10, 64)
	return err == nil && flags&pfExiting != 0
}
