//go:build cgo

package efa

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/ferryrdma/ferry/fabric/rdma"
	"github.com/ferryrdma/ferry/internal/ofi"
)

// maxRawBytes bounds the buffers RawBench maps on each side.
const maxRawBytes = 16 << 30

// RawBench measures the provider alone. It opens two endpoints of
// spec.Transport in this process (initiator and target), registers mmap'd
// buffers, and runs the iterations in one C loop (ferry_raw_loop in internal/ofi/raw.c) that
// posts every write, polls both completion queues whenever the provider is
// busy (tcp and shm only move data while the target polls) and waits for
// every write completion and, with Imm, every immediate at the target.
// After the last iteration it checks that every byte landed where it
// should. Bad specs wrap rdma.ErrInvalidArgument; a missing provider
// wraps rdma.ErrNotSupported.
func RawBench(spec RawSpec) (RawResult, error) {
	if err := checkRawSpec(spec); err != nil {
		return RawResult{}, err
	}
	infos, err := Domains(spec.Transport, rdma.DomainOptions{Node: spec.Node})
	if err != nil {
		return RawResult{}, err
	}
	var doms [2]*Domain
	for i := range doms {
		d, err := Open(infos[0], rdma.DomainOptions{Node: spec.Node, Instance: 1<<30 + i})
		if err != nil {
			return RawResult{}, err
		}
		defer d.Close()
		doms[i] = d
	}
	init, target := doms[0], doms[1]

	pages := max(spec.Pages, 1)
	span := uint64(pages) * spec.Size
	if spec.Offsets != nil {
		span = spec.Span
	}
	span = max(span, 4096)
	src, err := mapHost(span)
	if err != nil {
		return RawResult{}, err
	}
	defer unix.Munmap(src)
	dst, err := mapHost(span)
	if err != nil {
		return RawResult{}, err
	}
	defer unix.Munmap(dst)
	for i := range src {
		src[i] = byte(i*131 + i>>12)
	}
	sk, err := init.RegisterMemory(hostSpan(src), rdma.AccessLocal)
	if err != nil {
		return RawResult{}, err
	}
	dk, err := target.RegisterMemory(hostSpan(dst), rdma.AccessRemoteWrite)
	if err != nil {
		return RawResult{}, err
	}
	peer, err := init.ResolvePeer(target.Address())
	if err != nil {
		return RawResult{}, err
	}
	dstBase := uint64(0)
	if dk.Mode == rdma.AddrVirtual {
		dstBase = uint64(addrOfBytes(dst))
	}
	// Source and target offset of each write: the spec's, or consecutive
	// sources and a fixed permutation of targets (comparable runs).
	srcAt, dstAt := spec.Offsets, spec.Offsets
	if spec.Offsets == nil {
		srcAt, dstAt = make([]uint64, pages), make([]uint64, pages)
		perm := rand.New(rand.NewPCG(1, 2)).Perm(pages)
		if spec.Pages == 0 {
			perm = []int{0}
		}
		for i := range srcAt {
			srcAt[i], dstAt[i] = uint64(i)*spec.Size, uint64(perm[i])*spec.Size
		}
	}
	ops := make([]rdma.WriteOp, pages)
	for i := range ops {
		ops[i] = rdma.WriteOp{
			Local:     uint64(addrOfBytes(src)) + srcAt[i],
			Length:    spec.Size,
			LocalDesc: sk.Local,
			Remote:    dstBase + dstAt[i],
			RemoteKey: dk.Remote,
			Peer:      peer,
		}
		if spec.Imm {
			ops[i].Imm, ops[i].Flags = uint32(i), rdma.WriteHasImm
		}
	}
	// One immediate-only write, untimed, sets up the connection (tcp needs
	// tens of ms for its first op) and later flushes: on one connection it
	// lands after the writes before it.
	flush := []rdma.WriteOp{{Local: uint64(addrOfBytes(src)), LocalDesc: sk.Local,
		Remote: dstBase, RemoteKey: dk.Remote, Peer: peer, Flags: rdma.WriteHasImm}}
	timeout := spec.Timeout
	if timeout <= 0 {
		timeout = 60 * time.Second
	}
	if err := rawLoop(init, target, flush, 0, 1, timeout, nil); err != nil {
		return RawResult{}, fmt.Errorf("raw bench connect: %w", err)
	}
	lat := make([]int64, spec.Iters)
	if err := rawLoop(init, target, ops, spec.Iters, spec.Warmup, timeout, lat); err != nil {
		return RawResult{}, err
	}
	if !spec.Imm {
		if err := rawLoop(init, target, flush, 0, 1, timeout, nil); err != nil {
			return RawResult{}, fmt.Errorf("raw bench flush: %w", err)
		}
	}
	for i := range ops {
		s := src[srcAt[i] : srcAt[i]+spec.Size]
		d := dst[dstAt[i] : dstAt[i]+spec.Size]
		if !bytes.Equal(s, d) {
			return RawResult{}, fmt.Errorf("raw bench %s: write %d did not land intact at offset %d: %w",
				spec.Transport, i, dstAt[i], rdma.ErrProvider)
		}
	}
	res := RawResult{Provider: init.ProviderName(), Bytes: uint64(len(ops)) * spec.Size, Ops: len(ops),
		Latency: make([]time.Duration, len(lat))}
	for i, l := range lat {
		res.Latency[i] = time.Duration(l)
	}
	return res, nil
}

func rawLoop(init, target *Domain, ops []rdma.WriteOp, iters, warmup int, timeout time.Duration, lat []int64) error {
	phase, err := ofi.RawLoop(init.ep, target.ep, &ops[0], len(ops), iters, warmup, timeout, lat)
	if err != nil {
		return fmt.Errorf("raw bench iteration %d: %w", phase, callError(init.transport, "raw loop", err))
	}
	return nil
}

func checkRawSpec(s RawSpec) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("raw bench: "+format+": %w", append(args, rdma.ErrInvalidArgument)...)
	}
	switch {
	case s.Transport == "":
		return bad("no transport")
	case s.Size == 0 && !s.Imm:
		return bad("zero-byte writes need Imm")
	case s.Pages < 0 || s.Iters < 1 || s.Warmup < 0:
		return bad("pages %d, iters %d, warmup %d", s.Pages, s.Iters, s.Warmup)
	case s.Size > maxRawBytes || uint64(max(s.Pages, 1))*s.Size > maxRawBytes:
		return bad("%d pages of %d bytes exceed %d bytes", s.Pages, s.Size, maxRawBytes)
	case s.Offsets == nil:
		return nil
	case len(s.Offsets) != max(s.Pages, 1):
		return bad("%d offsets for %d pages", len(s.Offsets), max(s.Pages, 1))
	case s.Span > maxRawBytes:
		return bad("span of %d bytes exceeds %d bytes", s.Span, maxRawBytes)
	}
	for i, o := range s.Offsets {
		if o > s.Span || s.Size > s.Span-o {
			return bad("write %d at offset %d of %d bytes outside the %d-byte span", i, o, s.Size, s.Span)
		}
	}
	return nil
}

func mapHost(n uint64) ([]byte, error) {
	b, err := unix.Mmap(-1, 0, int(n), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("raw bench: mmap %d bytes: %v: %w", n, err, rdma.ErrInvalidArgument)
	}
	return b, nil
}

func hostSpan(b []byte) rdma.MemorySpan {
	return rdma.MemorySpan{Addr: addrOfBytes(b), Len: uint64(len(b)), DmabufFD: -1}
}

func addrOfBytes(b []byte) uintptr { return uintptr(unsafe.Pointer(&b[0])) }
