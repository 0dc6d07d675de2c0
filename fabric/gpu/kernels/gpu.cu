// Device side of package fabric/gpu: waiting on a Flag raised by the
// engine's workers, and bumping watcher slots a CPU goroutine polls. Both
// sides talk through host-mapped memory or a GDRCopy mapping, so every
// access is at system scope. Written against ferry_device.h, which the
// loader includes first.
//
// Copy the __device__ helpers into your own kernels, or launch the
// extern "C" kernels as they are (they are graph-capturable: all state
// they keep between replays lives in memory the caller owns). One thread
// does the work: launch them with one warp.

// ferry_gpu_flag_reached waits until the flag's epoch is at or past want
// (wrapping compare), or timeout_ns passes. Returns 1 on success.
__device__ __forceinline__ int ferry_gpu_flag_reached(const uint32_t *flag, uint32_t want, uint64_t timeout_ns) {
	uint64_t start = fd_globaltimer_ns();
	while ((int32_t)(fd_ld_acquire_sys(flag) - want) < 0) {
		if (fd_globaltimer_ns() - start > timeout_ns) return 0;
		fd_nanosleep(64);
	}
	return 1;
}

// ferry_gpu_wait_epoch: one thread waits for the next epoch of a flag.
// *epoch is the last epoch this waiter consumed (0 at first); on success
// it is advanced, so the same launch, captured in a graph, waits for the
// following round on each replay. *status gets FD_STATUS_OK, or
// FD_STATUS_TIMEOUT (then *epoch is left alone).
extern "C" __global__ void __launch_bounds__(32) ferry_gpu_wait_epoch(const uint32_t *flag, uint32_t *epoch,
                                                                      uint64_t timeout_ns, uint32_t *status) {
	if (threadIdx.x != 0 || blockIdx.x != 0) return;
	uint32_t want = *epoch + 1u;
	if (!ferry_gpu_flag_reached(flag, want, timeout_ns)) {
		fd_st_release_sys(status, FD_STATUS_TIMEOUT);
		return;
	}
	*epoch = want;
	fd_st_release_sys(status, FD_STATUS_OK);
}

// ferry_gpu_wait_value: one thread waits until the flag reaches want (an
// epoch from FlagCounter.Arm), for plain launches.
extern "C" __global__ void __launch_bounds__(32) ferry_gpu_wait_value(const uint32_t *flag, uint32_t want,
                                                                      uint64_t timeout_ns, uint32_t *status) {
	if (threadIdx.x != 0 || blockIdx.x != 0) return;
	fd_st_release_sys(status, ferry_gpu_flag_reached(flag, want, timeout_ns) ? FD_STATUS_OK : FD_STATUS_TIMEOUT);
}

// ferry_gpu_slot_add adds delta to a watcher slot. A single thread reads
// and writes it: PCIe may not carry device atomics to host memory, and the
// slot has one writer. The store is a system-scope release, so every write
// the launch made before it is visible to the CPU that sees the new value.
extern "C" __global__ void __launch_bounds__(32) ferry_gpu_slot_add(uint64_t *slot, uint64_t delta) {
	if (threadIdx.x != 0 || blockIdx.x != 0) return;
	fd_st_release_sys(slot, fd_ld_relaxed_sys(slot) + delta);
}

// ferry_gpu_slot_store stores v to a watcher slot (a system-scope release).
extern "C" __global__ void __launch_bounds__(32) ferry_gpu_slot_store(uint64_t *slot, uint64_t v) {
	if (threadIdx.x != 0 || blockIdx.x != 0) return;
	fd_st_release_sys(slot, v);
}
