// Package emu runs ferry's CUDA kernels on the CPU: the same .cu
// sources that NVRTC compiles for the GPU are compiled by g++ (C++20)
// against a host implementation of cuda/kernels/ferry_device.h
// (rt/fd_emu_device.h) and executed by an emulator of the CUDA execution
// model, so every CI run exercises the real kernel source on machines
// without a GPU. Every launch is also checked for memory scopes: a load
// or atomic that observes a store from a thread outside either side's
// scope (cta, gpu, sys; each Stream runs on an emulated device, see
// NewDeviceStream) fails the launch with a KernelError saying so.
//
// It sits beside package cuda, whose API it emulates: Module, Kernel and
// Stream take the same kernel sources (cuda.Source), grid shapes
// (cuda.Dim3) and launch arguments, laid out by the same code
// (cuda/internal/kernelargs). Only the emulated a2a device
// (a2a/cudabackend/emulated, and what imports it: the C ABI's "cuda-emu"
// backend, bench-a2a, tests) and tests import it; they alone need a C++
// compiler at run time.
package emu
