// Device side of package fabric/gpu: waiting on a Flag raised by the
// engine's workers, and bumping watcher slots a CPU goroutine polls. Both
// sides talk through host-mapped memory or a GDRCopy mapping, so every
// access is at system scope. Compiled by NVRTC; no headers needed.
//
// Copy the __device__ helpers into your own kernels, or launch the
// extern "C" kernels as they are (they are graph-capturable: all state
// they keep between replays lives in memory the caller owns).

#define FERRY_GPU_OK 1u
#define FERRY_GPU_TIMEOUT 2u

__device__ __forceinline__ unsigned int ferry_gpu_ld_acquire(const unsigned int *p) {
	unsigned int v;
	asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
	return v;
}

__device__ __forceinline__ void ferry_gpu_st_release(unsigned int *p, unsigned int v) {
	asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

__device__ __forceinline__ unsigned long long ferry_gpu_clock_ns() {
	unsigned long long t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	return t;
}

// ferry_gpu_flag_reached waits until the flag's epoch is at or past want
// (wrapping compare), or timeout_ns passes. Returns 1 on success.
__device__ __forceinline__ int ferry_gpu_flag_reached(const unsigned int *flag, unsigned int want,
                                                      unsigned long long timeout_ns) {
	unsigned long long start = ferry_gpu_clock_ns();
	while ((int)(ferry_gpu_ld_acquire(flag) - want) < 0) {
		if (ferry_gpu_clock_ns() - start > timeout_ns) return 0;
		__nanosleep(64);
	}
	return 1;
}

// ferry_gpu_wait_epoch: one thread waits for the next epoch of a flag.
// *epoch is the last epoch this waiter consumed (0 at first); on success
// it is advanced, so the same launch, captured in a graph, waits for the
// following round on each replay. *status gets FERRY_GPU_OK, or
// FERRY_GPU_TIMEOUT (then *epoch is left alone).
extern "C" __global__ void ferry_gpu_wait_epoch(const unsigned int *flag, unsigned int *epoch,
                                                unsigned long long timeout_ns, unsigned int *status) {
	if (threadIdx.x != 0 || blockIdx.x != 0) return;
	unsigned int want = *epoch + 1u;
	if (!ferry_gpu_flag_reached(flag, want, timeout_ns)) {
		ferry_gpu_st_release(status, FERRY_GPU_TIMEOUT);
		return;
	}
	*epoch = want;
	ferry_gpu_st_release(status, FERRY_GPU_OK);
}

// ferry_gpu_wait_value: one thread waits until the flag reaches want (an
// epoch from FlagCounter.Arm), for plain launches.
extern "C" __global__ void ferry_gpu_wait_value(const unsigned int *flag, unsigned int want,
                                                unsigned long long timeout_ns, unsigned int *status) {
	if (threadIdx.x != 0 || blockIdx.x != 0) return;
	ferry_gpu_st_release(status, ferry_gpu_flag_reached(flag, want, timeout_ns) ? FERRY_GPU_OK : FERRY_GPU_TIMEOUT);
}

// ferry_gpu_slot_add adds delta to a watcher slot. A single thread does a
// plain read-modify-write: PCIe may not carry device atomics to host
// memory, and the slot has one writer. The system fence makes the new
// value (and every write before it) visible to the polling CPU.
extern "C" __global__ void ferry_gpu_slot_add(unsigned long long *slot, unsigned long long delta) {
	if (threadIdx.x != 0 || blockIdx.x != 0) return;
	__threadfence_system();
	volatile unsigned long long *p = slot;
	*p = *p + delta;
	__threadfence_system();
}

// ferry_gpu_slot_store stores v to a watcher slot.
extern "C" __global__ void ferry_gpu_slot_store(unsigned long long *slot, unsigned long long v) {
	if (threadIdx.x != 0 || blockIdx.x != 0) return;
	__threadfence_system();
	*(volatile unsigned long long *)slot = v;
	__threadfence_system();
}
