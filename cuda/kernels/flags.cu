// Flags and counters shared between a CPU thread and kernels. Every access
// is at system scope: the other side is the CPU, through host-mapped
// memory or a GDRCopy BAR mapping. Written against ferry_device.h, which
// the loader includes first.
//
// Kernels that wait take a timeout in nanoseconds of the GPU's global
// timer, so a lost flag ends the kernel with a status instead of hanging
// the device. One thread does the work: launch them with one warp (the
// launch bounds allow 32 threads).

// ferry_flag_wait: one thread spins until *flag == want, then writes
// FD_STATUS_OK to *status (FD_STATUS_TIMEOUT if timeout_ns passed first).
extern "C" __global__ void __launch_bounds__(32) ferry_flag_wait(const uint32_t *flag, uint32_t want,
                                                                 uint64_t timeout_ns, uint32_t *status) {
	if (threadIdx.x != 0 || blockIdx.x != 0) return;
	uint64_t start = fd_globaltimer_ns();
	while (fd_ld_acquire_sys(flag) != want) {
		if (fd_globaltimer_ns() - start > timeout_ns) {
			fd_st_release_sys(status, FD_STATUS_TIMEOUT);
			return;
		}
	}
	fd_st_release_sys(status, FD_STATUS_OK);
}

// ferry_flag_echo answers count pings: for i = 1..count it waits for
// *in == i and then stores i to *out. The host measures the round trip.
extern "C" __global__ void __launch_bounds__(32) ferry_flag_echo(const uint32_t *in, uint32_t *out, uint32_t count,
                                                                 uint64_t timeout_ns) {
	if (threadIdx.x != 0 || blockIdx.x != 0) return;
	for (uint32_t i = 1; i <= count; i++) {
		uint64_t start = fd_globaltimer_ns();
		while (fd_ld_acquire_sys(in) != i) {
			if (fd_globaltimer_ns() - start > timeout_ns) return;
		}
		fd_st_release_sys(out, i);
	}
}

// ferry_flag_set stores v to *flag (a kernel signalling the CPU).
extern "C" __global__ void __launch_bounds__(32) ferry_flag_set(uint32_t *flag, uint32_t v) {
	if (threadIdx.x == 0 && blockIdx.x == 0) fd_st_release_sys(flag, v);
}

// ferry_u64_add adds delta to a u64 slot, for a CPU thread that watches the
// slot for changes. One thread reads and writes it (host memory may not
// support device atomics over PCIe); the store is a system-scope release,
// so everything the kernel wrote before is visible with the new value.
extern "C" __global__ void __launch_bounds__(32) ferry_u64_add(uint64_t *slot, uint64_t delta) {
	if (threadIdx.x != 0 || blockIdx.x != 0) return;
	fd_st_release_sys(slot, fd_ld_relaxed_sys(slot) + delta);
}
