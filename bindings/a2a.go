package main

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/ferryrdma/ferry/fabric"
)

var errA2ANotYet = fmt.Errorf("a2a: not built yet: %w", fabric.ErrNotSupported)

//export ferry_a2a_create
func ferry_a2a_create(cfg *C.ferry_a2a_config, timeoutMS C.int64_t, out *C.ferry_a2a_t) (rc C.int) {
	defer guard(&rc)
	return fail(errA2ANotYet)
}

//export ferry_a2a_get_info
func ferry_a2a_get_info(h C.ferry_a2a_t, info *C.ferry_a2a_info) (rc C.int) {
	defer guard(&rc)
	return fail(errA2ANotYet)
}

//export ferry_a2a_dispatch
func ferry_a2a_dispatch(h C.ferry_a2a_t, outCounts, outX, outScales, x, scales, indices, weights, boundM *C.ferry_tensor,
	doSend, doRecv C.int32_t, stream C.uint64_t, timeoutMS C.int64_t) (rc C.int) {
	defer guard(&rc)
	return fail(errA2ANotYet)
}

//export ferry_a2a_combine
func ferry_a2a_combine(h C.ferry_a2a_t, out, indices, weights, y, boundM *C.ferry_tensor,
	doSend, doRecv, accumulate C.int32_t, stream C.uint64_t, timeoutMS C.int64_t) (rc C.int) {
	defer guard(&rc)
	return fail(errA2ANotYet)
}

//export ferry_a2a_dropped
func ferry_a2a_dropped(h C.ferry_a2a_t, dropped *C.int64_t, perExpert *C.int32_t, n C.size_t) (rc C.int) {
	defer guard(&rc)
	return fail(errA2ANotYet)
}

//export ferry_a2a_set_active
func ferry_a2a_set_active(h C.ferry_a2a_t, gen C.uint32_t, active *C.uint8_t, n C.size_t, timeoutMS C.int64_t) (rc C.int) {
	defer guard(&rc)
	return fail(errA2ANotYet)
}

//export ferry_a2a_close
func ferry_a2a_close(h C.ferry_a2a_t) (rc C.int) {
	defer guard(&rc)
	return fail(errA2ANotYet)
}

//export ferry_register_gpu
func ferry_register_gpu(h C.ferry_engine_t, ptr C.uint64_t, n C.uint64_t, access C.int32_t, out *C.ferry_region_t, path *C.int32_t) (rc C.int) {
	defer guard(&rc)
	return fail(errA2ANotYet)
}

//export ferry_gpu_dmabuf_supported
func ferry_gpu_dmabuf_supported(ord C.int32_t) (rc C.int) {
	defer guard(&rc)
	return fail(errA2ANotYet)
}

var _ = unsafe.Pointer(nil)
