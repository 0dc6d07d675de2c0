package ipc

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"os"
	"strings"
	"sync"

	"github.com/ferryrdma/ferry/fabric/rdma"
)

// An endpoint address names the domain's listening socket in the abstract
// unix namespace (nothing in the file system to leak), and the host it
// lives on, so an address carried to another machine is refused with a
// clear error instead of a confusing "connection refused".
//
// Raw form (22 bytes): 'I', version, host id (u64), pid (u32), nonce
// (u64), little-endian. The nonce is random: a reused pid never reaches a
// stranger's endpoint, and nobody can guess a live endpoint's name.
const (
	addrMagic   = 'I'
	addrVersion = 1
	addrLen     = 22
)

type endpointAddr struct {
	host  uint64
	pid   uint32
	nonce uint64
}

func (a endpointAddr) raw() []byte {
	b := make([]byte, 0, addrLen)
	b = append(b, addrMagic, addrVersion)
	b = binary.LittleEndian.AppendUint64(b, a.host)
	b = binary.LittleEndian.AppendUint32(b, a.pid)
	return binary.LittleEndian.AppendUint64(b, a.nonce)
}

// socketName is the abstract socket name (Go's net package spells the
// abstract namespace with a leading '@').
func (a endpointAddr) socketName() string {
	return fmt.Sprintf("@ferry-ipc-%d-%016x", a.pid, a.nonce)
}

func (a endpointAddr) String() string { return fmt.Sprintf("ipc:pid %d/%016x", a.pid, a.nonce) }

func parseAddr(addr rdma.Address) (endpointAddr, error) {
	b := []byte(addr.RawString())
	if len(b) != addrLen || b[0] != addrMagic {
		return endpointAddr{}, fmt.Errorf("ipc: %d-byte address %s is not an ipc endpoint: %w", len(b), addr, rdma.ErrInvalidArgument)
	}
	if b[1] != addrVersion {
		return endpointAddr{}, fmt.Errorf("ipc: address version %d (this build speaks %d): %w", b[1], addrVersion, rdma.ErrInvalidArgument)
	}
	return endpointAddr{
		host:  binary.LittleEndian.Uint64(b[2:]),
		pid:   binary.LittleEndian.Uint32(b[10:]),
		nonce: binary.LittleEndian.Uint64(b[14:]),
	}, nil
}

func newEndpointAddr() endpointAddr {
	var n [8]byte
	_, _ = rand.Read(n[:]) // crypto/rand never fails on Linux
	return endpointAddr{host: hostID(), pid: uint32(os.Getpid()), nonce: binary.LittleEndian.Uint64(n[:])}
}

var hostIDOnce = sync.OnceValue(func() uint64 {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return 0 // unknown: addresses are then not checked for their host
	}
	h := fnv.New64a()
	h.Write([]byte(strings.TrimSpace(string(b))))
	return h.Sum64() | 1
})

// hostID identifies this boot of this machine (0 when unknown).
func hostID() uint64 { return hostIDOnce() }
