package main

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"os"
	"unsafe"

	"github.com/ferryrdma/ferry/fabric/rendezvous"
)

// The bootstrap: fabric/rendezvous behind a group handle, so processes
// launched by torchrun, mpirun, srun or by hand (FERRY_* variables) can
// exchange addresses and descriptors before their first write.

//export ferry_group_join
func ferry_group_join(timeoutMS C.int64_t, out *C.ferry_group_t) (rc C.int) {
	defer guard(&rc)
	if out == nil {
		return fail(errInvalid("group join", "nil output"))
	}
	return joinGroup(os.LookupEnv, timeoutMS, out)
}

func groupOf(h C.ferry_group_t) (*rendezvous.Group, error) {
	return lookup[*rendezvous.Group](&handles, uint64(h), "group")
}

//export ferry_group_rank
func ferry_group_rank(h C.ferry_group_t, rank, world *C.int32_t) (rc C.int) {
	defer guard(&rc)
	g, err := groupOf(h)
	if err != nil {
		return fail(err)
	}
	if rank != nil {
		*rank = C.int32_t(g.Rank())
	}
	if world != nil {
		*world = C.int32_t(g.WorldSize())
	}
	return C.int(codeOK)
}

//export ferry_group_all_gather
func ferry_group_all_gather(h C.ferry_group_t, data unsafe.Pointer, n C.size_t, out unsafe.Pointer, slot C.size_t, lens *C.size_t, timeoutMS C.int64_t) (rc C.int) {
	defer guard(&rc)
	const op = "group all gather"
	g, err := groupOf(h)
	if err != nil {
		return fail(err)
	}
	if (data == nil && n > 0) || out == nil || lens == nil {
		return fail(errInvalid(op, "nil pointer"))
	}
	if n > slot {
		return fail(fmt.Errorf("%s: %d bytes to send, slots of %d: %w", op, uint64(n), uint64(slot), errBufferTooSmall))
	}
	ctx, cancel, err := timeoutCtx(op, timeoutMS)
	if err != nil {
		return fail(err)
	}
	defer cancel()
	parts, err := g.AllGather(ctx, cBytes(data, n))
	if err != nil {
		return fail(err)
	}
	ls := unsafe.Slice(lens, len(parts))
	dst := unsafe.Slice((*byte)(out), len(parts)*int(slot))
	var short error
	for i, p := range parts {
		ls[i] = C.size_t(len(p))
		if len(p) > int(slot) {
			short = fmt.Errorf("%s: rank %d sent %d bytes, slots of %d: %w", op, i, len(p), uint64(slot), errBufferTooSmall)
			continue
		}
		copy(dst[i*int(slot):], p)
	}
	return result(short)
}

//export ferry_group_broadcast
func ferry_group_broadcast(h C.ferry_group_t, root C.int32_t, buf unsafe.Pointer, cp C.size_t, n *C.size_t, timeoutMS C.int64_t) (rc C.int) {
	defer guard(&rc)
	const op = "group broadcast"
	g, err := groupOf(h)
	if err != nil {
		return fail(err)
	}
	if n == nil || (buf == nil && cp > 0) {
		return fail(errInvalid(op, "nil pointer"))
	}
	var data []byte
	if int(root) == g.Rank() {
		if *n > cp {
			return fail(errInvalid(op, "length %d beyond the buffer's %d bytes", uint64(*n), uint64(cp)))
		}
		data = cBytes(buf, *n)
	}
	ctx, cancel, err := timeoutCtx(op, timeoutMS)
	if err != nil {
		return fail(err)
	}
	defer cancel()
	got, err := g.Broadcast(ctx, int(root), data)
	if err != nil {
		return fail(err)
	}
	if int(root) == g.Rank() {
		return C.int(codeOK)
	}
	return result(copyBytes(op, got, buf, cp, n))
}

//export ferry_group_barrier
func ferry_group_barrier(h C.ferry_group_t, timeoutMS C.int64_t) (rc C.int) {
	defer guard(&rc)
	g, err := groupOf(h)
	if err != nil {
		return fail(err)
	}
	ctx, cancel, err := timeoutCtx("group barrier", timeoutMS)
	if err != nil {
		return fail(err)
	}
	defer cancel()
	return result(g.Barrier(ctx))
}

//export ferry_group_close
func ferry_group_close(h C.ferry_group_t) (rc C.int) {
	defer guard(&rc)
	g, err := release[*rendezvous.Group](&handles, uint64(h), "group")
	if err != nil {
		return fail(err)
	}
	return result(g.Close())
}
