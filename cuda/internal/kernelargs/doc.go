// Package kernelargs is the launch ABI of ferry's kernels: how a list of
// Go values becomes the parameter buffer a kernel reads. The CUDA driver
// path (package cuda: cuLaunchKernel gets a pointer per parameter into
// the buffer) and the CPU emulator (package cuda/emu: the generated
// trampoline copies each parameter from its offset) both pack with Pack,
// so a kernel sees the same bytes at the same offsets on a GPU and on the
// emulator.
//
// Each argument sits at an offset aligned to its alignment, in order,
// little endian: 1 byte for bool, int8 and uint8; 2 for int16 and uint16;
// 4 for int32, uint32 and float32; 8 for int64, uint64, int, uint,
// uintptr, float64 and unsafe.Pointer (the address). Named types of those
// kinds (cuda.DevicePtr) pack as their kind. A struct with no pointers
// inside is copied as it lies in Go memory, aligned as Go aligns it: what
// a C struct of the same fields by value receives on this ABI.
package kernelargs
