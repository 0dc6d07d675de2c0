package ipc

import "golang.org/x/sys/cpu"

// copyStream is ntcopy_amd64.s.
//
//go:noescape
func copyStream(dst, src uintptr, n uintptr)

// haveStream: the CPU has the 32-byte loads and non-temporal stores
// copyStream uses.
var haveStream = cpu.X86.HasAVX
