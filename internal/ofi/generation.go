package ofi

/*
#include "shim.h"
*/
import "C"

import "strconv"

// What ferry does differently from one libfabric generation to the next
// lives here and in generation.h (the C rules of the data path), decided
// from the library loaded at run time, never from the headers alone: a
// binary built against 1.17 runs on 2.x (which keeps the 1.x symbols), for
// example with LD_LIBRARY_PATH pointing at an EFA installer's libfabric.

// LibVersion is a libfabric version, FI_VERSION(major, minor).
type LibVersion uint32

// MakeVersion is FI_VERSION(major, minor).
func MakeVersion(major, minor int) LibVersion { return LibVersion(major<<16 | minor&0xffff) }

// Major is FI_MAJOR.
func (v LibVersion) Major() int { return int(v >> 16) }

// Minor is FI_MINOR.
func (v LibVersion) Minor() int { return int(v & 0xffff) }

// String is "major.minor".
func (v LibVersion) String() string {
	return strconv.Itoa(v.Major()) + "." + strconv.Itoa(v.Minor())
}

// Generation is what ferry does on one libfabric version: the API it asks
// for and the rules and workarounds that version needs. Each field says
// which versions need it and has a test.
type Generation struct {
	Runtime LibVersion // fi_version(): the library loaded
	Header  LibVersion // the headers this binary was compiled with
	API     LibVersion // what fi_getinfo is asked for

	// ImmByData: a completion with FI_REMOTE_CQ_DATA and no operation
	// flag is an incoming write's immediate (2.x shm reports the target
	// side of fi_writedata that way; 1.17 added FI_RMA|FI_REMOTE_WRITE).
	// Applied in C (FERRY_RULE_IMM_BY_DATA of generation.h).
	ImmByData bool

	// TCPCloseUnderFloodCrashes: tcp;ofi_rxm can crash inside fi_close
	// of an endpoint that writes are still streaming into, or that still
	// has writes in flight on a connection that stopped moving. Seen on
	// 1.17 and on 2.1 (a NULL dereference in rxm_handle_comp_error, from
	// rxm_ep_close flushing its connections), so set for every version
	// until one is shown not to: efa's Domain.Abandon then leaves tcp
	// endpoints open rather than closing them.
	TCPCloseUnderFloodCrashes bool
}

// headerVersion is the version of the headers compiled against.
const headerVersion = LibVersion(C.FI_MAJOR_VERSION<<16 | C.FI_MINOR_VERSION)

// Current is the generation of the library loaded.
func Current() Generation { return GenerationOf(LibVersion(C.fi_version()), headerVersion) }

// GenerationOf is the generation ferry uses for a library of version
// runtime, with headers of version header.
func GenerationOf(runtime, header LibVersion) Generation {
	rules := uint32(C.ferry_gen_rules(C.uint32_t(runtime)))
	return Generation{
		Runtime:   runtime,
		Header:    header,
		API:       LibVersion(C.ferry_gen_api(C.uint32_t(header), C.uint32_t(runtime))),
		ImmByData: rules&C.FERRY_RULE_IMM_BY_DATA != 0,

		TCPCloseUnderFloodCrashes: true,
	}
}

// Classify is the data path's classification of a completion entry's
// flags under g's rules (ferry_classify of generation.h): an Event*
// kind, or 0 for an entry ferry cannot place. It exists for tests and
// diagnostics; Poll classifies in C.
func (g Generation) Classify(flags uint64) uint32 {
	return uint32(C.ferry_classify(C.uint64_t(flags), C.ferry_gen_rules(C.uint32_t(g.Runtime))))
}

// Completion flag bits, for tests of Classify.
const (
	CompRMA          = uint64(C.FI_RMA)
	CompMsg          = uint64(C.FI_MSG)
	CompWrite        = uint64(C.FI_WRITE)
	CompSend         = uint64(C.FI_SEND)
	CompRecv         = uint64(C.FI_RECV)
	CompRemoteWrite  = uint64(C.FI_REMOTE_WRITE)
	CompRemoteCQData = uint64(C.FI_REMOTE_CQ_DATA)
)
