// Package gpu connects the fabric engine to CUDA: it registers GPU memory
// with the NICs, lets the engine's immediate counters release a waiting
// kernel, and watches counters that kernels bump in host-mapped memory.
// Package fabric stays pure Go and free of CUDA; this package joins the two.
//
// # Registering GPU memory
//
// Register (and RegisterDeviceMemory, RegisterReport) asks the driver
// which device owns an address (cuda.LookupPointer: host, managed-as-host
// and unknown memory are refused with a *MemoryTypeError), then registers
// the range with every NIC of the engine group for that device
// (fabric.GroupSpec{Device: fabric.CUDADevice(n)}). Two paths:
//
//   - dma-buf (PathDmabuf): on Linux >= 5.12 with a driver that exports
//     dma-bufs, the range is handed over as a dma-buf fd
//     (fabric.MemorySpan.DmabufFD) that is closed once the NICs hold it.
//   - peer memory (PathPeerMemory): the device address itself, which the
//     provider must understand (libfabric FI_HMEM, verbs with
//     nvidia-peermem).
//
// RegisterReport says which path was taken and why dma-buf was not, and
// DmabufAvailable probes the machine, so that fabric-debug and users can
// show it. A provider with no GPU support at all (libfabric tcp and shm
// as built by Debian, the in-memory providers) fails with an error
// wrapping fabric.ErrNotSupported that names the missing feature.
//
// # Waking a kernel when data has arrived
//
// NewFlagCounter makes an immediate value a counter whose rounds raise a
// cuda.Flag (pinned host memory mapped into the GPU, or GPU memory mapped
// for the CPU through GDRCopy). Arm(n) asks for n more immediates and
// returns the epoch the flag will show when they are in; the engine's
// worker publishes it with one store, with no kernel launch and no
// callback. A kernel waits with KernelWaitValue for that epoch, or, inside
// a CUDA graph, with KernelWaitEpoch, which keeps the epoch it consumed
// last in device memory so the same captured launch waits for the next
// round on every replay:
//
//	host, once:     fc := NewFlagCounter(e, imm, flags.Flag(0))
//	                capture on st: KernelWaitEpoch(fc.Flag().DevicePtr(), epochWord, timeout, status); consumer kernels
//	host, per step: fc.Arm(expected immediates); graph.Launch(st)
//
// The flag's store has release ordering and the wait an acquire load at
// system scope, so the bytes the immediates announced are visible to the
// kernels that follow the wait in the stream. The wait kernels time out
// (status StatusTimeout) instead of hanging the device when a peer is lost.
//
// # The scalar watcher
//
// A Watcher owns a block of 64-bit slots (NewCUDAWatcher: 512 slots of
// pinned, host-mapped memory; NewWatcher takes any SlotMemory, such as
// NewHostSlots for host-only use and tests). Acquire returns a Slot whose
// DevicePtr a kernel updates (KernelSlotAdd, or its own stores followed by
// __threadfence_system), and a goroutine locked to its OS thread, pinned
// if asked, polls the acquired slots with atomic loads (spinning, then
// yielding, then sleeping, per WatcherConfig) and calls the slot's
// callback with the old and new value of each change it sees. Because
// the kernel only writes memory, the update can be captured in a CUDA
// graph and replayed; the CPU learns of it without a stream sync. A
// callback returning false releases its slot (and zeroes it).
//
// # Ownership and concurrency
//
// Everything here is safe for concurrent use. Registrations belong to the
// engine (fabric.Engine.Unregister or Close releases them). A Watcher owns
// its memory and its goroutine; Close stops and frees both, and waits.
// Slots, flags and counters must outlive the kernels that use them.
//
// On machines without a CUDA driver every call that needs one returns an
// error wrapping fabric.ErrNotSupported; the watcher over host memory works
// everywhere.
package gpu
