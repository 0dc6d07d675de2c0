package main

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"

	"github.com/ferryrdma/ferry/cuda"
	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/fabric/gpu"
)

// GPU memory: the C face of fabric/gpu.RegisterReport. The engine needs a
// group for the memory's GPU, which ferry_config.gpus asks for.

//export ferry_register_gpu
func ferry_register_gpu(h C.ferry_engine_t, ptr C.uint64_t, n C.uint64_t, access C.int32_t, out *C.ferry_region_t,
	path *C.int32_t) (rc C.int) {
	defer guard(&rc)
	const op = "register gpu"
	o, err := engineOf(h)
	if err != nil {
		return fail(err)
	}
	if out == nil {
		return fail(errInvalid(op, "out: nil"))
	}
	acc, err := accessOf(op, access)
	if err != nil {
		return fail(err)
	}
	reg, err := gpu.RegisterReport(o.e, uintptr(ptr), uint64(n), acc, gpu.RegisterOptions{})
	if err != nil {
		return fail(err)
	}
	rh := handles.add(&regionObj{eng: o, r: reg.Region})
	if !o.adopt(rh) {
		handles.remove(rh)
		return fail(fmt.Errorf("%s: %w", op, fabric.ErrClosed))
	}
	if path != nil {
		*path = C.FERRY_GPU_PATH_PEER_MEMORY
		if reg.Path == gpu.PathDmabuf {
			*path = C.FERRY_GPU_PATH_DMABUF
		}
	}
	*out = C.ferry_region_t(rh)
	return C.int(codeOK)
}

//export ferry_gpu_dmabuf_supported
func ferry_gpu_dmabuf_supported(ord C.int32_t) (rc C.int) {
	defer guard(&rc)
	if ord < 0 {
		return fail(errInvalid("gpu dmabuf supported", "ordinal %d", int32(ord)))
	}
	return result(gpu.DmabufAvailable(int(ord)))
}

// firstNICGroups builds FERRY_GPU_PLACE_FIRST_NICS groups: the host
// group, then each GPU's, every one with the transport's first nics
// NICs. The GPUs must exist (the driver is asked), so a wrong ordinal
// fails here rather than at the first registration.
func firstNICGroups(gpus []int, nics int) ([]fabric.GroupSpec, error) {
	n, err := cuda.DeviceCount()
	if err != nil {
		return nil, fmt.Errorf("engine open: gpus: %w", err)
	}
	groups := []fabric.GroupSpec{{Device: fabric.HostDevice, NICs: nics}}
	for _, g := range gpus {
		if g >= n {
			return nil, errInvalid("engine open", "gpus: ordinal %d, the driver sees %d GPU(s)", g, n)
		}
		groups = append(groups, fabric.GroupSpec{Device: fabric.CUDADevice(g), NICs: nics})
	}
	return groups, nil
}
