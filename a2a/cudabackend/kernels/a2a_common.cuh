// Shared definitions of the a2a kernels (a2a_dispatch.cu, a2a_combine.cu),
// pasted in place of their #include by the loader (package a2a/cudabackend), so
// each kernel file is one translation unit for NVRTC and for the CPU
// emulator alike. Everything device-specific goes through ferry_device.h.
//
// Layouts shared with Go (a2a/cudabackend/params.go) are plain structs of 64-bit
// addresses and 32-bit words; a2a_probe reports their sizes and offsets so
// the backend refuses to run against a mismatched build.
#ifndef FERRY_A2A_COMMON_CUH
#define FERRY_A2A_COMMON_CUH

// Threads per block; the backend launches exactly this many.
#ifndef A2A_THREADS
#define A2A_THREADS 512
#endif
#define A2A_WARPS (A2A_THREADS / 32)
// Most experts per token (a2a.MaxExpertsPerTok).
#define A2A_MAX_TOPK 256

// Specialisation: a define fixes a value at compile time, otherwise the
// kernels read it from the parameters (the generic path).
#ifdef A2A_TOKEN_BYTES
#define A2A_TB(p) ((uint32_t)A2A_TOKEN_BYTES)
#else
#define A2A_TB(p) ((p)->token_bytes)
#endif
#ifdef A2A_SCALES
#define A2A_HS(p) ((uint32_t)A2A_SCALES)
#else
#define A2A_HS(p) ((p)->scales)
#endif
#ifdef A2A_TOPK
#define A2A_K(p) ((uint32_t)A2A_TOPK)
#else
#define A2A_K(p) ((p)->topk)
#endif
#ifdef A2A_HIDDEN
#define A2A_H(p) ((uint32_t)A2A_HIDDEN)
#else
#define A2A_H(p) ((p)->hidden)
#endif
#ifdef A2A_COMBINE_TYPE
#define A2A_CT(p) ((uint32_t)A2A_COMBINE_TYPE)
#else
#define A2A_CT(p) ((p)->combine_type)
#endif

// Combine element types: the values of a2a.DType.
#define A2A_BF16 2u
#define A2A_FP16 3u
#define A2A_FP32 4u

// Control block words (host-mapped; one 64-byte line per slot). Epochs
// count iterations from 1 and only grow, so nobody ever clears them and a
// captured graph replays without host help.
#define A2A_SLOT_WORDS 16
#define A2A_ROUTE_DONE 0     // kernel -> worker: this rank's count row is in its table
#define A2A_SEND_DONE 1      // kernel -> worker: RDMA-bound rows are staged
#define A2A_DRECV_DONE 2     // kernel -> worker: dispatch receive finished
#define A2A_CSEND_DONE 3     // kernel -> worker: RDMA-bound combine rows are staged
#define A2A_CRECV_DONE 4     // kernel -> worker: combine receive finished
#define A2A_DISPATCH_FREE 5  // worker -> kernel: combine barrier passed, buffers free
#define A2A_PLAN_READY 6     // worker -> kernel: the receive plan is in the metadata
#define A2A_COMBINE_FREE 7   // worker -> kernel: dispatch barrier passed
#define A2A_DISPATCH_RDMA 8  // engine -> kernel: every dispatch immediate arrived
#define A2A_COMBINE_RDMA 9   // engine -> kernel: every combine immediate arrived
#define A2A_STATUS 10        // + phase: code, what, peer, epoch
#define A2A_WORKER_FAILED 14 // worker -> kernel: the worker failed (a rank lost): waits give up at once

#define A2A_PHASE_DISPATCH_SEND 0
#define A2A_PHASE_DISPATCH_RECV 1
#define A2A_PHASE_COMBINE_SEND 2
#define A2A_PHASE_COMBINE_RECV 3

// Status codes beyond the header's OK and TIMEOUT.
#define A2A_STATUS_BAD_INDEX 3u  // an expert id >= E, or twice in one token
#define A2A_STATUS_BAD_SHAPE 4u  // launched with a block size or parameters this build cannot run

// What a timed-out wait was for (a2a/cudabackend.Awaited).
#define A2A_WAIT_DISPATCH_FREE 1u
#define A2A_WAIT_PLAN 2u
#define A2A_WAIT_NODE_DISPATCH 3u
#define A2A_WAIT_RDMA_DISPATCH 4u
#define A2A_WAIT_COMBINE_FREE 5u
#define A2A_WAIT_NODE_COMBINE 6u
#define A2A_WAIT_RDMA_COMBINE 7u
#define A2A_WAIT_GRID 8u // the other blocks at a grid barrier (peer: the block that gave up)

// Receive-plan metadata (host-mapped, written by the worker): a header,
// tokens per local expert, padded expert offsets, then the runs and the
// exclusive prefix of their counts (where each run's copies start).
#define A2A_META_RUNS 0
#define A2A_META_REMOTE_RUNS 1
#define A2A_META_COPIES 2
#define A2A_META_REMOTE_COPIES 3
#define A2A_META_HEADER 16

// Sources of a run (a2a.Source).
#define A2A_SRC_OWN_SEND 1
#define A2A_SRC_OWN_RECV 2
#define A2A_SRC_PEER_SEND 3

struct a2a_run {
	int32_t src_row, padded, combine_row, count;
	int32_t kind, source, group, pad; // source: node-local index of the sending rank
};

struct a2a_params {
	uint64_t send, recv;                       // own transport buffers
	uint64_t peer_send, peer_recv, peer_sync;  // -> uint64_t[S]: node ranks' buffers and sync slots
	uint64_t sync;                             // own sync slots: [0,S) dispatch, [S,2S) combine
	uint64_t table;                            // count table, G rows of row_words (host-mapped)
	uint64_t ctrl;                             // control block (host-mapped)
	uint64_t meta;                             // receive plan (host-mapped)
	uint64_t dmeta;                            // per-copy receive records (fd_v16 each)
	uint64_t state;                            // struct a2a_state
	uint64_t mask, prefix;                     // [E][chunks] token bitmaps and their prefix counts
	uint64_t offsets;                          // [E+1] exclusive prefix of the per-expert counts
	uint64_t pos;                              // [T*K] layout row of every copy (A2A_POS_DROPPED: none)
	uint64_t ranks;                            // [W] uint8 A2A_RANK_* flags: the active ranks (a2a.Members)
	uint32_t rank, world, node_size, replicas, groups, nodes;
	uint32_t local_experts, experts, topk, max_tokens, chunks, hidden;
	uint32_t private_rows, window, token_bytes, scales, combine_bytes;
	uint32_t dispatch_stride, combine_stride;  // row strides of the transport buffers in each phase
	uint32_t combine_type, row_words, me, base, group, replica;
	uint32_t max_runs, meta_runs, meta_starts, pad0, threads;  // pad0: 8-byte size, threads last
};

// Per-rank flags (a2a.Members), rewritten by the backend at each
// membership change: SERVED, this rank stages or pushes the rows bound for
// the rank (itself included); ACTIVE, the rank takes part. Copies for an
// inactive rank's experts are dropped: not sent, and combine leaves their
// slot out (their pos is A2A_POS_DROPPED).
#define A2A_RANK_SERVED 1u
#define A2A_RANK_ACTIVE 2u
#define A2A_POS_DROPPED 0xffffffffu

__device__ __forceinline__ uint32_t a2a_rank_flags(const a2a_params *p, uint32_t q) {
	return ((const uint8_t *)p->ranks)[q];
}

struct a2a_state {
	uint32_t iter, m, pad0[14];
	uint32_t abort, what, peer, bad, pad1[12];
	uint32_t send_blocks, pad2[15];
	uint32_t csend_blocks, pad3[15];
	fd_grid_barrier barrier;
};

__device__ __forceinline__ uint32_t *a2a_ctrl(const a2a_params *p, uint32_t slot) {
	return (uint32_t *)p->ctrl + slot * A2A_SLOT_WORDS;
}

__device__ __forceinline__ a2a_state *a2a_st(const a2a_params *p) { return (a2a_state *)p->state; }

// Epochs wrap; compare them as a signed distance.
__device__ __forceinline__ bool a2a_reached(uint32_t v, uint32_t want) { return (int32_t)(v - want) >= 0; }

// Launch ids: every launch of a context has its own, growing (four per
// iteration; 2^30 iterations before they wrap), and the abort word holds
// the id of the last launch that aborted. Nothing ever clears it: a block
// still running after its grid gave up on it (a timed-out grid barrier)
// may read it while block 0 finishes, so a reset could not be ordered.
__device__ __forceinline__ uint32_t a2a_launch_id(uint32_t iter, uint32_t phase) { return iter * 4u + phase; }

// a2a_aborted reads whether launch lid aborted. Another block may abort it
// at any moment, so two threads of a block can read different answers:
// only a single thread may act on it (a2a_wait, a2a_arrive). Code that
// every thread of a block runs, and that contains block barriers or warp
// collectives, decides with a2a_block_aborted instead.
__device__ __forceinline__ bool a2a_aborted(a2a_state *st, uint32_t lid) { return fd_ld_relaxed_gpu(&st->abort) == lid; }

// a2a_block_aborted: one answer for the whole block (true if any of its
// threads saw the flag), taken at a block barrier, so every thread of the
// block follows the same path through the barriers after it. Every thread
// of the block must call it.
__device__ __forceinline__ bool a2a_block_aborted(a2a_state *st, uint32_t lid) {
	return __syncthreads_or(a2a_aborted(st, lid)) != 0;
}

// a2a_abort records the first timed-out wait of a launch. The kernel then
// runs to its end without waiting or signalling any more, so the grid
// never hangs, and the last block reports the status.
__device__ __forceinline__ void a2a_abort(a2a_state *st, uint32_t lid, uint32_t what, uint32_t peer) {
	if (fd_atomic_max_gpu(&st->abort, lid) != lid) {
		st->what = what;
		st->peer = peer;
	}
}

// a2a_wait: one thread waits until *flag reaches want, the launch's
// timeout passes or the worker failed (then it aborts the launch: a flag
// the worker raises, or one its peers' writes raise, will not come), or
// another wait aborted it.
__device__ bool a2a_wait(const a2a_params *p, a2a_state *st, uint32_t lid, uint32_t *flag, uint32_t want,
                         uint64_t timeout_ns, uint32_t what, uint32_t peer) {
	if (a2a_aborted(st, lid)) return false;
	if (a2a_reached(fd_ld_acquire_sys(flag), want)) return true;
	uint64_t t0 = fd_globaltimer_ns();
	for (;;) {
		fd_nanosleep(128);
		if (a2a_reached(fd_ld_acquire_sys(flag), want)) return true;
		if (a2a_aborted(st, lid)) return false;
		if (fd_globaltimer_ns() - t0 > timeout_ns || fd_ld_relaxed_sys(a2a_ctrl(p, A2A_WORKER_FAILED)) != 0u) {
			a2a_abort(st, lid, what, peer);
			return false;
		}
	}
}

// a2a_grid_sync: the grid barrier of the kernels, bounded by the launch's
// timeout. Blocks that are not all resident (a grid above occupancy, or
// another kernel holding the SMs) never gather: the barrier then gives up,
// the launch aborts naming the wait, and the kernel ends with a timeout
// status instead of hanging. Every thread of every block calls it.
__device__ __forceinline__ void a2a_grid_sync(a2a_state *st, uint32_t lid, uint64_t timeout_ns) {
	if (!fd_grid_sync_for(&st->barrier, timeout_ns) && threadIdx.x == 0) a2a_abort(st, lid, A2A_WAIT_GRID, blockIdx.x);
}

// a2a_finish: block 0, thread 0, after the launch's last grid barrier:
// publish the status of the launch and reset its bad-input state.
__device__ __forceinline__ void a2a_finish(const a2a_params *p, a2a_state *st, uint32_t phase, uint32_t iter) {
	uint32_t *s = a2a_ctrl(p, A2A_STATUS + phase);
	uint32_t code = FD_STATUS_OK, what = 0u, peer = 0u;
	if (fd_ld_relaxed_gpu(&st->abort) == a2a_launch_id(iter, phase)) {
		code = FD_STATUS_TIMEOUT;
		what = st->what;
		peer = st->peer;
	} else if (st->bad) {
		code = st->bad;
	}
	st->bad = 0u;
	fd_st_relaxed_sys(&s[1], what);
	fd_st_relaxed_sys(&s[2], peer);
	fd_st_relaxed_sys(&s[3], iter);
	fd_fence_sys();
	fd_st_release_sys(&s[0], code);
}

// a2a_shape_ok checks that the launch matches what this build was
// specialised for (block size, compile-time shape). The answer is the same
// for every thread of the grid, so a mismatched launch ends at once, all
// blocks alike, with block 0 reporting A2A_STATUS_BAD_SHAPE.
__device__ __forceinline__ bool a2a_shape_ok(const a2a_params *p, a2a_state *st, uint32_t phase, uint32_t iter) {
	const bool ok = blockDim.x == A2A_THREADS && p->threads == A2A_THREADS && A2A_K(p) == p->topk &&
	                A2A_TB(p) == p->token_bytes && A2A_HS(p) == p->scales &&
	                A2A_H(p) == p->hidden && A2A_CT(p) == p->combine_type && p->topk <= A2A_MAX_TOPK;
	if (!ok && blockIdx.x == 0 && threadIdx.x == 0) {
		st->bad = A2A_STATUS_BAD_SHAPE;
		a2a_finish(p, st, phase, iter);
	}
	return ok;
}

// a2a_arrive: the "last block signals" pattern. Every block calls it once
// after its share of some work; the last to arrive resets the counter and
// publishes iter to the worker's flag, after a system fence so the CPU
// and the NIC see every byte the blocks wrote before arriving.
__device__ __forceinline__ void a2a_arrive(a2a_state *st, uint32_t lid, uint32_t *counter, uint32_t *flag, uint32_t iter) {
	__syncthreads();
	if (threadIdx.x == 0) {
		fd_fence_sys();
		if (fd_atomic_add_gpu(counter, 1u) == gridDim.x - 1u) {
			fd_fence_sys();
			fd_st_relaxed_gpu(counter, 0u);
			if (!a2a_aborted(st, lid)) fd_st_release_sys(flag, iter);
		}
	}
}

// a2a_block_scan returns the exclusive prefix of v over the block's
// threads and sets *total; every thread of the block must call it.
__device__ __forceinline__ uint32_t a2a_block_scan(uint32_t v, uint32_t *total, uint32_t *wsum) {
	const uint32_t lane = fd_lane_id(), warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
	uint32_t inc = v;
	for (uint32_t d = 1; d < 32; d <<= 1) {
		uint32_t y = __shfl_up_sync(0xffffffffu, inc, d);
		if (lane >= d) inc += y;
	}
	if (lane == 31) wsum[warp] = inc;
	__syncthreads();
	if (warp == 0) {
		uint32_t w = lane < nw ? wsum[lane] : 0u, winc = w;
		for (uint32_t d = 1; d < 32; d <<= 1) {
			uint32_t y = __shfl_up_sync(0xffffffffu, winc, d);
			if (lane >= d) winc += y;
		}
		if (lane < nw) wsum[lane] = winc - w;
		if (lane == 31) wsum[32] = winc;
	}
	__syncthreads();
	uint32_t excl = wsum[warp] + inc - v;
	*total = wsum[32];
	__syncthreads();
	return excl;
}

// a2a_ld16_row loads 16 bytes of a transport row that node peers or the
// NIC wrote during this launch (the kernel acquired their flag first).
// The non-coherent path (ld.global.nc) is defined only for memory that
// no one writes while the kernel runs; Hopper reads such rows correctly
// through it in practice and gains from it, so builds for sm_90 take it
// when the backend defines A2A_NC_PEER_LOADS (it does for compute
// capability 9.0 only); every other build uses an ordinary load, which
// the acquire orders after the writers' data.
#ifdef A2A_NC_PEER_LOADS
#define a2a_ld16_row(p) fd_ld16_nc(p)
#define a2a_ld16_row_or_zero(p) fd_ld16_nc_or_zero(p)
#else
#define a2a_ld16_row(p) fd_ld16(p)
#define a2a_ld16_row_or_zero(p) fd_ld16_or_zero(p)
#endif

__device__ __forceinline__ bool a2a_al16(const void *a) { return ((uint64_t)a & 15u) == 0u; }
__device__ __forceinline__ bool a2a_al4(const void *a) { return ((uint64_t)a & 3u) == 0u; }

// a2a_copy copies n bytes from src to nd destinations (each 16-byte
// aligned), by the threads i, i+step, ... of a team. src is the caller's
// input (tokens, expert outputs), which nobody writes while the kernel
// runs: read through the non-coherent path. 16-byte vectors when
// src allows, four independent loads in flight per thread; words or bytes
// otherwise. Only n bytes are read and written.
__device__ __forceinline__ void a2a_copy(uint8_t *const *dst, uint32_t nd, const uint8_t *src, uint32_t n,
                                         uint32_t i, uint32_t step) {
	uint32_t done = 0;
	if (a2a_al16(src)) {
		const uint32_t n16 = n >> 4;
		uint32_t c = i;
		for (; c + 3 * step < n16; c += 4 * step) {
			fd_v16 v0 = fd_ld16_nc(src + 16 * c), v1 = fd_ld16_nc(src + 16 * (c + step));
			fd_v16 v2 = fd_ld16_nc(src + 16 * (c + 2 * step)), v3 = fd_ld16_nc(src + 16 * (c + 3 * step));
			for (uint32_t d = 0; d < nd; ++d) {
				fd_st16(dst[d] + 16 * c, v0);
				fd_st16(dst[d] + 16 * (c + step), v1);
				fd_st16(dst[d] + 16 * (c + 2 * step), v2);
				fd_st16(dst[d] + 16 * (c + 3 * step), v3);
			}
		}
		for (; c < n16; c += step) {
			fd_v16 v = fd_ld16_nc(src + 16 * c);
			for (uint32_t d = 0; d < nd; ++d) fd_st16(dst[d] + 16 * c, v);
		}
		done = n16 << 4;
	} else if (a2a_al4(src)) {
		const uint32_t n4 = n >> 2;
		for (uint32_t c = i; c < n4; c += step) {
			uint32_t v = ((const uint32_t *)src)[c];
			for (uint32_t d = 0; d < nd; ++d) ((uint32_t *)dst[d])[c] = v;
		}
		done = n4 << 2;
	}
	for (uint32_t b = done + i; b < n; b += step) {
		uint8_t v = src[b];
		for (uint32_t d = 0; d < nd; ++d) dst[d][b] = v;
	}
}

// a2a_copy_out copies n bytes from a transport row (16-byte aligned) to
// caller memory of any alignment.
__device__ __forceinline__ void a2a_copy_out(uint8_t *dst, const uint8_t *src, uint32_t n, uint32_t i,
                                             uint32_t step) {
	uint32_t done = 0;
	if (a2a_al16(dst)) {
		const uint32_t n16 = n >> 4;
		for (uint32_t c = i; c < n16; c += step) fd_st16(dst + 16 * c, a2a_ld16_row(src + 16 * c));
		done = n16 << 4;
	} else if (a2a_al4(dst)) {
		const uint32_t n4 = n >> 2;
		for (uint32_t c = i; c < n4; c += step) ((uint32_t *)dst)[c] = ((const uint32_t *)src)[c];
		done = n4 << 2;
	}
	for (uint32_t b = done + i; b < n; b += step) dst[b] = src[b];
}

// Per-copy receive records, expanded from the runs into device memory by
// dispatch-recv (a2a_expand_plan) and read by it and by combine-send: one
// 16-byte load per row instead of a search through the runs.
//   x: source row, y: output (padded) row, z: combine row,
//   w: kind | node-local source << 2 | group << 12
__device__ __forceinline__ fd_v16 *a2a_records(const a2a_params *p) { return (fd_v16 *)p->dmeta; }

// A2A_PREFETCH is how many rows ahead a warp holds the records of the
// rows it copies: the records of its next A2A_PREFETCH rows sit one per
// lane in lanes 0..A2A_PREFETCH-1, loaded while the batch before them is
// copied, and each row's record is broadcast from its lane by shuffles, so
// a row's copy never waits for its record's load.
#define A2A_PREFETCH 8

// a2a_walk_records calls row(r) with the record of every copy c in
// [lo, hi) that this warp owns (c = lo + warp, lo + warp + nw, ..., nw
// warps in the grid), in that order. Every lane of the warp must call it.
template <typename F>
__device__ __forceinline__ void a2a_walk_records(const fd_v16 *rec, uint32_t lo, uint32_t hi, uint32_t warp,
                                                 uint32_t nw, uint32_t lane, F row) {
	const uint32_t batch = A2A_PREFETCH * nw;
	fd_v16 cur, next;
	cur.x = cur.y = cur.z = cur.w = 0u;
	next = cur;
	uint32_t c = lo + warp;
	if (lane < A2A_PREFETCH && c + lane * nw < hi) cur = fd_ld16(rec + c + lane * nw);
	for (; c < hi; c += batch) {
		const uint32_t ahead = c + batch + lane * nw;
		if (lane < A2A_PREFETCH && ahead < hi) next = fd_ld16(rec + ahead);
#pragma unroll 1
		for (uint32_t k = 0; k < A2A_PREFETCH && c + k * nw < hi; ++k) {
			fd_v16 r;
			r.x = __shfl_sync(0xffffffffu, cur.x, k);
			r.y = __shfl_sync(0xffffffffu, cur.y, k);
			r.z = __shfl_sync(0xffffffffu, cur.z, k);
			r.w = __shfl_sync(0xffffffffu, cur.w, k);
			row(r);
		}
		cur = next;
	}
}

// a2a_drow returns dispatch row r of a transport buffer, a2a_crow combine
// row r: each phase lays its rows at its own stride, so the CPU proxy's
// writes carry a phase's rows without padding to the other's size.
__device__ __forceinline__ uint8_t *a2a_drow(uint64_t buf, const a2a_params *p, uint32_t r) {
	return (uint8_t *)(buf + (uint64_t)r * p->dispatch_stride);
}

__device__ __forceinline__ uint8_t *a2a_crow(uint64_t buf, const a2a_params *p, uint32_t r) {
	return (uint8_t *)(buf + (uint64_t)r * p->combine_stride);
}

__device__ __forceinline__ uint64_t a2a_peer(uint64_t table, uint32_t i) { return ((const uint64_t *)table)[i]; }

// a2a_probe writes the sizes and a few offsets of the shared structs, so
// the Go side can check that it lays them out the same way.
extern "C" __global__ void __launch_bounds__(32) a2a_probe(uint32_t *out) {
	if (threadIdx.x != 0 || blockIdx.x != 0) return;
	a2a_params p;
	a2a_state s;
	out[0] = (uint32_t)sizeof(a2a_params);
	out[1] = (uint32_t)((uint8_t *)&p.rank - (uint8_t *)&p);
	out[2] = (uint32_t)((uint8_t *)&p.threads - (uint8_t *)&p);
	out[3] = (uint32_t)sizeof(a2a_state);
	out[4] = (uint32_t)((uint8_t *)&s.barrier - (uint8_t *)&s);
	out[5] = (uint32_t)sizeof(a2a_run);
	out[6] = A2A_THREADS;
}

#endif // FERRY_A2A_COMMON_CUH
