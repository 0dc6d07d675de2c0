// MoE combine kernels of package a2a/cudabackend: combine-send returns every
// expert output to the rank that sent the copy, straight to the row where
// that rank's combine-recv gathers it (staged in the send buffer for RDMA
// first, then stored into the node ranks' receive buffers); combine-recv
// reduces each token's K rows in fp32, in slot order, each product and
// sum rounded on its own (no fused multiply-add, bit-equal to package
// a2a's Go code), and rounds once into the output type.
#include "a2a_common.cuh"

// a2a_send_copies copies expert outputs of copies [lo, hi), a warp per
// row, the records A2A_PREFETCH rows ahead (a2a_walk_records): to the
// staging row in the own send buffer (remote), or to the row in the
// receive buffer of every replica of the copy's group (node).
__device__ void a2a_send_copies(const a2a_params *p, uint32_t lo, uint32_t hi, bool remote, const uint8_t *y,
                                uint64_t y_stride) {
	const uint32_t lane = fd_lane_id(), wpb = blockDim.x >> 5;
	const uint32_t D = p->replicas, n = p->combine_bytes;
	a2a_walk_records(a2a_records(p), lo, hi, blockIdx.x * wpb + (threadIdx.x >> 5), gridDim.x * wpb, lane,
	                 [&](const fd_v16 &r) {
		uint8_t *dst[8];
		const uint8_t *src = y + (uint64_t)r.y * y_stride;
		if (remote) {
			dst[0] = a2a_crow(p->send, p, r.z);
			a2a_copy(dst, 1, src, n, lane, 32);
			return;
		}
		// D destinations, in batches of up to 8 stores per load: inactive
		// replicas too (their buffers stay mapped and nothing reads them),
		// which keeps the batches free of per-row tests.
		const uint32_t q0 = (r.w >> 12) * D - p->base;
		for (uint32_t b = 0; b < D; b += 8) {
			const uint32_t nd = D - b < 8u ? D - b : 8u;
			for (uint32_t i = 0; i < nd; ++i) dst[i] = a2a_crow(a2a_peer(p->peer_recv, q0 + b + i), p, r.z);
			a2a_copy(dst, nd, src, n, lane, 32);
		}
	});
}

// a2a_combine_send: wait for the dispatch barrier; stage the rows bound
// for other domains and signal the worker (it posts the combine writes);
// store the node rows; publish to the node ranks.
extern "C" __global__ void __launch_bounds__(A2A_THREADS, 1)
a2a_combine_send(const a2a_params *p, const uint8_t *y, uint64_t y_stride, uint64_t timeout_ns) {
	a2a_state *st = a2a_st(p);
	const uint32_t iter = st->iter + 1u, lid = a2a_launch_id(iter, A2A_PHASE_COMBINE_SEND);
	if (!a2a_shape_ok(p, st, A2A_PHASE_COMBINE_SEND, iter)) return;
	// Every rank is done reading what it was sent, and every transfer out
	// of this rank's buffers completed.
	if (threadIdx.x == 0) a2a_wait(p, st, lid, a2a_ctrl(p, A2A_COMBINE_FREE), iter, timeout_ns, A2A_WAIT_COMBINE_FREE, 0);
	const uint32_t *meta = (const uint32_t *)p->meta;
	const uint32_t copies = meta[A2A_META_COPIES], remote = meta[A2A_META_REMOTE_COPIES];
	if (!a2a_block_aborted(st, lid)) a2a_send_copies(p, 0, remote, true, y, y_stride);
	a2a_arrive(st, lid, &st->csend_blocks, a2a_ctrl(p, A2A_CSEND_DONE), iter);
	if (!a2a_block_aborted(st, lid)) a2a_send_copies(p, remote, copies, false, y, y_stride);
	a2a_grid_sync(st, lid, timeout_ns);
	// Block 0 reads the abort state before its thread 0 resets it
	// (a2a_finish); past the last grid barrier no other block reads it.
	const bool ok = blockIdx.x == 0 && !a2a_block_aborted(st, lid); // uniform: a block's threads share blockIdx
	if (blockIdx.x == 0 && threadIdx.x < p->node_size && ok && (a2a_rank_flags(p, p->base + threadIdx.x) & A2A_RANK_ACTIVE)) {
		uint32_t *slot = (uint32_t *)a2a_peer(p->peer_sync, threadIdx.x) + p->node_size + p->me;
		fd_fence_sys();
		fd_st_release_sys(slot, iter);
	}
	if (blockIdx.x == 0 && threadIdx.x == 0) a2a_finish(p, st, A2A_PHASE_COMBINE_SEND, iter);
}

// a2a_decode widens element i of a 16-byte chunk (in words w) of type ct.
// Callers index with constants (loops of fixed length), so the chunk stays
// in registers; the masks keep dead indices in range.
__device__ __forceinline__ float a2a_decode(const uint32_t *w, uint32_t i, uint32_t ct) {
	if (ct == A2A_FP32) return __uint_as_float(w[i & 3u]);
	const uint16_t h = (uint16_t)(w[(i >> 1) & 3u] >> (16u * (i & 1u)));
	return ct == A2A_BF16 ? fd_bf16_to_f32(h) : fd_f16_to_f32(h);
}

// a2a_encode rounds v into element i of a chunk of type ct.
__device__ __forceinline__ void a2a_encode(uint32_t *w, uint32_t i, uint32_t ct, float v) {
	if (ct == A2A_FP32) {
		w[i & 3u] = __float_as_uint(v);
		return;
	}
	const uint32_t h = ct == A2A_BF16 ? fd_f32_to_bf16(v) : fd_f32_to_f16(v);
	const uint32_t sh = 16u * (i & 1u), j = (i >> 1) & 3u;
	w[j] = (w[j] & ~(0xffffu << sh)) | (h << sh);
}

// A2A_REDUCE_GROUP rows of a chunk are loaded together before any is
// reduced, so their loads are in flight at once rather than one round
// trip per row; 8 keeps the 32 loaded words in registers.
#define A2A_REDUCE_GROUP 8u

// a2a_reduce_chunk computes the ne elements of one chunk of a token (at
// most 16 bytes, at byte off of the row): the fp32 sum over the K rows in
// slot order, rounded once into the output. Every loop has a fixed
// length so that the chunk and the sums stay in registers. The rows are
// read a group at a time, all loads first (an inactive rank's null row
// reads zeros through a predicated load, no branch), then reduced in
// slot order, skipping the null rows as before, so the sums and their
// rounding do not depend on the grouping.
__device__ __forceinline__ void a2a_reduce_chunk(const a2a_params *p, uint8_t *const *rows, const float *w,
                                                 uint8_t *out, uint32_t off, uint32_t ne, bool accumulate) {
	const uint32_t K = A2A_K(p), ct = A2A_CT(p), es = ct == A2A_FP32 ? 4u : 2u, nb = ne * es;
	const bool full = nb == 16u, vec = full && a2a_al16(out + off);
	uint32_t c[4] = {0u, 0u, 0u, 0u};
	float acc[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
	if (accumulate) {
		if (vec) {
			fd_v16 v = fd_ld16(out + off);
			c[0] = v.x, c[1] = v.y, c[2] = v.z, c[3] = v.w;
		} else {
			for (uint32_t b = 0; b < 16u; ++b)
				if (b < nb) c[b >> 2] |= (uint32_t)out[off + b] << (8u * (b & 3u));
		}
		for (uint32_t i = 0; i < 8u; ++i)
			if (i < ne) acc[i] = a2a_decode(c, i, ct);
	}
	for (uint32_t k0 = 0; k0 < K; k0 += A2A_REDUCE_GROUP) {
		// The shared row table and weights are read before the first
		// global load: the loads' memory clobber would otherwise order
		// each table read after the previous row's load.
		const uint8_t *src[A2A_REDUCE_GROUP];
		float wk[A2A_REDUCE_GROUP];
#pragma unroll
		for (uint32_t j = 0; j < A2A_REDUCE_GROUP; ++j) {
			const uint8_t *r = k0 + j < K ? rows[k0 + j] : 0;
			src[j] = r != 0 ? r + off : 0;
			wk[j] = k0 + j < K ? w[k0 + j] : 0.0f;
		}
		fd_v16 v[A2A_REDUCE_GROUP];
#pragma unroll
		for (uint32_t j = 0; j < A2A_REDUCE_GROUP; ++j) {
			if (full) {
				v[j] = a2a_ld16_row_or_zero(src[j]); // written by node peers and the NIC during the launch
			} else {
				// The short last chunk of a row: word loads, null rows skipped.
				v[j].x = v[j].y = v[j].z = v[j].w = 0u;
				if (src[j] != 0) {
					const uint32_t *s32 = (const uint32_t *)src[j];
					v[j].x = s32[0];
					if (4u < nb) v[j].y = s32[1];
					if (8u < nb) v[j].z = s32[2];
					if (12u < nb) v[j].w = s32[3];
				}
			}
		}
#pragma unroll
		for (uint32_t j = 0; j < A2A_REDUCE_GROUP; ++j) {
			if (src[j] == 0) continue; // an inactive rank's expert adds nothing
			c[0] = v[j].x, c[1] = v[j].y, c[2] = v[j].z, c[3] = v[j].w;
			for (uint32_t i = 0; i < 8u; ++i)
				if (i < ne) acc[i] = fd_mul_add_f32(acc[i], wk[j], a2a_decode(c, i, ct));
		}
	}
	for (uint32_t i = 0; i < 8u; ++i)
		if (i < ne) a2a_encode(c, i, ct, acc[i]);
	if (vec) {
		fd_v16 v;
		v.x = c[0], v.y = c[1], v.z = c[2], v.w = c[3];
		fd_st16(out + off, v);
	} else {
		for (uint32_t b = 0; b < 16u; ++b)
			if (b < nb) out[off + b] = (uint8_t)(c[b >> 2] >> (8u * (b & 3u)));
	}
}

// a2a_combine_recv: wait for the RDMA rows and the node ranks' rows, then
// reduce every token of this rank (a block per token, 16-byte chunks of
// the row per thread), each of its K rows read from the receive buffer at
// the copy's layout row.
extern "C" __global__ void __launch_bounds__(A2A_THREADS, 1)
a2a_combine_recv(const a2a_params *p, uint8_t *out, uint64_t out_stride, const float *weights, uint32_t accumulate,
                 uint64_t timeout_ns) {
	a2a_state *st = a2a_st(p);
	const uint32_t iter = st->iter + 1u, S = p->node_size, K = A2A_K(p);
	const uint32_t lid = a2a_launch_id(iter, A2A_PHASE_COMBINE_RECV);
	if (!a2a_shape_ok(p, st, A2A_PHASE_COMBINE_RECV, iter)) return;
	if (threadIdx.x == 0) {
		bool ok = p->world == S || a2a_wait(p, st, lid, a2a_ctrl(p, A2A_COMBINE_RDMA), iter, timeout_ns, A2A_WAIT_RDMA_COMBINE, 0);
		for (uint32_t q = 0; ok && q < S; ++q)
			if (a2a_rank_flags(p, p->base + q) & A2A_RANK_ACTIVE)
				ok = a2a_wait(p, st, lid, (uint32_t *)p->sync + S + q, iter, timeout_ns, A2A_WAIT_NODE_COMBINE, q);
	}
	const bool skip = a2a_block_aborted(st, lid);
	__shared__ uint8_t *rows[A2A_MAX_TOPK];
	__shared__ float w[A2A_MAX_TOPK];
	const uint32_t m = st->m, ct = A2A_CT(p), es = ct == A2A_FP32 ? 4u : 2u, epc = 16u / es;
	const uint32_t H = A2A_H(p), full = H / epc;
	for (uint32_t t = blockIdx.x; t < m && !skip; t += gridDim.x) {
		for (uint32_t k = threadIdx.x; k < K; k += blockDim.x) {
			const uint32_t pos = ((const uint32_t *)p->pos)[(uint64_t)t * K + k];
			rows[k] = pos == A2A_POS_DROPPED ? 0 : a2a_crow(p->recv, p, pos);
			w[k] = weights[(uint64_t)t * K + k];
		}
		__syncthreads();
		uint8_t *o = out + (uint64_t)t * out_stride;
		for (uint32_t c = threadIdx.x; c <= full; c += blockDim.x) {
			const uint32_t ne = c < full ? epc : H - full * epc;
			if (ne != 0u) a2a_reduce_chunk(p, rows, w, o, 16u * c, ne, accumulate != 0u);
		}
		__syncthreads();
	}
	a2a_grid_sync(st, lid, timeout_ns);
	if (blockIdx.x == 0 && threadIdx.x == 0) {
		// The iteration is over: the epoch every kernel reads advances.
		st->iter = iter;
		if (!a2a_aborted(st, lid)) {
			fd_fence_sys();
			fd_st_release_sys(a2a_ctrl(p, A2A_CRECV_DONE), iter);
		}
		a2a_finish(p, st, A2A_PHASE_COMBINE_RECV, iter);
	}
}
