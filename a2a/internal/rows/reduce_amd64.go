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

// kernelFn is one vector loop's entry point.
type kernelFn = func(dst unsafe.Pointer, ys *unsafe.Pointer, ws *float32, k, n int, accumulate bool)

// isas are the instruction sets with vector loops, widest first: whether
// this CPU runs them, and their loop per combine type.
var isas = []struct {
	name  string
	width int
	have  bool
	loops map[a2a.DType]kernelFn
}{
	{"avx512", 16, haveAVX512, map[a2a.DType]kernelFn{a2a.BF16: combineBF16AVX512, a2a.FP16: combineFP16AVX512,
		a2a.FP32: combineFP32AVX512}},
	{"avx2", 8, haveAVX2, map[a2a.DType]kernelFn{a2a.BF16: combineBF16AVX2, a2a.FP16: combineFP16AVX2,
		a2a.FP32: combineFP32AVX2}},
}

// kernels returns every vector loop for ct this CPU runs, widest first.
func kernels(ct a2a.DType) []combineKernel {
	var ks []combineKernel
	for _, isa := range isas {
		if fn := isa.loops[ct]; isa.have && fn != nil {
			ks = append(ks, combineKernel{name: isa.name, width: isa.width, fn: fn})
		}
	}
	return ks
}
