package main

import (
	"unsafe"

	"github.com/ferryrdma/ferry/fabric"
)

// schedule is every trainer's writes for one update. It is computed once,
// from the model and the two shardings alone, identically on every rank:
// trainers know what to write, and inference ranks what they receive,
// with no negotiation per update.
type schedule struct {
	// Scatter[k] are trainer k's contiguous pieces, all in one scatter.
	Scatter [][]fabric.ScatterTarget
	// Paged[k] are trainer k's strided pieces: one paged write per tensor
	// and inference rank, one page per row.
	Paged [][]fabric.PagedWrite
	// Expect[i] is how many pieces one update writes to inference rank i:
	// one per scatter target, one per page.
	Expect []int
	// Bytes[k][i] is what trainer k writes to inference rank i.
	Bytes [][]int64
}

// plan builds the schedule. dst[i] is inference rank i's buffer.
func plan(ts []tensor, trainers int, dst []fabric.Descriptor) schedule {
	infer := len(dst)
	s := schedule{Scatter: make([][]fabric.ScatterTarget, trainers), Paged: make([][]fabric.PagedWrite, trainers),
		Expect: make([]int, infer), Bytes: make([][]int64, trainers)}
	maxRows := 0
	for _, t := range ts {
		maxRows = max(maxRows, t.Rows)
	}
	// Page i is row i on both sides; the index arrays are shared by every
	// paged write (the engine reads them, never changes them).
	rows := make([]uint32, maxRows)
	for i := range rows {
		rows[i] = uint32(i)
	}
	for k := range trainers {
		src := trainerLayout(ts, k, trainers)
		s.Bytes[k] = make([]int64, infer)
		for i := range infer {
			to := inferLayout(ts, i, infer)
			for x, t := range ts {
				r0, r1 := trainerRows(t, k, trainers)
				ir0, ir1, c0, c1 := inferBlock(t, i, infer)
				if t.Split == byCols {
					// Row r's columns [c0, c1) sit at c0 in the trainer's
					// full row and at the start of the inference rank's row.
					n, w := r1-r0, (c1-c0)*elem
					if n <= 0 || w == 0 {
						continue
					}
					s.Paged[k] = append(s.Paged[k], fabric.PagedWrite{
						SrcPages: rows[:n], SrcStride: uint64(t.rowBytes()), SrcOffset: uint64(src.Offset[x] + c0*elem),
						Dst: dst[i], DstPages: rows[:n], DstStride: uint64(w), DstOffset: uint64(to.Offset[x] + r0*w),
						Length: uint64(w),
					})
					s.Expect[i] += n
					s.Bytes[k][i] += int64(n * w)
					continue
				}
				// Rows (or the whole tensor): the overlap of the two row
				// blocks is one contiguous piece on both sides.
				o0, o1 := max(r0, ir0), min(r1, ir1)
				if o0 >= o1 {
					continue
				}
				rb := t.rowBytes()
				s.Scatter[k] = append(s.Scatter[k], fabric.ScatterTarget{
					Dst: dst[i], Length: uint64((o1 - o0) * rb),
					SrcOffset: uint64(src.Offset[x] + (o0-r0)*rb), DstOffset: uint64(to.Offset[x] + (o0-ir0)*rb),
				})
				s.Expect[i]++
				s.Bytes[k][i] += int64((o1 - o0) * rb)
			}
		}
	}
	return s
}

// The weights' values: element (r, c) of tensor x after update v. Each
// row starts from its own hash and steps by an odd constant, so a row
// written to the wrong place, a column slice shifted, or a stale version
// all show.
func rowBase(x, r, v int) uint16 {
	z := uint64(x)<<40 ^ uint64(r)<<16 ^ uint64(v) + 0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return uint16(z ^ z>>31)
}

const colStep = 40503

// fillRows writes rows [r0, r1) of tensor x, full width, at b.
func fillRows(b []byte, t tensor, x, r0, r1, v int) {
	w := elems(b)
	for r := r0; r < r1; r++ {
		row, base := w[(r-r0)*t.Cols:(r-r0+1)*t.Cols], rowBase(x, r, v)
		for c := range row {
			row[c] = base + uint16(c)*colStep
		}
	}
}

// checkBlock checks rows [r0, r1), columns [c0, c1) of tensor x at b and
// returns the first wrong (row, column), or ok.
func checkBlock(b []byte, x, r0, r1, c0, c1, v int) (row, col int, ok bool) {
	w, width := elems(b), c1-c0
	for r := r0; r < r1; r++ {
		base := rowBase(x, r, v)
		for j, e := range w[(r-r0)*width : (r-r0+1)*width] {
			if e != base+uint16(c0+j)*colStep {
				return r, c0 + j, false
			}
		}
	}
	return 0, 0, true
}

// elems views registered memory as bf16 words (as raw bits). Shards start
// 64-byte aligned and rows are whole elements.
func elems(b []byte) []uint16 {
	if len(b) < 2 {
		return nil
	}
	return unsafe.Slice((*uint16)(unsafe.Pointer(&b[0])), len(b)/2)
}
