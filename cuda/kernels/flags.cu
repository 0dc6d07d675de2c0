// Flags and counters shared between a CPU thread and kernels. Every access
// is at system scope: the other side is the CPU, through host-mapped
// memory or a GDRCopy BAR mapping. Compiled by NVRTC (no headers needed).
//
// Kernels that wait take a timeout in nanoseconds of the GPU's global
// timer, so a lost flag ends the kernel with a status instead of hanging
// the device.

#define FERRY_OK 1u
#define FERRY_TIMEOUT 2u

__device__ __forceinline__ unsigned int ferry_load_acquire(const unsigned int *p) {
	unsigned int v;
	asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
	return v;
}

__device__ __forceinline__ void ferry_store_release(unsigned int *p, unsigned int v) {
	asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

__device__ __forceinline__ unsigned long long ferry_now_ns() {
	unsigned long long t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	return t;
}

// ferry_flag_wait: one thread spins until *flag == want, then writes
// FERRY_OK to *status (FERRY_TIMEOUT if timeout_ns passed first).
extern "C" __global__ void ferry_flag_wait(const unsigned int *flag, unsigned int want,
                                           unsigned long long timeout_ns, unsigned int *status) {
	if (threadIdx.x != 0 || blockIdx.x != 0) return;
	unsigned long long start = ferry_now_ns();
	while (ferry_load_acquire(flag) != want) {
		if (ferry_now_ns() - start > timeout_ns) {
			ferry_store_release(status, FERRY_TIMEOUT);
			return;
		}
	}
	ferry_store_release(status, FERRY_OK);
}

// ferry_flag_echo answers count pings: for i = 1..count it waits for
// *in == i and then stores i to *out. The host measures the round trip.
extern "C" __global__ void ferry_flag_echo(const unsigned int *in, unsigned int *out, unsigned int count,
                                           unsigned long long timeout_ns) {
	if (threadIdx.x != 0 || blockIdx.x != 0) return;
	for (unsigned int i = 1; i <= count; i++) {
		unsigned long long start = ferry_now_ns();
		while (ferry_load_acquire(in) != i) {
			if (ferry_now_ns() - start > timeout_ns) return;
		}
		ferry_store_release(out, i);
	}
}

// ferry_flag_set stores v to *flag (a kernel signalling the CPU).
extern "C" __global__ void ferry_flag_set(unsigned int *flag, unsigned int v) {
	if (threadIdx.x == 0 && blockIdx.x == 0) ferry_store_release(flag, v);
}

// ferry_u64_add adds delta to a u64 slot, for a CPU thread that watches the
// slot for changes. One thread does a plain read-modify-write (host memory
// may not support device atomics over PCIe), then publishes with a
// system-scope fence.
extern "C" __global__ void ferry_u64_add(unsigned long long *slot, unsigned long long delta) {
	if (threadIdx.x != 0 || blockIdx.x != 0) return;
	volatile unsigned long long *p = slot;
	*p = *p + delta;
	__threadfence_system();
}
