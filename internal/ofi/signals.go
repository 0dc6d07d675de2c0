package ofi

/*
#include "shim.h"
*/
import "C"

import "syscall"

// ForeignHandlersReset returns the signals whose handler, installed by
// libinfinipath when libfabric was loaded, was put back to the default
// before the Go runtime started (signals.c), so that Go reports crashes in
// C code itself.
func ForeignHandlersReset() []syscall.Signal {
	m := int(C.ferry_signals_reset_mask())
	var out []syscall.Signal
	for s := 1; s < 32; s++ {
		if m&(1<<s) != 0 {
			out = append(out, syscall.Signal(s))
		}
	}
	return out
}

// FaultForTest dereferences a null pointer in C. It exists for the test
// that checks who reports a crash in C code; nothing else calls it.
func FaultForTest() { C.ferry_fault_for_test() }
