//go:build cgo && linux

package cudadrv

/*
#include <stdlib.h>
#include "cu_table.h"
*/
import "C"

import "unsafe"

func (d *cgoDriver) StreamCreate(c Context, flags uint32) (Stream, Result) {
	var s C.CUstream
	r := C.ferry_cuStreamCreate(ctx(c), &s, C.uint(flags))
	return Stream(s), res(r)
}

func (d *cgoDriver) StreamDestroy(c Context, s Stream) Result {
	return res(C.ferry_cuStreamDestroy(ctx(c), stream(s)))
}

func (d *cgoDriver) StreamSynchronize(c Context, s Stream) Result {
	return res(C.ferry_cuStreamSynchronize(ctx(c), stream(s)))
}

func (d *cgoDriver) StreamQuery(c Context, s Stream) Result {
	return res(C.ferry_cuStreamQuery(ctx(c), stream(s)))
}

func (d *cgoDriver) StreamBeginCapture(c Context, s Stream, mode int) Result {
	return res(C.ferry_cuStreamBeginCapture(ctx(c), stream(s), C.int(mode)))
}

func (d *cgoDriver) StreamEndCapture(c Context, s Stream) (Graph, Result) {
	var g C.CUgraph
	r := C.ferry_cuStreamEndCapture(ctx(c), stream(s), &g)
	return Graph(g), res(r)
}

func (d *cgoDriver) EventCreate(c Context, flags uint32) (Event, Result) {
	var e C.CUevent
	r := C.ferry_cuEventCreate(ctx(c), &e, C.uint(flags))
	return Event(e), res(r)
}

func (d *cgoDriver) EventDestroy(c Context, e Event) Result {
	return res(C.ferry_cuEventDestroy(ctx(c), event(e)))
}

func (d *cgoDriver) EventRecord(c Context, e Event, s Stream) Result {
	return res(C.ferry_cuEventRecord(ctx(c), event(e), stream(s)))
}

func (d *cgoDriver) EventQuery(c Context, e Event) Result {
	return res(C.ferry_cuEventQuery(ctx(c), event(e)))
}

func (d *cgoDriver) EventSynchronize(c Context, e Event) Result {
	return res(C.ferry_cuEventSynchronize(ctx(c), event(e)))
}

func (d *cgoDriver) EventElapsedTime(c Context, start, end Event) (float32, Result) {
	var ms C.float
	r := C.ferry_cuEventElapsedTime(ctx(c), &ms, event(start), event(end))
	return float32(ms), res(r)
}

// ModuleLoadData copies the image to C memory first: the driver reads it
// as a C buffer, and a cubin must not be handed over as Go memory that the
// driver might keep a reference to.
func (d *cgoDriver) ModuleLoadData(c Context, image []byte) (Module, Result) {
	if len(image) == 0 {
		return nil, ErrInvalidValue
	}
	buf := C.CBytes(append(image[:len(image):len(image)], 0))
	defer C.free(buf)
	var m C.CUmodule
	r := C.ferry_cuModuleLoadData(ctx(c), &m, buf)
	return Module(m), res(r)
}

func (d *cgoDriver) ModuleUnload(c Context, m Module) Result {
	return res(C.ferry_cuModuleUnload(ctx(c), C.CUmodule(m)))
}

func (d *cgoDriver) ModuleGetFunction(c Context, m Module, name string) (Function, Result) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var f C.CUfunction
	r := C.ferry_cuModuleGetFunction(ctx(c), &f, C.CUmodule(m), cname)
	return Function(f), res(r)
}

func fn(f Function) C.CUfunction { return C.CUfunction(f) }

func (d *cgoDriver) FuncGetAttribute(c Context, f Function, attr int) (int, Result) {
	var v C.int
	r := C.ferry_cuFuncGetAttribute(ctx(c), &v, C.int(attr), fn(f))
	return int(v), res(r)
}

func (d *cgoDriver) OccupancyMaxActiveBlocksPerMultiprocessor(c Context, f Function, blockSize int, smem uint64) (int, Result) {
	var n C.int
	r := C.ferry_cuOccupancyMaxActiveBlocksPerMultiprocessor(ctx(c), &n, fn(f), C.int(blockSize), C.size_t(smem))
	return int(n), res(r)
}

func (d *cgoDriver) FlushGPUDirectRDMAWrites(c Context, target, scope int) Result {
	return res(C.ferry_cuFlushGPUDirectRDMAWrites(ctx(c), C.int(target), C.int(scope)))
}

// LaunchKernel passes the packed arguments as Go memory for the duration
// of the call only; cuLaunchKernel copies them before returning (also while
// a stream is being captured into a graph).
func (d *cgoDriver) LaunchKernel(c Context, p *LaunchParams) Result {
	n := len(p.Offsets)
	if n > MaxKernelArgs {
		return ErrInvalidValue
	}
	var args *C.uchar
	var offs *C.uint
	if n > 0 {
		if len(p.Args) == 0 {
			return ErrInvalidValue
		}
		for _, o := range p.Offsets {
			if int(o) >= len(p.Args) {
				return ErrInvalidValue
			}
		}
		args = (*C.uchar)(unsafe.Pointer(&p.Args[0]))
		offs = (*C.uint)(unsafe.Pointer(&p.Offsets[0]))
	}
	coop := C.int(0)
	if p.Cooperative {
		coop = 1
	}
	return res(C.ferry_cuLaunch(ctx(c), fn(p.Func),
		C.uint(p.Grid.X), C.uint(p.Grid.Y), C.uint(p.Grid.Z),
		C.uint(p.Block.X), C.uint(p.Block.Y), C.uint(p.Block.Z),
		C.uint(p.SharedMem), stream(p.Stream), args, offs, C.int(n), coop))
}

func (d *cgoDriver) GraphInstantiate(c Context, g Graph) (GraphExec, Result) {
	var e C.CUgraphExec
	r := C.ferry_cuGraphInstantiate(ctx(c), &e, C.CUgraph(g))
	return GraphExec(e), res(r)
}

func (d *cgoDriver) GraphLaunch(c Context, g GraphExec, s Stream) Result {
	return res(C.ferry_cuGraphLaunch(ctx(c), C.CUgraphExec(g), stream(s)))
}

func (d *cgoDriver) GraphExecDestroy(c Context, g GraphExec) Result {
	return res(C.ferry_cuGraphExecDestroy(ctx(c), C.CUgraphExec(g)))
}

func (d *cgoDriver) GraphDestroy(c Context, g Graph) Result {
	return res(C.ferry_cuGraphDestroy(ctx(c), C.CUgraph(g)))
}
