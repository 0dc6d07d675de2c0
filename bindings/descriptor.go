package main

/*
#include "shim.h"
*/
import "C"

import (
	"unsafe"

	"github.com/ferryrdma/ferry/fabric"
)

// Descriptor handles name immutable *fabric.Descriptor values. Submits
// copy the value they name, so freeing a handle never affects a transfer
// already queued.

func descriptorOf(h C.ferry_descriptor_t) (*fabric.Descriptor, error) {
	return lookup[*fabric.Descriptor](&handles, uint64(h), "descriptor")
}

//export ferry_descriptor_to_bytes
func ferry_descriptor_to_bytes(h C.ferry_descriptor_t, buf *C.uint8_t, cp C.size_t, n *C.size_t) (rc C.int) {
	defer guard(&rc)
	d, err := descriptorOf(h)
	if err != nil {
		return fail(err)
	}
	b, err := d.MarshalBinary()
	if err != nil {
		return fail(err)
	}
	return result(copyBytes("descriptor to bytes", b, unsafe.Pointer(buf), cp, n))
}

//export ferry_descriptor_from_bytes
func ferry_descriptor_from_bytes(buf *C.uint8_t, n C.size_t, out *C.ferry_descriptor_t) (rc C.int) {
	defer guard(&rc)
	if out == nil || (buf == nil && n > 0) {
		return fail(errInvalid("descriptor from bytes", "nil pointer"))
	}
	var d fabric.Descriptor
	if err := d.UnmarshalBinary(cBytes(unsafe.Pointer(buf), n)); err != nil {
		return fail(err)
	}
	*out = C.ferry_descriptor_t(handles.add(&d))
	return C.int(codeOK)
}

//export ferry_descriptor_to_hex
func ferry_descriptor_to_hex(h C.ferry_descriptor_t, buf *C.char, cp C.size_t, n *C.size_t) (rc C.int) {
	defer guard(&rc)
	d, err := descriptorOf(h)
	if err != nil {
		return fail(err)
	}
	t, err := d.MarshalText()
	if err != nil {
		return fail(err)
	}
	return result(copyText("descriptor to hex", string(t), buf, cp, n))
}

//export ferry_descriptor_from_hex
func ferry_descriptor_from_hex(hex *C.char, out *C.ferry_descriptor_t) (rc C.int) {
	defer guard(&rc)
	if hex == nil || out == nil {
		return fail(errInvalid("descriptor from hex", "nil pointer"))
	}
	d, err := fabric.ParseDescriptor(C.GoString(hex))
	if err != nil {
		return fail(err)
	}
	*out = C.ferry_descriptor_t(handles.add(&d))
	return C.int(codeOK)
}

//export ferry_descriptor_info
func ferry_descriptor_info(h C.ferry_descriptor_t, base, length *C.uint64_t, nics *C.int32_t) (rc C.int) {
	defer guard(&rc)
	d, err := descriptorOf(h)
	if err != nil {
		return fail(err)
	}
	if base != nil {
		*base = C.uint64_t(d.Base)
	}
	if length != nil {
		*length = C.uint64_t(d.Length)
	}
	if nics != nil {
		*nics = C.int32_t(len(d.NICs))
	}
	return C.int(codeOK)
}

//export ferry_descriptor_free
func ferry_descriptor_free(h C.ferry_descriptor_t) (rc C.int) {
	defer guard(&rc)
	_, err := release[*fabric.Descriptor](&handles, uint64(h), "descriptor")
	return result(err)
}
