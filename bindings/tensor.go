package main

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/ferryrdma/ferry/a2a"
)

// tensor is a checked ferry_tensor: every element its shape and strides
// reach lies inside the nbytes the caller vouched for, so the views made
// from it never read or write past the caller's memory.
type tensor struct {
	name    string
	p       unsafe.Pointer
	dtype   C.int32_t
	esize   int
	ndim    int
	shape   []int64
	strides []int64 // elements, resolved (packed when the caller gave zeros)
	extent  int64   // bytes from p to one past the last element reached
}

var dtypeNames = map[C.int32_t]string{
	C.FERRY_DTYPE_FP8: "FP8", C.FERRY_DTYPE_BF16: "BF16", C.FERRY_DTYPE_FP16: "FP16", C.FERRY_DTYPE_FP32: "FP32",
	C.FERRY_DTYPE_INT32: "INT32", C.FERRY_DTYPE_UINT32: "UINT32", C.FERRY_DTYPE_UINT8: "UINT8",
}

func dtypeSize(d C.int32_t) int {
	switch d {
	case C.FERRY_DTYPE_FP8, C.FERRY_DTYPE_UINT8:
		return 1
	case C.FERRY_DTYPE_BF16, C.FERRY_DTYPE_FP16:
		return 2
	case C.FERRY_DTYPE_FP32, C.FERRY_DTYPE_INT32, C.FERRY_DTYPE_UINT32:
		return 4
	}
	return 0
}

// dispatchTypes lists the tensor dtypes a token of dispatch type t may
// have: its own, and UINT8 for FP8 (a framework without float8 passes a
// uint8 view).
func dispatchTypes(t a2a.DType) []C.int32_t {
	switch t {
	case a2a.FP8:
		return []C.int32_t{C.FERRY_DTYPE_FP8, C.FERRY_DTYPE_UINT8}
	default:
		return []C.int32_t{combineType(t)}
	}
}

// combineType is the FERRY_DTYPE_* of a2a type t.
func combineType(t a2a.DType) C.int32_t {
	switch t {
	case a2a.BF16:
		return C.FERRY_DTYPE_BF16
	case a2a.FP16:
		return C.FERRY_DTYPE_FP16
	case a2a.FP32:
		return C.FERRY_DTYPE_FP32
	case a2a.FP8:
		return C.FERRY_DTYPE_FP8
	}
	return 0
}

func typeList(ts []C.int32_t) string {
	s := ""
	for i, t := range ts {
		if i > 0 {
			s += " or "
		}
		s += dtypeNames[t]
	}
	return s
}

// tensorArg checks t, which must exist, hold host memory, have one of
// dtypes and ndim dimensions, and fit in its nbytes.
func (st *stager) tensorArg(op, name string, t *C.ferry_tensor, dtypes []C.int32_t, ndim int) (tensor, error) {
	v := tensor{name: name}
	if t == nil {
		return v, errInvalid(op, "%s: NULL", name)
	}
	if t.memory != C.FERRY_MEMORY_HOST && t.memory != C.FERRY_MEMORY_CUDA {
		return v, errInvalid(op, "%s: memory %d (FERRY_MEMORY_HOST or _CUDA)", name, int32(t.memory))
	}
	ok := false
	for _, d := range dtypes {
		ok = ok || t.dtype == d
	}
	if !ok {
		got := dtypeNames[t.dtype]
		if got == "" {
			got = fmt.Sprintf("%d", int32(t.dtype))
		}
		return v, errInvalid(op, "%s: dtype %s, want %s", name, got, typeList(dtypes))
	}
	if int(t.ndim) != ndim {
		return v, errInvalid(op, "%s: %d dimensions, want %d", name, int32(t.ndim), ndim)
	}
	v.p, v.dtype, v.esize, v.ndim = t.data, t.dtype, dtypeSize(t.dtype), ndim
	v.shape = make([]int64, ndim)
	v.strides = make([]int64, ndim)
	zero := true
	for i := 0; i < ndim; i++ {
		v.shape[i], v.strides[i] = int64(t.shape[i]), int64(t.strides[i])
		if v.shape[i] < 0 || v.shape[i] > 1<<40 {
			return v, errInvalid(op, "%s: shape %v", name, v.shape)
		}
		if v.strides[i] < 0 {
			return v, errInvalid(op, "%s: negative stride %d in dimension %d", name, v.strides[i], i)
		}
		zero = zero && v.strides[i] == 0
	}
	if zero {
		s := int64(1)
		for i := ndim - 1; i >= 0; i-- {
			v.strides[i] = s
			s *= max(v.shape[i], 1)
		}
	}
	elems := int64(0)
	empty := false
	for i := 0; i < ndim; i++ {
		if v.shape[i] == 0 {
			empty = true
		}
		if v.shape[i] > 1 && v.strides[i] == 0 {
			return v, errInvalid(op, "%s: stride 0 in dimension %d of size %d (broadcast views are not accepted)", name, i, v.shape[i])
		}
		elems += (v.shape[i] - 1) * v.strides[i]
	}
	if !empty {
		v.extent = (elems + 1) * int64(v.esize)
	}
	if v.extent > 0 && v.p == nil {
		return v, errInvalid(op, "%s: data NULL for shape %v", name, v.shape)
	}
	if uint64(v.extent) > uint64(t.nbytes) {
		return v, errInvalid(op, "%s: shape %v strides %v reach %d bytes, nbytes is %d", name, v.shape, v.strides,
			v.extent, uint64(t.nbytes))
	}
	if uintptr(v.p)%uintptr(v.esize) != 0 {
		return v, errInvalid(op, "%s: data %p not aligned to its %d-byte elements", name, v.p, v.esize)
	}
	if t.memory == C.FERRY_MEMORY_CUDA {
		if err := st.stage(op, &v, int(t.device)); err != nil {
			return v, err
		}
	}
	return v, nil
}

// rows checks a [n, width] tensor with unit inner stride.
func (v tensor) rows(width int64) error {
	if v.shape[v.ndim-1] != width {
		return errInvalid("a2a", "%s: %d columns, want %d", v.name, v.shape[v.ndim-1], width)
	}
	if width > 1 && v.strides[v.ndim-1] != 1 {
		return errInvalid("a2a", "%s: inner stride %d, want 1", v.name, v.strides[v.ndim-1])
	}
	return nil
}

// packed checks a [rows, cols] row-major tensor with no gaps.
func (v tensor) packed(rows, cols int64) error {
	if v.shape[0] != rows || v.shape[1] != cols {
		return errInvalid("a2a", "%s: shape %v, want [%d, %d]", v.name, v.shape, rows, cols)
	}
	if (rows > 1 && v.strides[0] != cols) || (cols > 1 && v.strides[1] != 1) {
		return errInvalid("a2a", "%s: strides %v, want packed [%d, 1]", v.name, v.strides, cols)
	}
	return nil
}

// rowStride is the stride, in elements, between consecutive rows of a
// matrix or of a batched [L, B, width] tensor taken as L*B rows.
func (v tensor) rowStride() int { return int(v.strides[v.ndim-2]) }

func (v tensor) bytes() []byte {
	if v.extent == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(v.p), int(v.extent))
}

func (v tensor) floats() []float32 {
	if v.extent == 0 {
		return nil
	}
	return unsafe.Slice((*float32)(v.p), int(v.extent/4))
}

// expertRows checks a tensor in the layout of the dispatch output: flat
// [R, width] with R >= OutputRows, or, in the batched layout, [L, B,
// width] whose L*B rows are evenly spaced.
func (st *stager) expertRows(op, name string, t *C.ferry_tensor, dtypes []C.int32_t, l *a2a.Layout, width int64, scales bool) (tensor, error) {
	if l.MaxTokensPerExpert == 0 {
		v, err := st.tensorArg(op, name, t, dtypes, 2)
		if err != nil {
			return v, err
		}
		if v.shape[0] < int64(l.OutputRows) {
			return v, errInvalid(op, "%s: %d rows, need %d (ferry_a2a_info.output_rows)", name, v.shape[0], l.OutputRows)
		}
		return v, v.innerOK(width, scales)
	}
	v, err := st.tensorArg(op, name, t, dtypes, 3)
	if err != nil {
		return v, err
	}
	L, B := int64(l.LocalExperts), int64(l.MaxTokensPerExpert)
	if v.shape[0] != L || v.shape[1] != B {
		return v, errInvalid(op, "%s: shape %v, want [%d, %d, %d] (local experts, max_tokens_per_expert, columns)",
			name, v.shape, L, B, width)
	}
	if L > 1 && v.strides[0] != B*v.strides[1] {
		return v, errInvalid(op, "%s: strides %v: experts must be %d rows apart", name, v.strides, B)
	}
	return v, v.innerOK(width, scales)
}

// innerOK checks the last dimension: width columns, with unit stride
// for token rows (moved as contiguous bytes); scales may have any.
func (v tensor) innerOK(width int64, scales bool) error {
	if v.shape[v.ndim-1] != width {
		return errInvalid("a2a", "%s: %d columns, want %d", v.name, v.shape[v.ndim-1], width)
	}
	if scales {
		return nil
	}
	return v.rows(width)
}

// scaleArg checks the [rows, Hs] float32 scales of a dispatch input:
// required when the context has scales, refused otherwise.
func (st *stager) scaleArg(op, name string, t *C.ferry_tensor, l *a2a.Layout, rows int64, s *[]float32, ts, es *int) error {
	if l.Scales == 0 {
		if t != nil {
			return errInvalid(op, "%s: given, but hidden_scales is 0", name)
		}
		return nil
	}
	v, err := st.tensorArg(op, name, t, []C.int32_t{C.FERRY_DTYPE_FP32}, 2)
	if err != nil {
		return err
	}
	if v.shape[0] != rows || v.shape[1] != int64(l.Scales) {
		return errInvalid(op, "%s: shape %v, want [%d, %d]", name, v.shape, rows, l.Scales)
	}
	*s, *ts, *es = v.floats(), int(v.strides[0]), int(v.strides[1])
	if rows > 0 && (*ts == 0 || *es == 0) {
		// a2a reads 0 as "packed": a real stride 0 means a broadcast.
		*ts, *es = max(*ts, l.Scales), max(*es, 1)
	}
	return nil
}

// boundArg reads the int32 token count behind bound_m.
func (st *stager) boundArg(op string, t *C.ferry_tensor) (int32, error) {
	if t == nil {
		return 0, errInvalid(op, "bound_m: NULL")
	}
	if t.ndim != 0 && t.ndim != 1 {
		return 0, errInvalid(op, "bound_m: %d dimensions, want a scalar ([] or [1])", int32(t.ndim))
	}
	v, err := st.tensorArg(op, "bound_m", t, []C.int32_t{C.FERRY_DTYPE_INT32}, int(t.ndim))
	if err != nil {
		return 0, err
	}
	if v.ndim == 1 && v.shape[0] != 1 {
		return 0, errInvalid(op, "bound_m: shape %v, want [] or [1]", v.shape)
	}
	return *(*int32)(v.p), nil
}
