// Scope checker scenarios (scope_test.go). Scopes are parameters: 0 cta,
// 1 gpu, 2 sys. Only thread 0 of each block takes part.

__device__ void scope_store(unsigned *p, unsigned v, int sc) {
	if (sc == 0) fd_st_release_cta(p, v);
	else if (sc == 1) fd_st_release_gpu(p, v);
	else fd_st_release_sys(p, v);
}

__device__ unsigned scope_load(const unsigned *p, int sc) {
	if (sc == 0) return fd_ld_acquire_cta(p);
	if (sc == 1) return fd_ld_acquire_gpu(p);
	return fd_ld_acquire_sys(p);
}

__device__ unsigned scope_add(unsigned *p, int sc) {
	return sc == 2 ? fd_atomic_add_sys(p, 1u) : fd_atomic_add_gpu(p, 1u);
}

// Block 1 publishes data[0] and releases flag at store_sc; block 0
// acquires it at load_sc and copies the data to data[1].
extern "C" __global__ void scope_cross_block(unsigned *flag, unsigned *data, int store_sc, int load_sc) {
	if (threadIdx.x != 0) return;
	if (blockIdx.x == 1) {
		data[0] = 42;
		scope_store(flag, 1, store_sc);
		return;
	}
	while (scope_load(flag, load_sc) != 1) fd_nanosleep(100);
	data[1] = data[0];
}

// The same between threads 32 and 0 of one block: cta scope suffices.
extern "C" __global__ void scope_same_block(unsigned *flag, unsigned *data, int store_sc, int load_sc) {
	if (threadIdx.x == 32) {
		data[0] = 7;
		scope_store(flag, 1, store_sc);
	} else if (threadIdx.x == 0) {
		while (scope_load(flag, load_sc) != 1) fd_nanosleep(100);
		data[1] = data[0];
	}
}

// scope_acquire looks at flag once, says so in *started (sys), then waits
// for want at sc: whatever raises the flag does it while this launch runs.
extern "C" __global__ void scope_acquire(unsigned *flag, unsigned want, int sc, unsigned *started) {
	if (threadIdx.x != 0 || blockIdx.x != 0) return;
	unsigned v = scope_load(flag, sc);
	fd_st_release_sys(started, 1u);
	while (v != want) {
		fd_nanosleep(100);
		v = scope_load(flag, sc);
	}
}

// scope_release raises flag to v at sc.
extern "C" __global__ void scope_release(unsigned *flag, unsigned v, int sc) {
	if (threadIdx.x == 0 && blockIdx.x == 0) scope_store(flag, v, sc);
}

// scope_count adds one to *counter at sc (1 gpu, 2 sys), then waits
// (reading at sys) until it reaches want: launched on two devices, the
// second add observes the first while both launches run.
extern "C" __global__ void scope_count(unsigned *counter, int sc, unsigned want) {
	if (threadIdx.x != 0 || blockIdx.x != 0) return;
	scope_add(counter, sc);
	while (fd_ld_acquire_sys(counter) < want) fd_nanosleep(100);
}
