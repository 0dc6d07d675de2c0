package ipc

import (
	"fmt"
	"sync"

	"golang.org/x/sys/unix"
)

// A segment is one mapping of a range of a peer's memory file, shared by
// every mapping (connection, key) of this process that covers the same
// range: the endpoints of a multi-NIC engine, or several engines writing
// into one region, fault its pages in once and hold one mapping. Each
// user holds a reference; the last release unmaps it. Files are told apart
// by the peer process that sent them, device and inode (unique among the
// files alive, and the segment keeps its file alive).
type segment struct {
	id   segmentID
	mem  []byte
	refs int // under segments.mu
}

type segmentID struct {
	host, pid    uint64
	dev, ino     uint64
	offset, size uint64
}

var segments struct {
	mu sync.Mutex
	m  map[segmentID]*segment
}

// mapSegment returns a reference to the mapping of [off, off+n) of the
// file fd that peer sent, mapping it if this process has none (see mapFile
// for need).
func mapSegment(peer endpointAddr, fd int, off, n, need uint64) (*segment, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("stat peer memory file: %w", err)
	}
	id := segmentID{host: peer.host, pid: uint64(peer.pid), dev: uint64(st.Dev), ino: st.Ino, offset: off, size: n}
	segments.mu.Lock()
	defer segments.mu.Unlock()
	if s := segments.m[id]; s != nil {
		s.refs++
		return s, nil
	}
	mem, err := mapFile(fd, off, n, need)
	if err != nil {
		return nil, err
	}
	if segments.m == nil {
		segments.m = map[segmentID]*segment{}
	}
	s := &segment{id: id, mem: mem, refs: 1}
	segments.m[id] = s
	return s, nil
}

// release drops a reference; the last one unmaps the segment.
func (s *segment) release() {
	segments.mu.Lock()
	defer segments.mu.Unlock()
	s.refs--
	if s.refs == 0 {
		delete(segments.m, s.id)
		unmap(s.mem)
		s.mem = nil
	}
}
