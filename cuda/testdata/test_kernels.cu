// Kernels used only by the package's GPU tests (and run on the CPU
// emulator by the emulator's tests). Written against ferry_device.h.

#define TEST_TIMEOUT_NS 10000000000ull

__device__ __forceinline__ uint32_t test_pattern(uint32_t seed, uint64_t i) {
	return seed ^ ((uint32_t)i * 2654435761u);
}

// ferry_test_fill writes test_pattern(seed, i) to p[i] for i < n.
extern "C" __global__ void __launch_bounds__(256) ferry_test_fill(uint32_t *p, uint64_t n, uint32_t seed) {
	uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
	for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
		p[i] = test_pattern(seed, i);
}

// ferry_test_grid_barrier: every block arrives, then waits for all the
// others. Only a cooperative launch guarantees all blocks are resident, so
// only then does every block see the full count. A block that waits past
// the timeout counts itself in *timeouts instead of hanging the device.
extern "C" __global__ void __launch_bounds__(128) ferry_test_grid_barrier(uint32_t *counter, uint32_t *seen,
                                                                          uint32_t *timeouts) {
	if (threadIdx.x != 0) return;
	fd_atomic_add_gpu(counter, 1u);
	uint64_t start = fd_globaltimer_ns();
	uint32_t v;
	while ((v = fd_ld_relaxed_gpu(counter)) < gridDim.x) {
		if (fd_globaltimer_ns() - start > TEST_TIMEOUT_NS) {
			fd_atomic_add_gpu(timeouts, 1u);
			break;
		}
	}
	seen[blockIdx.x] = v;
}

// ferry_test_inc adds one to *c (one thread): replayed graphs count runs.
extern "C" __global__ void __launch_bounds__(32) ferry_test_inc(uint64_t *c) {
	if (threadIdx.x == 0 && blockIdx.x == 0) c[0] += 1;
}
