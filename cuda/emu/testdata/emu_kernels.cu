// Kernels of the emulator's own tests: every execution-model feature the
// emulator provides, checked by the Go tests (emu_test.go) and, built with
// ThreadSanitizer, by the C++ scenarios (tsan_scenarios.cpp). The mutation
// test rebuilds this file with one of the FD_MUTATE_* bugs switched on.

#ifndef EMU_BLOCK
#define EMU_BLOCK 512
#endif

// copy_scan: each block copies its slice of in to out (16-byte vectors),
// then computes the inclusive prefix sum of its slice (warp shuffles, a
// shared array of warp totals, __syncthreads), and publishes its total;
// the last block to finish (acq_rel counter) adds up every block's total.
// n is a multiple of 4 * EMU_BLOCK * gridDim.x / gridDim.x.
extern "C" __global__ void __launch_bounds__(EMU_BLOCK) copy_scan(const uint32_t *in, uint32_t *out, uint32_t *scan,
                                                                  uint32_t per_block, uint32_t *block_totals,
                                                                  uint32_t *done, uint32_t *grand_total) {
	__shared__ uint32_t warp_sums[32];
	__shared__ uint32_t carry;
	const uint32_t t = fd_thread_id(), lane = fd_lane_id(), warp = fd_warp_id();
	const uint32_t nthreads = fd_block_threads();
	const uint32_t base = blockIdx.x * per_block;
	// Copy: per_block / 4 vectors, strided over the block's threads.
	uint32_t vectors = per_block / 4;
#ifdef FD_MUTATE_COPY_OFF_BY_ONE
	vectors -= 1;
#endif
	for (uint32_t v = t; v < vectors; v += nthreads)
		fd_st16(out + base + 4 * v, fd_ld16_nc(in + base + 4 * v));
	// Scan, in chunks of nthreads elements.
	if (t == 0) carry = 0;
	__syncthreads();
	for (uint32_t chunk = 0; chunk < per_block; chunk += nthreads) {
		uint32_t x = in[base + chunk + t];
		for (uint32_t d = 1; d < 32; d <<= 1) {
			uint32_t y = __shfl_up_sync(0xffffffffu, x, d);
			if (lane >= d) x += y;
		}
		if (lane == 31) warp_sums[warp] = x;
#ifndef FD_MUTATE_DROP_SYNCTHREADS
		__syncthreads();
#endif
		if (warp == 0) {
			uint32_t s = lane < nthreads / 32 ? warp_sums[lane] : 0;
			for (uint32_t d = 1; d < 32; d <<= 1) {
				uint32_t y = __shfl_up_sync(0xffffffffu, s, d);
				if (lane >= d) s += y;
			}
			if (lane < nthreads / 32) warp_sums[lane] = s;
		}
		__syncthreads();
		uint32_t prefix = carry + (warp > 0 ? warp_sums[warp - 1] : 0);
		scan[base + chunk + t] = prefix + x;
		__syncthreads();
		if (t == nthreads - 1) carry = prefix + x;
		__syncthreads();
	}
	// Publish this block's total; the last block sums them all.
	if (t == 0) {
		block_totals[blockIdx.x] = carry;
#ifdef FD_MUTATE_RELAXED_PUBLISH
		uint32_t prev = fd_atomic_add_gpu(done, 1u);
#else
		uint32_t prev = fd_atomic_add_acq_rel_gpu(done, 1u);
#endif
		if (prev == gridDim.x - 1) {
			uint32_t sum = 0;
			for (uint32_t b = 0; b < gridDim.x; b++) sum += block_totals[b];
			fd_st_release_gpu(grand_total, sum);
		}
	}
}

// flag_relay: block 0 waits for the host's flag, then releases a value to
// block 1, which waits for it (a cross-block spin) and reports.
extern "C" __global__ void __launch_bounds__(64) flag_relay(const uint32_t *host_flag, uint32_t *mid, uint32_t *data,
                                                            uint32_t *result, uint64_t timeout_ns) {
	if (threadIdx.x != 0) return;
	uint64_t start = fd_globaltimer_ns();
	if (blockIdx.x == 0) {
		while (fd_ld_acquire_sys(host_flag) == 0) {
			if (fd_globaltimer_ns() - start > timeout_ns) {
				fd_st_release_sys(result, FD_STATUS_TIMEOUT);
				return;
			}
		}
		*data = 42;
		fd_st_release_gpu(mid, 1u);
	} else {
		while (fd_ld_acquire_gpu(mid) == 0) {
			if (fd_globaltimer_ns() - start > 2 * timeout_ns) {
				fd_st_release_sys(result, FD_STATUS_TIMEOUT);
				return;
			}
			fd_nanosleep(100);
		}
		fd_st_release_sys(result, *data == 42 ? FD_STATUS_OK : 0xbad);
	}
}

// grid_sync_twice: every block writes, passes a grid barrier, reads its
// neighbour's value, passes another, and writes again.
extern "C" __global__ void __launch_bounds__(128) grid_sync_twice(fd_grid_barrier *bar, uint32_t *vals, uint32_t *seen) {
	uint32_t b = blockIdx.x, n = gridDim.x;
	if (threadIdx.x == 0) vals[b] = b + 1;
	fd_grid_sync(bar);
	if (threadIdx.x == 0) seen[b] = vals[(b + 1) % n];
	fd_grid_sync(bar);
	if (threadIdx.x == 0) vals[b] = 0;
}

// warp_ops: each warp fills its row of out with the results of the warp
// operations, for the Go test to check.
extern "C" __global__ void __launch_bounds__(256) warp_ops(uint32_t *out) {
	uint32_t t = fd_thread_id(), lane = fd_lane_id();
	uint32_t *o = out + (t & ~31u) * 16 + lane * 16;
	o[0] = __shfl_sync(0xffffffffu, t * 3, 5);
	o[1] = __shfl_up_sync(0xffffffffu, t, 3);
	o[2] = __shfl_down_sync(0xffffffffu, t, 4, 16);
	o[3] = __shfl_xor_sync(0xffffffffu, t, 1);
	o[4] = __ballot_sync(0xffffffffu, lane & 1);
	o[5] = __any_sync(0xffffffffu, lane == 7);
	o[6] = __all_sync(0xffffffffu, lane < 31);
	o[7] = __reduce_add_sync(0xffffffffu, lane);
	o[8] = __reduce_max_sync(0xffffffffu, lane * 7 % 32);
	o[9] = (uint32_t)__reduce_min_sync(0xffffffffu, (int)lane - 5);
	o[10] = __syncthreads_count(lane < 4);
	o[11] = fd_elect_one(0xfffffff0u) ? 1 : 0;
	if (lane < 16) o[12] = __shfl_sync(0x0000ffffu, lane + 100, 15);
	else o[12] = __shfl_sync(0xffff0000u, lane + 200, 16);
	__syncwarp();
	o[13] = 1;
}

// bad_exit: lanes 16-31 leave before a full-warp shuffle (a real bug).
extern "C" __global__ void __launch_bounds__(32) bad_exit(uint32_t *out) {
	if (threadIdx.x >= 16) return;
	out[threadIdx.x] = __shfl_sync(0xffffffffu, threadIdx.x, 0);
}

// bad_barrier: in warp 1, lanes 0-15 wait at __syncthreads while lanes
// 16-31 wait in a shuffle that names lanes 0-15: a deadlock on a GPU too.
extern "C" __global__ void __launch_bounds__(64) bad_barrier(uint32_t *out) {
	if (threadIdx.x < 48) __syncthreads();
	else out[1] = __shfl_sync(0xffffffffu, threadIdx.x, 0);
}

// spin_forever waits for a flag nobody raises: only an abort ends it.
extern "C" __global__ void __launch_bounds__(32) spin_forever(const uint32_t *flag) {
	while (fd_ld_acquire_sys(flag) == 0) fd_nanosleep(1000);
}

// conversions: out[i] for every 16-bit input pattern (and the e4m3 ones),
// for bit-for-bit comparison with a2a's Go code.
extern "C" __global__ void __launch_bounds__(256) conversions(const float *in, uint32_t n, uint16_t *bf16,
                                                              uint16_t *f16, uint8_t *e4m3, float *back) {
	uint32_t stride = gridDim.x * blockDim.x;
	for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
		bf16[i] = fd_f32_to_bf16(in[i]);
		f16[i] = fd_f32_to_f16(in[i]);
		e4m3[i] = fd_f32_to_e4m3(in[i]);
		if (i < 65536) {
			back[3 * i] = fd_bf16_to_f32((uint16_t)i);
			back[3 * i + 1] = fd_f16_to_f32((uint16_t)i);
			back[3 * i + 2] = i < 256 ? fd_e4m3_to_f32((uint8_t)i) : 0.0f;
		}
	}
}

// divergent_barrier: odd warps wait at one __syncthreads, even warps at
// another (a barrier under a condition that differs within the block).
extern "C" __global__ void __launch_bounds__(64) divergent_barrier(uint32_t *out) {
	if (fd_warp_id() & 1u) {
		__syncthreads();
		out[0] = 1u;
	} else {
		__syncthreads();
		out[1] = 1u;
	}
}

// exit_then_barrier: the second warp returns while the first waits at a
// barrier.
extern "C" __global__ void __launch_bounds__(64) exit_then_barrier(uint32_t *out) {
	if (threadIdx.x >= 32u) return;
	__syncthreads();
	out[threadIdx.x] = 1u;
}

// flag_race: block 1 raises *flag after a moment while block 0 loops over
// rounds ended by a block barrier, leaving the loop once it sees the flag.
// Read per thread (uniform 0), threads of block 0 that saw the flag wait
// at the barrier after the loop while the others wait at the round's: a
// divergent barrier whenever the flag lands between two threads' reads.
// With the decision made block-uniform (__syncthreads_or) it never is.
extern "C" __global__ void __launch_bounds__(64) flag_race(uint32_t *flag, uint32_t *out, uint32_t uniform) {
	if (blockIdx.x == 1u) {
		if (threadIdx.x == 0u) {
			for (uint32_t i = 0; i < 8u; ++i) fd_nanosleep(1000);
			fd_st_relaxed_gpu(flag, 1u);
		}
		return;
	}
	for (uint32_t round = 0; round < 100000u; ++round) {
		bool stop = fd_ld_relaxed_gpu(flag) != 0u;
		if (uniform) stop = __syncthreads_or(stop) != 0;
		if (stop) break;
		__syncthreads();
	}
	__syncthreads();
	out[threadIdx.x] = 1u;
}
