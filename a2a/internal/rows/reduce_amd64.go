//go:build amd64 && !purego

package rows

import (
	"unsafe"

	"golang.org/x/sys/cpu"

	"github.com/ferryrdma/ferry/a2a"
)

// The vector loops (reduce_amd64.s). Each takes n elements of one token, n
// a multiple of its width (8 for AVX2, 16 for AVX-512).

//go:noescape
func combineBF16AVX2(dst unsafe.Pointer, ys *unsafe.Pointer, ws *float32, k, n int, accumulate bool)

//go:noescape
func combineFP16AVX2(dst unsafe.Pointer, ys *unsafe.Pointer, ws *float32, k, n int, accumulate bool)

//go:noescape
func combineFP32AVX2(dst unsafe.Pointer, ys *unsafe.Pointer, ws *float32, k, n int, accumulate bool)

//go:noescape
func combineBF16AVX512(dst unsafe.Pointer, ys *unsafe.Pointer, ws *float32, k, n int, accumulate bool)

//go:noescape
func combineFP16AVX512(dst unsafe.Pointer, ys *unsafe.Pointer, ws *float32, k, n int, accumulate bool)

//go:noescape
func combineFP32AVX512(dst unsafe.Pointer, ys *unsafe.Pointer, ws *float32, k, n int, accumulate bool)

// The AVX2 loops need F16C for fp16 (present on every AVX2 CPU in
// practice, checked anyway); the AVX-512 loops need only AVX512F. The OS
// must save the wide registers, which x/sys/cpu checks (XGETBV) before it
// reports either.
var (
	haveAVX2   = cpu.X86.HasAVX2 && cpu.X86.HasF16C
	haveAVX512 = cpu.X86.HasAVX512F
)

// kernels returns every vector loop for ct this CPU runs, widest first.
func kernels(ct a2a.DType) []combineKernel {
	var ks []combineKernel
	if haveAVX512 {
		fn := combineFP32AVX512
		switch ct {
		case a2a.BF16:
			fn = combineBF16AVX512
		case a2a.FP16:
			fn = combineFP16AVX512
		}
		ks = append(ks, combineKernel{name: "avx512", width: 16, fn: fn})
	}
	if haveAVX2 {
		fn := combineFP32AVX2
		switch ct {
		case a2a.BF16:
			fn = combineBF16AVX2
		case a2a.FP16:
			fn = combineFP16AVX2
		}
		ks = append(ks, combineKernel{name: "avx2", width: 8, fn: fn})
	}
	return ks
}
