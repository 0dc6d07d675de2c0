package fabricbench

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/ferryrdma/ferry/fabric"
)

// Deterministic data: both sides derive the page indices and the bytes of
// every verified page from a seed, so nothing but the seed crosses the
// control channel and the target can check each page on its own.

// rng is xorshift64: tiny, fast, and identical on both sides.
type rng uint64

func newRNG(seed uint64) rng {
	// A zero state would stay zero; mix the seed so nearby seeds diverge.
	s := seed*0x9E3779B97F4A7C15 + 0x2545F4914F6CDD1D
	if s == 0 {
		s = 1
	}
	return rng(s)
}

func (r *rng) next() uint64 {
	x := uint64(*r)
	x ^= x << 13
	x ^= x >> 7
	x ^= x << 17
	*r = rng(x)
	return x
}

// Layout is where the pages of a case sit in a buffer of Span bytes.
type Layout struct {
	Stride  uint64
	Indices []uint32 // nil for single and imm
}

// NewLayout computes the layout of c in a span-byte buffer. Page indices
// are random (seeded) and distinct while the buffer has room for them,
// then drawn with repeats, as in the reference tool where 64 KiB x 10000
// pages do not fit 256 MiB.
func NewLayout(c Case, seed, span uint64) (Layout, error) {
	switch c.Workload {
	case Imm:
		return Layout{}, nil
	case Single:
		if span < Offset || c.Bytes > span-Offset {
			return Layout{}, fmt.Errorf("single write of %d bytes at %d outside %d bytes: %w", c.Bytes, Offset, span, errBadCase)
		}
		return Layout{}, nil
	}
	stride := c.Bytes + PageGap
	if span < Offset+c.Bytes {
		return Layout{}, fmt.Errorf("page of %d bytes outside %d bytes: %w", c.Bytes, span, errBadCase)
	}
	maxPages := (span - Offset - c.Bytes) / stride
	maxPages++ // the last page may end exactly at the end of the span
	if maxPages > 1<<32-1 {
		maxPages = 1<<32 - 1
	}
	r := newRNG(seed ^ uint64(c.Pages)<<32 ^ c.Bytes)
	idx := make([]uint32, c.Pages)
	if uint64(c.Pages) <= maxPages {
		// Partial Fisher-Yates over a sparse permutation: distinct pages
		// without an array as large as the buffer's page count.
		swapped := make(map[uint64]uint64, c.Pages)
		at := func(i uint64) uint64 {
			if v, ok := swapped[i]; ok {
				return v
			}
			return i
		}
		for i := range idx {
			j := uint64(i) + r.next()%(maxPages-uint64(i))
			vi, vj := at(uint64(i)), at(j)
			swapped[j] = vi
			idx[i] = uint32(vj)
		}
	} else {
		for i := range idx {
			idx[i] = uint32(r.next() % maxPages)
		}
	}
	return Layout{Stride: stride, Indices: idx}, nil
}

// pageOffset is where page i of the layout starts.
func (l Layout) pageOffset(i int) uint64 { return Offset + l.Stride*uint64(l.Indices[i]) }

// fill writes the bytes of page ordinal into p: a stream seeded by
// (seed<<4 | rank) and the ordinal, so every page and every writer differs.
func fill(p []byte, seed uint64, rank, ordinal int) {
	r := newRNG((seed<<4 | uint64(rank&15)) + uint64(ordinal)*0x100000001B3)
	var w [8]byte
	for len(p) >= 8 {
		binary.LittleEndian.PutUint64(p, r.next())
		p = p[8:]
	}
	if len(p) > 0 {
		binary.LittleEndian.PutUint64(w[:], r.next())
		copy(p, w[:])
	}
}

// lastOrdinals calls f once per distinct page index of l, with the last
// ordinal that uses it: where an index repeats (more pages than fit), every
// write of that index carries the last ordinal's bytes.
func lastOrdinals(l Layout, f func(ordinal int) error) error {
	seen := make(map[uint32]bool, len(l.Indices))
	for i := len(l.Indices) - 1; i >= 0; i-- {
		if seen[l.Indices[i]] {
			continue
		}
		seen[l.Indices[i]] = true
		if err := f(i); err != nil {
			return err
		}
	}
	return nil
}

// fillCase writes every source page of a checked case into buf.
func fillCase(buf []byte, c Case, l Layout, seed uint64, rank int) {
	if c.Workload == Single {
		fill(buf[Offset:Offset+c.Bytes], seed, rank, 0)
		return
	}
	_ = lastOrdinals(l, func(i int) error {
		o := l.pageOffset(i)
		fill(buf[o:o+c.Bytes], seed, rank, i)
		return nil
	})
}

// poisonCase overwrites the destination range of a case so stale bytes
// from earlier runs cannot pass the check.
func poisonCase(buf []byte, c Case, l Layout) {
	set := func(p []byte) {
		if len(p) == 0 {
			return
		}
		p[0] = 0xA5
		for n := 1; n < len(p); n *= 2 {
			copy(p[n:], p[:n]) // doubling: memmove speed
		}
	}
	if c.Workload == Single {
		set(buf[Offset : Offset+c.Bytes])
		return
	}
	_ = lastOrdinals(l, func(i int) error {
		o := l.pageOffset(i)
		set(buf[o : o+c.Bytes])
		return nil
	})
}

// checkCase compares every destination page of a checked case with what
// the writer of rank wrote (for a repeated index, the last ordinal's
// bytes). The error names the first bad page and byte.
func checkCase(buf []byte, c Case, l Layout, seed uint64, rank int) error {
	want := make([]byte, c.Bytes)
	cmp := func(got []byte, ordinal int, at uint64) error {
		fill(want, seed, rank, ordinal)
		if bytes.Equal(got, want) {
			return nil
		}
		k := 0
		for got[k] == want[k] {
			k++
		}
		return fmt.Errorf("%s %s: page %d at offset %d: byte %d is %#02x, want %#02x: %w",
			c.Workload, FormatBytes(c.Bytes), ordinal, at, k, got[k], want[k], ErrVerify)
	}
	if c.Workload == Single {
		return cmp(buf[Offset:Offset+c.Bytes], 0, Offset)
	}
	return lastOrdinals(l, func(i int) error {
		o := l.pageOffset(i)
		return cmp(buf[o:o+c.Bytes], i, o)
	})
}

// immsPerTransfer is how many immediates one transfer of a verified case
// delivers at a target of targetNICs written from nics: one per page, one
// per shard of a single write (empty shards carry theirs too), one for an
// immediate-only write.
func immsPerTransfer(c Case, nics, targetNICs int) int64 {
	s := fabric.ImmShape()
	switch c.Workload {
	case Paged:
		s = fabric.PagedShape(c.Pages)
	case Single:
		s = fabric.SingleShape(fabric.Sharded(0)) // as the writer routes it
	}
	return int64(fabric.ExpectedImms(s, nics, targetNICs))
}
