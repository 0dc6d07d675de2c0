//go:build cgo

package efa_test

import (
	"fmt"
	"log"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/ferryrdma/ferry/efa"
	"github.com/ferryrdma/ferry/fabric/rdma"
)

// Example writes 4 KiB with an immediate between two endpoints of
// tcp;ofi_rxm on loopback. Registered memory must not be Go heap memory;
// this uses mmap. Both ends are polled: tcp moves data only then.
func Example() {
	opts := rdma.DomainOptions{Node: "127.0.0.1"}
	infos, err := efa.Domains("tcp;ofi_rxm", opts)
	if err != nil {
		log.Fatal(err) // wraps rdma.ErrNotSupported without libfabric tcp
	}
	var doms [2]*efa.Domain
	for i := range doms {
		opts.Instance = i
		if doms[i], err = efa.Open(infos[0], opts); err != nil {
			log.Fatal(err)
		}
		defer doms[i].Close()
	}
	src, _ := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	dst, _ := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	defer unix.Munmap(src)
	defer unix.Munmap(dst)
	copy(src, "hello over libfabric")
	sk, err := doms[0].RegisterMemory(rdma.MemorySpan{Addr: uintptr(unsafe.Pointer(&src[0])), Len: 4096, DmabufFD: -1}, rdma.AccessLocal)
	if err != nil {
		log.Fatal(err)
	}
	dk, err := doms[1].RegisterMemory(rdma.MemorySpan{Addr: uintptr(unsafe.Pointer(&dst[0])), Len: 4096, DmabufFD: -1}, rdma.AccessRemoteWrite)
	if err != nil {
		log.Fatal(err)
	}
	peer, err := doms[0].ResolvePeer(doms[1].Address())
	if err != nil {
		log.Fatal(err)
	}
	remote := uint64(0) // offset addressing...
	if dk.Mode == rdma.AddrVirtual {
		remote = uint64(uintptr(unsafe.Pointer(&dst[0]))) // ...or virtual
	}
	ops := []rdma.WriteOp{{
		Local: uint64(uintptr(unsafe.Pointer(&src[0]))), Length: 4096, LocalDesc: sk.Local,
		Remote: remote, RemoteKey: dk.Remote, Peer: peer, Context: 1,
		Imm: 42, Flags: rdma.WriteHasImm,
	}}
	evs := make([]rdma.Event, 16)
	for got := 0; got < 2; {
		if len(ops) > 0 {
			n, err := doms[0].PostWrites(ops)
			if err != nil {
				log.Fatal(err)
			}
			ops = ops[n:]
		}
		for _, d := range doms {
			n, err := d.Poll(evs)
			if err != nil {
				log.Fatal(err)
			}
			for _, ev := range evs[:n] {
				if ev.Errno != 0 {
					log.Fatal(d.DescribeError(ev))
				}
				if ev.Kind == rdma.EventImm {
					fmt.Printf("imm %d: %s\n", ev.Imm, dst[:20])
				}
				got++
			}
		}
	}
}
