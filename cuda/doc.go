// Package cuda is ferry's CUDA layer: devices, primary contexts, streams,
// events, device memory (plain and VMM, exportable to other processes and
// GPUDirect RDMA capable), pinned and mapped host memory, copies, dma-buf
// export, peer mapping, modules, normal and cooperative kernel launches,
// stream capture into graphs, NVRTC compilation with an on-disk cache, and
// CPU<->GPU flags through GDRCopy or mapped host memory.
//
// # Loading
//
// Nothing is linked at build time: libcuda.so.1 is opened with dlopen on
// first use (then NVRTC and GDRCopy when first needed), found through
// Options, the FERRY_CUDA_DRIVER / FERRY_NVRTC / FERRY_GDRCOPY variables,
// CUDA_HOME, CUDA_PATH, LD_LIBRARY_PATH and the standard directories. On
// a machine without a driver or a device, and in a CGO_ENABLED=0 build,
// every entry point returns an error for which
// errors.Is(err, ErrNotSupported) holds; nothing panics. Driver failures
// are *Error values carrying the CUresult name and the driver's text;
// NVRTC failures are *CompileError values carrying the compile log.
//
// # What the engine uses
//
//   - GPU memory registration: (*DeviceMemory).DmabufFD, or DmabufFD(ptr,
//     len) for memory allocated elsewhere (PyTorch), returns a dma-buf fd
//     for fabric.MemorySpan.DmabufFD. LookupPointer checks that an address
//     is device memory and on which device.
//   - The immediate counter's GPU-flag mode: (*Context).NewFlags returns
//     Flags; each Flag has Set (called by the CPU worker) and DevicePtr
//     (the address a kernel spins on). FlagGDR (GDRCopy) is used when
//     gdrdrv is loaded, FlagHostMapped otherwise; the interface is the same.
//   - The scalar watcher: (*Context).AllocHost(n, HostPortable|HostMapped)
//     returns pinned host memory with a device address (DevicePtr) that
//     kernels write, and Uint64(i) atomic views the watcher polls.
//
// # Contexts and threads
//
// A Context is a retained primary context, shared with the CUDA runtime.
// Objects made from a context keep it open (Close reports ErrBusy until
// they are closed). Every call makes its context current on the OS thread
// it runs on, inside the same C call, so goroutines need not be locked to
// threads; only Stream.Capture locks its goroutine while it runs, as the
// driver requires.
//
// # Kernels
//
// Kernels ship as .cu sources embedded in the binary (KernelSource) and are
// compiled by NVRTC for the exact device (ArchFor: sm_90a on Hopper) by
// (*Context).CompileModule, which caches cubins on disk keyed by the
// source hash, the architecture, the NVRTC version and the options.
//
// Types are safe for concurrent use unless their documentation says
// otherwise; Close must not race with other calls on the same object.
package cuda
