// Package cudadrv is ferry's thin binding to the CUDA driver API, NVRTC and
// GDRCopy, all loaded at run time with dlopen (see internal/dl).
//
// Every entry point is called through a table of function pointers filled
// by dlsym, with one small C trampoline per function. A trampoline whose
// pointer is still NULL returns CUDA_ERROR_NOT_INITIALIZED (before Load) or
// CUDA_ERROR_NOT_SUPPORTED (a symbol the installed driver lacks) instead of
// jumping to address zero, so a call in the wrong order is an error, never
// a crash. Versioned entry points are resolved by name, newest first
// (cuMemAlloc_v2 before cuMemAlloc), and only where both versions share one
// signature. The declarations the trampolines need are in ferry_cuda.h,
// written by hand: building needs no CUDA toolkit.
//
// Trampolines that act in a context take the CUcontext as their first
// argument and make it current on the calling thread inside the same C
// call. A goroutine can move between OS threads between two cgo calls, but
// never during one, so no caller has to lock its goroutine to a thread.
//
// The package is 1:1 and keeps no policy: the Driver, NVRTC and GDR
// interfaces are the seam that package cuda builds its idiomatic API on,
// and that tests can replace with fakes. Built with CGO_ENABLED=0, Load
// fails with an error that wraps ErrNotSupported.
package cudadrv
