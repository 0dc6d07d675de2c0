package main

import (
	"slices"
	"unsafe"
)

// Tensors are uint32 elements with wrapping arithmetic, so every result is
// exact and the client can compute what each op must produce (its shadow
// copy) and compare checksums. A sharded tensor is split by rows of k
// elements into equal shards, shard w on worker w.

const k = 8 // row width of the matmul: [rows, k] x [k, k]

func mix(z uint64) uint64 {
	z += 0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// fill writes elements [first, first+len(x)) of the tensor of seed.
func fill(x []uint32, seed uint64, first int) {
	for i := range x {
		x[i] = uint32(mix(seed ^ uint64(first+i)<<20))
	}
}

// checksum is a position-keyed sum: the checksums of a tensor's pieces
// (each with the index of its first element) add up to the whole's, so
// workers can checksum shards independently.
func checksum(x []uint32, first int) uint64 {
	var s uint64
	for i, v := range x {
		s += mix(uint64(first+i)<<32 | uint64(v))
	}
	return s
}

func add(c, a, b []uint32) {
	for i := range c {
		c[i] = a[i] + b[i]
	}
}

// matmul writes out = a x W(seed), a being rows of k elements.
func matmul(out, a []uint32, seed uint64) {
	var w [k * k]uint32
	fill(w[:], seed, 0)
	for r := 0; r+k <= len(a); r += k {
		row, o := a[r:r+k], out[r:r+k]
		for j := range k {
			var s uint32
			for i := range k {
				s += row[i] * w[i*k+j]
			}
			o[j] = s
		}
	}
}

// words views registered memory as elements (arena offsets are 64-byte
// aligned).
func words(b []byte) []uint32 {
	if len(b) < 4 {
		return nil
	}
	return unsafe.Slice((*uint32)(unsafe.Pointer(&b[0])), len(b)/4)
}

// arena is a first-fit allocator of one region, kept by the dispatcher:
// workers never allocate, they are told where things are.
type arena struct {
	size int
	used []span // sorted by offset
}

type span struct{ off, n int }

func (a *arena) alloc(n int) (int, bool) {
	n = (n + 63) &^ 63
	at := 0
	for i, s := range a.used {
		if s.off-at >= n {
			a.used = slices.Insert(a.used, i, span{at, n})
			return at, true
		}
		at = s.off + s.n
	}
	if a.size-at < n {
		return 0, false
	}
	a.used = append(a.used, span{at, n})
	return at, true
}

func (a *arena) free(off int) {
	for i, s := range a.used {
		if s.off == off {
			a.used = slices.Delete(a.used, i, i+1)
			return
		}
	}
}

// allocAll finds one offset free in every arena (a replicated tensor lives
// at the same offset on every worker, so one move command reaches all).
func allocAll(as []arena, n int) (int, bool) {
	n = (n + 63) &^ 63
	at := 0
	for {
		moved := false
		for i := range as {
			for _, s := range as[i].used {
				if s.off < at+n && at < s.off+s.n {
					at, moved = s.off+s.n, true
				}
			}
		}
		if at+n > as[0].size {
			return 0, false
		}
		if !moved {
			break
		}
	}
	for i := range as {
		as[i].used = append(as[i].used, span{at, n})
		slices.SortFunc(as[i].used, func(x, y span) int { return x.off - y.off })
	}
	return at, true
}
