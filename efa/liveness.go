//go:build cgo

package efa

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/ferryrdma/ferry/fabric/rdma"
	"github.com/ferryrdma/ferry/internal/ofi"
)

// Peer liveness on libfabric providers.
//
// shm: an endpoint is a region file in /dev/shm that its process maps. A
// peer that was SIGKILLed leaves the file behind, and shm gives no sign of
// it beyond an error completion without a context (libfabric 1.17), or
// posts that hang on the dead peer's full queue. ferry's shm endpoints
// hold a shared flock on their own region file for as long as they are
// open; the kernel drops it when the process dies, however it dies and in
// whatever pid namespace. A peer whose file can be locked exclusively and
// whose name's pid no longer exists is gone (both must agree, so a live
// process that holds no lock, or one in another pid namespace, is never
// taken for dead). A peer whose file is gone has closed its endpoint.
//
// tcp: the connection tells. A dead peer's connection is reset (error
// completions) and reconnecting is refused (posts refused until the
// connect timeout). For peers nothing is sent to, the heartbeat is a
// zero-byte write without immediate into a small region every ferry tcp
// endpoint registers under the same fixed key (probeKey). The key must be
// valid: tcp;ofi_rxm's target answers a write with an unknown key by
// tearing the connection down, cancelling the writes it was sending the
// other way (seen as ECANCELED with provider errno ENOENT).

var (
	_ rdma.PeerChecker = (*Domain)(nil)
	_ rdma.PeerProber  = (*Domain)(nil)
)

const shmDir = "/dev/shm/"

// CheckPeer tells, for shm peers with ferry's names, whether the peer's
// endpoint or process is gone. Other providers and names give nil.
func (d *Domain) CheckPeer(p rdma.PeerID) error {
	if d.provName != "shm" {
		return d.recheckIncarnation(p)
	}
	name, ok := d.names[p]
	if !ok || !validShmName(name) {
		return nil
	}
	if why := shmPeerGone(shmDir, name); why != "" {
		if ferryShmName(name) {
			// Its name is never taken again (see ResolvePeer): stale.
			return fmt.Errorf("shm peer %s: %w", name, rdma.StaleError(d.addrOf(p), why))
		}
		return fmt.Errorf("shm peer %s: %s: %w", name, why, rdma.ErrPeerLost)
	}
	return nil
}

// ferryShmName reports whether name is one of ferry's shm endpoint names,
// which hold the pid and a per-process nonce (see Open).
func ferryShmName(name string) bool {
	_, ok := shmNamePID(name)
	return ok && validShmName(name)
}

// addrOf returns the address p was resolved from.
func (d *Domain) addrOf(p rdma.PeerID) rdma.Address {
	for a, id := range d.peers {
		if id == p {
			return a
		}
	}
	return rdma.Address{}
}

// ProbeOp gives tcp peers their heartbeat: a zero-byte write into the
// peer's probe region, completed only once the peer has processed it
// (FI_DELIVERY_COMPLETE), so that a peer behind a link that went down
// leaves it unanswered.
func (d *Domain) ProbeOp(p rdma.PeerID) (rdma.WriteOp, bool) {
	if d.probeMR == nil {
		return rdma.WriteOp{}, false
	}
	return rdma.WriteOp{Peer: p, Local: uint64(addrOfProbe(d.probeBuf)), LocalDesc: d.probeMR.Desc, RemoteKey: probeKey,
		Flags: rdma.WriteDelivered}, true
}

// probeKey is the requested key of every ferry tcp endpoint's probe
// region; the keys of the engine's regions count up from 1 and never
// reach it.
const probeKey = 0xfe77_0000_0000_0001

// openProbeRegion registers the region heartbeats write into, on
// providers whose keys are requested (not chosen by the provider) and
// that get heartbeats (tcp).
func (d *Domain) openProbeRegion() error {
	if !strings.HasPrefix(d.provName, "tcp") || d.mrMode&ofi.MRProvKey != 0 {
		return nil
	}
	b, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return fmt.Errorf("probe region: mmap: %w", err)
	}
	mr, err := d.ep.RegMR(ofi.MRSpec{Addr: uint64(addrOfProbe(b)), Len: uint64(len(b)), DmabufFD: -1,
		Access:       ofi.AccessSend | ofi.AccessRecv | ofi.AccessRead | ofi.AccessWrite | ofi.AccessRemoteWrite | ofi.AccessRemoteRead,
		RequestedKey: probeKey})
	if err != nil {
		_ = unix.Munmap(b)
		return callError(d.transport, "fi_mr_regattr(probe region)", err)
	}
	d.probeBuf, d.probeMR = b, mr
	return nil
}

// closeProbeRegion releases it; called before the endpoint closes.
func (d *Domain) closeProbeRegion() error {
	if d.probeMR == nil {
		return nil
	}
	err := d.probeMR.Close()
	_ = unix.Munmap(d.probeBuf)
	d.probeBuf, d.probeMR = nil, nil
	if err != nil {
		return callError(d.transport, "fi_close(probe region)", err)
	}
	return nil
}

func addrOfProbe(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

// validShmName accepts what an shm region file name can be.
func validShmName(n string) bool {
	return n != "" && !strings.ContainsAny(n, "/") && n != "." && n != ".."
}

// shmPeerGone says why the endpoint named name (its region file in dir)
// is gone, or "".
func shmPeerGone(dir, name string) string {
	f, err := os.Open(dir + name)
	if errors.Is(err, os.ErrNotExist) {
		return "its region file is gone (endpoint closed)"
	}
	if err != nil {
		return ""
	}
	defer f.Close()
	pid, ok := shmNamePID(name)
	if !ok || !pidGone(pid) {
		return ""
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return "" // someone holds its lock: alive
	}
	_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
	return fmt.Sprintf("process %d has exited", pid)
}

// shmNamePID reads the pid out of a ferry shm endpoint name,
// "ferry-<pid>-<nonce>-<instance>-<seq>".
func shmNamePID(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, "ferry-")
	if !ok {
		return 0, false
	}
	p, _, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, false
	}
	pid, err := strconv.Atoi(p)
	return pid, err == nil && pid > 0
}

// pidGone reports whether no process pid exists in this pid namespace, or
// only its zombie (it has exited and waits for its parent to reap it).
func pidGone(pid int) bool {
	if errors.Is(unix.Kill(pid, 0), unix.ESRCH) {
		return true
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// "pid (comm) S ...": the state follows the last ')'.
	if i := strings.LastIndexByte(string(b), ')'); i >= 0 && i+2 < len(b) {
		return b[i+2] == 'Z' || b[i+2] == 'X'
	}
	return false
}

// lockShmRegion takes the shared lock that tells peers this endpoint is
// alive; Close releases it.
func (d *Domain) lockShmRegion() {
	f, err := os.Open(shmDir + d.shmName)
	if err != nil {
		return // no file to lock: peers fall back to the pid
	}
	if unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB) != nil {
		f.Close()
		return
	}
	d.shmLock = f
}

func (d *Domain) unlockShmRegion() {
	if d.shmLock != nil {
		d.shmLock.Close()
		d.shmLock = nil
	}
}

var reapOnce sync.Once

// reapShmFiles removes, once per process and before its first shm
// endpoint opens, the region files of ferry shm endpoints whose process
// exited without closing them (SIGKILL, os.Exit): libfabric leaves them,
// 16 MiB each, for ever.
func reapShmFiles() { reapOnce.Do(func() { reapDeadShm(shmDir) }) }

// reapDeadShm removes the ferry-* region files in dir whose pid is gone and
// whose lock nobody holds, and returns their names.
func reapDeadShm(dir string) []string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var removed []string
	for _, e := range ents {
		name := e.Name()
		if !e.Type().IsRegular() || !strings.HasPrefix(name, "ferry-") {
			continue
		}
		if shmPeerGone(dir, name) != "" && os.Remove(dir+name) == nil {
			removed = append(removed, name)
		}
	}
	return removed
}
