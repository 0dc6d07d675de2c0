// Package cudaemu runs ferry's CUDA kernels on the CPU: the same .cu
// sources that NVRTC compiles for the GPU are compiled by g++ (C++20)
// against a host implementation of cuda/kernels/ferry_device.h
// (rt/fd_emu_device.h) and executed by an emulator of the CUDA execution
// model, so every CI run exercises the real kernel source on machines
// without a GPU.
//
// Only this package and what imports it (tests, emulated backends) need a
// C++ compiler at run time; the library's own packages never import it.
package cudaemu
