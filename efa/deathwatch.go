//go:build cgo

package efa

import (
	"fmt"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/ferryrdma/ferry/fabric/rdma"
	"github.com/ferryrdma/ferry/internal/ofi"
)

// Dead shm peers are checked before each post batch. libfabric's shm
// says nothing when a peer process dies, and 1.17 can spin for ever inside
// a post to a peer that died holding its region lock; the engine's own
// checks (CheckPeer) run only every LivenessInterval and on error
// completions without a context. So each shm domain holds a pidfd for
// every peer whose ferry name carries its pid, watched by one goroutine
// blocked in epoll_wait: when one becomes readable (the process exited)
// the goroutine notes the peer and bumps a counter. PostWrites and
// PostSends compare that counter with the last value they acted on, one
// atomic load per batch and nothing per op; when it moved they confirm the
// death with shmPeerGone (pid gone and region lock free, so a pid reused by
// another process, or a peer in another pid namespace, is never taken for
// dead), and from then on refuse ops to that peer before calling into
// libfabric, with an error wrapping rdma.ErrPeerLost for the first of them.

type deathWatch struct {
	epfd, wakefd int
	events       atomic.Uint32 // exits the watcher saw
	seen         uint32        // events acted on (the domain's goroutine)
	done         chan struct{}

	mu     sync.Mutex
	byFD   map[int32]rdma.PeerID // pidfds being watched (mu)
	exited []rdma.PeerID         // exits not yet confirmed (mu)

	gone map[rdma.PeerID]string // confirmed dead, and why (the domain's goroutine)
}

// watchPeerDeath starts watching the process of shm peer id, named name.
// Peers whose name carries no pid, or whose pid cannot be opened, are left
// to the engine's periodic checks.
func (d *Domain) watchPeerDeath(id rdma.PeerID, name string) {
	if d.provName != "shm" || !validShmName(name) {
		return
	}
	pid, ok := shmNamePID(name)
	if !ok {
		return
	}
	if d.watch == nil {
		w, err := newDeathWatch()
		if err != nil {
			return
		}
		d.watch = w
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return
	}
	w := d.watch
	w.mu.Lock()
	w.byFD[int32(fd)] = id
	w.mu.Unlock()
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}
	if unix.EpollCtl(w.epfd, unix.EPOLL_CTL_ADD, fd, &ev) != nil {
		w.mu.Lock()
		delete(w.byFD, int32(fd))
		w.mu.Unlock()
		_ = unix.Close(fd)
	}
}

func newDeathWatch() (*deathWatch, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	wakefd, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		_ = unix.Close(epfd)
		return nil, err
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(wakefd)}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, wakefd, &ev); err != nil {
		_ = unix.Close(epfd)
		_ = unix.Close(wakefd)
		return nil, err
	}
	w := &deathWatch{epfd: epfd, wakefd: wakefd, done: make(chan struct{}),
		byFD: make(map[int32]rdma.PeerID), gone: make(map[rdma.PeerID]string)}
	go w.run()
	return w, nil
}

// run waits for peer processes to exit until stop wakes it.
func (w *deathWatch) run() {
	defer close(w.done)
	evs := make([]unix.EpollEvent, 16)
	for {
		n, err := unix.EpollWait(w.epfd, evs, -1)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return
		}
		for _, ev := range evs[:n] {
			if int(ev.Fd) == w.wakefd {
				return
			}
			// Readable once, for good: stop watching it.
			_ = unix.EpollCtl(w.epfd, unix.EPOLL_CTL_DEL, int(ev.Fd), nil)
			w.mu.Lock()
			if id, ok := w.byFD[ev.Fd]; ok {
				delete(w.byFD, ev.Fd)
				w.exited = append(w.exited, id)
				_ = unix.Close(int(ev.Fd))
			}
			w.mu.Unlock()
			w.events.Add(1)
		}
	}
}

// stop ends the watcher and closes its descriptors.
func (w *deathWatch) stop() {
	var one = [8]byte{1}
	_, _ = unix.Write(w.wakefd, one[:])
	<-w.done
	w.mu.Lock()
	for fd := range w.byFD {
		_ = unix.Close(int(fd))
	}
	clear(w.byFD)
	w.mu.Unlock()
	_ = unix.Close(w.epfd)
	_ = unix.Close(w.wakefd)
}

// stopDeathWatch ends the domain's watcher, if it has one.
func (d *Domain) stopDeathWatch() {
	if d.watch != nil {
		d.watch.stop()
		d.watch = nil
	}
}

// confirmDeaths turns the exits the watcher saw into confirmed deaths.
func (d *Domain) confirmDeaths() {
	w := d.watch
	w.seen = w.events.Load()
	w.mu.Lock()
	exited := w.exited
	w.exited = nil
	w.mu.Unlock()
	for _, id := range exited {
		if why := shmPeerGone(shmDir, d.names[id]); why != "" {
			w.gone[id] = why
		}
	}
}

// anyDead reports whether some peer of this domain is known dead, first
// confirming the exits the watcher saw since the last batch. Called once
// per batch: while no peer has died it costs one atomic load.
func (d *Domain) anyDead() bool {
	w := d.watch
	if w == nil {
		return false
	}
	if w.events.Load() != w.seen {
		d.confirmDeaths()
	}
	return len(w.gone) > 0
}

// firstDeadWrite returns the index of the first op to a peer known dead,
// or len(ops).
func (d *Domain) firstDeadWrite(ops []rdma.WriteOp) int {
	if d.anyDead() {
		for i := range ops {
			if _, dead := d.watch.gone[ops[i].Peer]; dead {
				return i
			}
		}
	}
	return len(ops)
}

// firstDeadSend is firstDeadWrite for sends.
func (d *Domain) firstDeadSend(ops []rdma.SendOp) int {
	if d.anyDead() {
		for i := range ops {
			if _, dead := d.watch.gone[ops[i].Peer]; dead {
				return i
			}
		}
	}
	return len(ops)
}

// deadPeerError is the error for an op to a peer known dead: it was not
// posted.
func (d *Domain) deadPeerError(peer rdma.PeerID, op string) error {
	return &rdma.ProviderError{
		Provider: providerLabel(d.transport),
		Op:       op,
		Errno:    int(ofi.ECONNRESET),
		Msg:      fmt.Sprintf("shm peer %s: %s: not posted", d.names[peer], d.watch.gone[peer]),
		PeerLost: true,
	}
}
