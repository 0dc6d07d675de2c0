package main

/*
#include <stdlib.h>
#include "ferry.h"
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/ferryrdma/ferry/fabric"
)

// peerAddr decodes a binary endpoint address from C memory.
func peerAddr(op string, addr *C.uint8_t, n C.size_t) (fabric.Address, error) {
	var a fabric.Address
	if addr == nil {
		return a, errInvalid(op, "nil address")
	}
	if err := a.UnmarshalBinary(cBytes(unsafe.Pointer(addr), n)); err != nil {
		return a, fmt.Errorf("%s: %w", op, err)
	}
	return a, nil
}

//export ferry_on_peer_lost
func ferry_on_peer_lost(h C.ferry_engine_t, fn C.ferry_peer_lost_fn, ud uintptr) (rc C.int) {
	defer guard(&rc)
	o, err := engineOf(h)
	if err != nil {
		return fail(err)
	}
	if fn == nil {
		return fail(errInvalid("on peer lost", "nil callback"))
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return fail(fmt.Errorf("on peer lost: %w", fabric.ErrClosed))
	}
	o.e.OnPeerLost(func(pe *fabric.PeerError) {
		b, err := pe.Peer.MarshalBinary()
		if err != nil || len(b) == 0 {
			return
		}
		// C memory for the duration of the call: the callback may keep
		// nothing of it, as ferry.h says.
		p := C.CBytes(b)
		defer C.free(p)
		C.ferryp_call_peer_lost(fn, C.uintptr_t(ud), (*C.uint8_t)(p), C.size_t(len(b)))
	})
	return C.int(codeOK)
}

//export ferry_watch_peer
func ferry_watch_peer(h C.ferry_engine_t, addr *C.uint8_t, n C.size_t) (rc C.int) {
	defer guard(&rc)
	o, err := engineOf(h)
	if err != nil {
		return fail(err)
	}
	a, err := peerAddr("watch peer", addr, n)
	if err != nil {
		return fail(err)
	}
	// The watch lasts as long as the engine: Close ends it.
	if _, err := o.e.WatchPeer(a); err != nil {
		return fail(err)
	}
	return C.int(codeOK)
}

//export ferry_connect
func ferry_connect(h C.ferry_engine_t, addrs **C.uint8_t, lens *C.size_t, count C.size_t, timeoutMS C.int64_t) (rc C.int) {
	defer guard(&rc)
	o, err := engineOf(h)
	if err != nil {
		return fail(err)
	}
	if count > 0 && (addrs == nil || lens == nil) {
		return fail(errInvalid("connect", "nil address list"))
	}
	if uint64(count) > 1<<16 {
		return fail(errInvalid("connect", "%d addresses (at most 65536)", uint64(count)))
	}
	as := make([]fabric.Address, 0, int(count))
	if count > 0 {
		ptrs := unsafe.Slice(addrs, int(count))
		ns := unsafe.Slice(lens, int(count))
		for i := range ptrs {
			a, err := peerAddr(fmt.Sprintf("connect: address %d", i), ptrs[i], ns[i])
			if err != nil {
				return fail(err)
			}
			as = append(as, a)
		}
	}
	ctx, cancel, err := timeoutCtx("connect", timeoutMS)
	if err != nil {
		return fail(err)
	}
	defer cancel()
	return result(o.e.Connect(ctx, as...))
}

//export ferry_peer_status
func ferry_peer_status(h C.ferry_engine_t, addr *C.uint8_t, n C.size_t) (rc C.int) {
	defer guard(&rc)
	o, err := engineOf(h)
	if err != nil {
		return fail(err)
	}
	a, err := peerAddr("peer status", addr, n)
	if err != nil {
		return fail(err)
	}
	return result(o.e.PeerStatus(a))
}
