// Kernels used only by the package's GPU tests.

#define TEST_TIMEOUT_NS 10000000000ull

__device__ __forceinline__ unsigned long long test_now_ns() {
	unsigned long long t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	return t;
}

__device__ __forceinline__ unsigned int test_pattern(unsigned int seed, unsigned long long i) {
	return seed ^ ((unsigned int)i * 2654435761u);
}

// ferry_test_fill writes test_pattern(seed, i) to p[i] for i < n.
extern "C" __global__ void ferry_test_fill(unsigned int *p, unsigned long long n, unsigned int seed) {
	unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
	for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
		p[i] = test_pattern(seed, i);
}

// ferry_test_grid_barrier: every block arrives, then waits for all the
// others. Only a cooperative launch guarantees all blocks are resident, so
// only then does every block see the full count. A block that waits past
// the timeout counts itself in *timeouts instead of hanging the device.
extern "C" __global__ void ferry_test_grid_barrier(unsigned int *counter, unsigned int *seen, unsigned int *timeouts) {
	if (threadIdx.x != 0) return;
	atomicAdd(counter, 1u);
	unsigned long long start = test_now_ns();
	unsigned int v;
	while ((v = atomicAdd(counter, 0u)) < gridDim.x) {
		if (test_now_ns() - start > TEST_TIMEOUT_NS) {
			atomicAdd(timeouts, 1u);
			break;
		}
	}
	seen[blockIdx.x] = v;
}

// ferry_test_inc adds one to *c (one thread): replayed graphs count runs.
extern "C" __global__ void ferry_test_inc(unsigned long long *c) {
	if (threadIdx.x == 0 && blockIdx.x == 0) c[0] += 1;
}
