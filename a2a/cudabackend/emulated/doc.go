// Package emulated runs the CUDA backend of a2a (package a2a/cudabackend)
// on the CPU emulator of the CUDA execution model (package cuda/emu): its
// Device implements the backend's device seam (Device, Program, Stream)
// over the emulator, and the kernels are
// the same .cu sources NVRTC compiles for a GPU, built by g++ against the
// host implementation of ferry_device.h; "device memory" is host memory
// (mmap'd, outside the Go heap) that the fabric engine registers like any
// host buffer, so node ranks share it as the host backend's ranks do and
// the libfabric providers carry it between domains.
//
// This is how every CI run proves the CUDA backend without a GPU. It needs
// g++ (C++20) at run time. Its users: the C ABI and the Python package
// (the "cuda-emu" backend, package bindings), bench-a2a (--backend
// cuda-emu, through bench/internal/a2abench) and the tests.
package emulated
