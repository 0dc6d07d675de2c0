// MoE dispatch kernels of package a2a/cudabackend: dispatch-send lays out this
// rank's copies (expert-sorted, token-major ordinals), publishes its count
// row for the CPU worker's count exchange, stages every row bound for
// another domain and signals the worker before it stores anything bound
// for its own domain; dispatch-recv copies the node share while RDMA
// still lands, then the RDMA share, into the expert-major output.
#include "a2a_common.cuh"

// a2a_tokens is the token count of a call: m_max, or *bound_m (clamped)
// when the caller keeps it in device memory (CUDA graphs).
__device__ __forceinline__ uint32_t a2a_tokens(uint32_t m_max, const int32_t *bound_m) {
	if (bound_m == 0) return m_max;
	int32_t b = *bound_m;
	return b < 0 ? 0u : ((uint32_t)b < m_max ? (uint32_t)b : m_max);
}

// a2a_mark sets token t's bit in expert e's bitmap; a bit already set is a
// token naming e twice. An or through compare-and-swap keeps the bitmap
// exact either way, so a bad routing never produces an out-of-range row.
__device__ __forceinline__ void a2a_mark(const a2a_params *p, a2a_state *st, uint32_t e, uint32_t t) {
	uint32_t *w = (uint32_t *)p->mask + (uint64_t)e * p->chunks + (t >> 5);
	const uint32_t bit = 1u << (t & 31u);
	uint32_t old = fd_ld_relaxed_gpu(w);
	for (;;) {
		if (old & bit) {
			fd_st_relaxed_gpu(&st->bad, A2A_STATUS_BAD_INDEX);
			return;
		}
		uint32_t got = fd_atomic_cas_gpu(w, old, old | bit);
		if (got == old) return;
		old = got;
	}
}

// a2a_position is the layout row of copy (t, e): the expert's offset plus
// the number of earlier tokens routed to e (token-major ordinals).
__device__ __forceinline__ uint32_t a2a_position(const a2a_params *p, uint32_t e, uint32_t t) {
	const uint64_t cell = (uint64_t)e * p->chunks + (t >> 5);
	const uint32_t below = ((const uint32_t *)p->mask)[cell] & ((1u << (t & 31u)) - 1u);
	return ((const uint32_t *)p->offsets)[e] + ((const uint32_t *)p->prefix)[cell] + __popc(below);
}

// Destinations of one token, by class: rows bound for other domains
// (staged for RDMA), and rows for this domain (staged for self and pull,
// or pushed into a node peer's receive buffer).
struct a2a_dests {
	uint8_t *remote[A2A_MAX_TOPK];
	uint8_t *node[A2A_MAX_TOPK];
	uint32_t nremote, nnode;
};

// a2a_classify fills d for token t (the block's threads < K each take a
// copy) and records every copy's layout row for combine.
__device__ void a2a_classify(const a2a_params *p, a2a_state *st, const uint32_t *indices, uint32_t t,
                             a2a_dests *d, uint8_t *cls) {
	const uint32_t K = A2A_K(p);
	for (uint32_t k = threadIdx.x; k < K; k += blockDim.x) {
		const uint32_t e = indices[(uint64_t)t * K + k];
		uint8_t c = 0;
		uint8_t *row = 0;
		if (e < p->experts) {
			const uint32_t pos = a2a_position(p, e, t);
			const uint32_t q = e / p->local_experts, f = a2a_rank_flags(p, q);
			((uint32_t *)p->pos)[(uint64_t)t * K + k] = (f & A2A_RANK_ACTIVE) ? pos : A2A_POS_DROPPED;
			if (q == p->rank) {
				c = 2, row = a2a_drow(p->send, p, pos);
			} else if (f & A2A_RANK_SERVED) {
				const uint32_t j = pos - ((const uint32_t *)p->offsets)[q * p->local_experts];
				if (q / p->node_size != p->rank / p->node_size) {
					c = 1, row = a2a_drow(p->send, p, pos);
				} else if (j < p->private_rows) {
					c = 2, row = a2a_drow(a2a_peer(p->peer_recv, q - p->base), p, p->group * p->window + j);
				} else {
					c = 2, row = a2a_drow(p->send, p, pos);
				}
			}
		} else {
			fd_st_relaxed_gpu(&st->bad, A2A_STATUS_BAD_INDEX);
		}
		cls[k] = c;
		d->remote[k] = row; // scratch: compacted below
	}
	__syncthreads();
	if (threadIdx.x == 0) {
		uint32_t nr = 0, nn = 0;
		for (uint32_t i = 0; i < K; ++i) {
			uint8_t *row = d->remote[i];
			if (cls[i] == 1) d->remote[nr++] = row;
			else if (cls[i] == 2) d->node[nn++] = row;
		}
		d->nremote = nr;
		d->nnode = nn;
	}
	__syncthreads();
}

// a2a_scales copies token t's scales into the scale slot of each row.
__device__ __forceinline__ void a2a_scales(const a2a_params *p, uint8_t *const *dst, uint32_t nd, const float *scales,
                                           uint64_t s_tok, uint64_t s_elem, uint32_t t) {
	const uint32_t hs = A2A_HS(p), slot = (A2A_TB(p) + 15u) & ~15u;
	for (uint32_t s = threadIdx.x; s < hs; s += blockDim.x) {
		const float v = scales[(uint64_t)t * s_tok + (uint64_t)s * s_elem];
		for (uint32_t i = 0; i < nd; ++i) ((float *)(dst[i] + slot))[s] = v;
	}
}

// a2a_count: layout of this call. Every thread marks its copies in the
// per-expert token bitmaps; block 0 then turns bitmaps into per-chunk
// prefix counts and per-expert counts, scans them into expert offsets and
// writes this rank's count row (counts, then segment starts) into its
// table, and raises the route flag so the worker posts the count exchange
// before any row is packed.
__device__ void a2a_count(const a2a_params *p, a2a_state *st, const uint32_t *indices, uint32_t m, uint32_t iter,
                          uint64_t timeout_ns) {
	const uint32_t K = A2A_K(p), E = p->experts, C = p->chunks, cm = (m + 31u) >> 5;
	const uint32_t lid = a2a_launch_id(iter, A2A_PHASE_DISPATCH_SEND);
	const uint64_t pairs = (uint64_t)m * K;
	for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < pairs; i += (uint64_t)gridDim.x * blockDim.x) {
		const uint32_t e = indices[i];
		if (e < E) a2a_mark(p, st, e, (uint32_t)(i / K));
		else fd_st_relaxed_gpu(&st->bad, A2A_STATUS_BAD_INDEX);
	}
	if (blockIdx.x == 0 && threadIdx.x == 0) {
		st->m = m;
		// The table row and every buffer this launch writes were read by
		// the previous iteration until its combine barrier.
		a2a_wait(p, st, lid, a2a_ctrl(p, A2A_DISPATCH_FREE), iter - 1u, timeout_ns, A2A_WAIT_DISPATCH_FREE, 0);
	}
	a2a_grid_sync(st, lid, timeout_ns);
	const bool aborted = a2a_block_aborted(st, lid);
	if (blockIdx.x != 0 || aborted) return;
	__shared__ uint32_t wsum[33];
	uint32_t *mask = (uint32_t *)p->mask, *pre = (uint32_t *)p->prefix, *off = (uint32_t *)p->offsets;
	uint32_t carry = 0;
	for (uint32_t base = 0; base < E; base += blockDim.x) {
		const uint32_t e = base + threadIdx.x;
		uint32_t n = 0;
		if (e < E) {
			for (uint32_t c = 0; c < cm; ++c) {
				pre[(uint64_t)e * C + c] = n;
				n += __popc(mask[(uint64_t)e * C + c]);
			}
		}
		uint32_t total;
		const uint32_t ex = a2a_block_scan(n, &total, wsum);
		if (e < E) {
			off[e] = carry + ex;
			((uint32_t *)p->table)[(uint64_t)p->group * p->row_words + e] = n;
		}
		carry += total;
	}
	if (threadIdx.x == 0) off[E] = carry;
	__syncthreads();
	uint32_t *seg = (uint32_t *)p->table + (uint64_t)p->group * p->row_words + E;
	for (uint32_t q = threadIdx.x; q <= p->world; q += blockDim.x) {
		const uint32_t e = q * p->local_experts;
		seg[q] = off[e < E ? e : E];
	}
	__syncthreads();
	if (threadIdx.x == 0) {
		fd_fence_sys();
		fd_st_release_sys(a2a_ctrl(p, A2A_ROUTE_DONE), iter);
	}
}

// a2a_dispatch_send: see the file comment. Grid-wide phases: mark
// bitmaps | layout and count row (block 0) | stage RDMA rows, signal |
// node rows | publish to node peers, clear the bitmaps.
extern "C" __global__ void __launch_bounds__(A2A_THREADS, 1)
a2a_dispatch_send(const a2a_params *p, const uint8_t *x, uint64_t x_stride, const float *scales, uint64_t s_tok,
                  uint64_t s_elem, const uint32_t *indices, uint32_t m_max, const int32_t *bound_m,
                  uint64_t timeout_ns) {
	a2a_state *st = a2a_st(p);
	const uint32_t iter = st->iter + 1u, lid = a2a_launch_id(iter, A2A_PHASE_DISPATCH_SEND);
	const uint32_t m = a2a_tokens(m_max, bound_m);
	__shared__ a2a_dests d;
	__shared__ uint8_t cls[A2A_MAX_TOPK];
	if (!a2a_shape_ok(p, st, A2A_PHASE_DISPATCH_SEND, iter)) return;
	a2a_count(p, st, indices, m, iter, timeout_ns);
	a2a_grid_sync(st, lid, timeout_ns);
	const bool skip = a2a_block_aborted(st, lid);
	const uint32_t tb = A2A_TB(p);
#ifdef A2A_TOKEN_BYTES
	// Quick path: a block per token, its chunks held in registers between
	// the RDMA-bound stores and the node stores (one read of the token).
	const uint32_t nch = (A2A_TOKEN_BYTES + 15u) / 16u;
	const uint32_t cpt = (nch + A2A_THREADS - 1u) / A2A_THREADS;
	if (gridDim.x >= m && (A2A_TOKEN_BYTES % 16u) == 0 && a2a_al16(x) && (x_stride & 15u) == 0) {
		const uint32_t t = blockIdx.x;
		const bool mine = t < m && !skip;
		fd_v16 v[(A2A_TOKEN_BYTES / 16u + A2A_THREADS - 1u) / A2A_THREADS];
		if (mine) {
			a2a_classify(p, st, indices, t, &d, cls);
			const uint8_t *src = x + (uint64_t)t * x_stride;
			for (uint32_t r = 0; r < cpt; ++r) {
				const uint32_t c = threadIdx.x + r * A2A_THREADS;
				if (c < nch) v[r] = fd_ld16_nc(src + 16u * c);
			}
			for (uint32_t r = 0; r < cpt; ++r) {
				const uint32_t c = threadIdx.x + r * A2A_THREADS;
				if (c < nch)
					for (uint32_t i = 0; i < d.nremote; ++i) fd_st16(d.remote[i] + 16u * c, v[r]);
			}
			a2a_scales(p, d.remote, d.nremote, scales, s_tok, s_elem, t);
		}
		a2a_arrive(st, lid, &st->send_blocks, a2a_ctrl(p, A2A_SEND_DONE), iter);
		if (mine) {
			for (uint32_t r = 0; r < cpt; ++r) {
				const uint32_t c = threadIdx.x + r * A2A_THREADS;
				if (c < nch)
					for (uint32_t i = 0; i < d.nnode; ++i) fd_st16(d.node[i] + 16u * c, v[r]);
			}
			a2a_scales(p, d.node, d.nnode, scales, s_tok, s_elem, t);
		}
	} else
#endif
	{
		// Strided path: RDMA-bound rows of all the block's tokens first,
		// then (reading each token again) the node rows.
		for (uint32_t t = blockIdx.x; t < m && !skip; t += gridDim.x) {
			a2a_classify(p, st, indices, t, &d, cls);
			a2a_copy(d.remote, d.nremote, x + (uint64_t)t * x_stride, tb, threadIdx.x, blockDim.x);
			a2a_scales(p, d.remote, d.nremote, scales, s_tok, s_elem, t);
			__syncthreads();
		}
		a2a_arrive(st, lid, &st->send_blocks, a2a_ctrl(p, A2A_SEND_DONE), iter);
		for (uint32_t t = blockIdx.x; t < m && !skip; t += gridDim.x) {
			a2a_classify(p, st, indices, t, &d, cls);
			a2a_copy(d.node, d.nnode, x + (uint64_t)t * x_stride, tb, threadIdx.x, blockDim.x);
			a2a_scales(p, d.node, d.nnode, scales, s_tok, s_elem, t);
			__syncthreads();
		}
	}
	a2a_grid_sync(st, lid, timeout_ns);
	// Block 0 reads the abort state before its thread 0 resets it
	// (a2a_finish); past the last grid barrier no other block reads it.
	const bool ok = blockIdx.x == 0 && !a2a_block_aborted(st, lid); // uniform: a block's threads share blockIdx
	// Every row of this rank for its node peers (and itself) is written:
	// publish the epoch into each node rank's sync slot [me].
	if (blockIdx.x == 0 && threadIdx.x < p->node_size && ok && (a2a_rank_flags(p, p->base + threadIdx.x) & A2A_RANK_ACTIVE)) {
		uint32_t *slot = (uint32_t *)a2a_peer(p->peer_sync, threadIdx.x) + p->me;
		fd_fence_sys();
		fd_st_release_sys(slot, iter);
	}
	// Consumer-side reset: clear the bitmaps of this call for the next.
	const uint32_t cm = (m + 31u) >> 5;
	const uint64_t cells = (uint64_t)p->experts * cm;
	for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < cells; i += (uint64_t)gridDim.x * blockDim.x)
		((uint32_t *)p->mask)[(i / cm) * p->chunks + i % cm] = 0u;
	if (blockIdx.x == 0 && threadIdx.x == 0) a2a_finish(p, st, A2A_PHASE_DISPATCH_SEND, iter);
}

// a2a_expand_plan turns the worker's runs (host-mapped) into per-copy
// records in device memory: a block per run (strided), a thread per copy.
__device__ void a2a_expand_plan(const a2a_params *p) {
	const uint32_t *meta = (const uint32_t *)p->meta;
	const uint32_t runs = meta[A2A_META_RUNS];
	const a2a_run *src = (const a2a_run *)(meta + p->meta_runs);
	const uint32_t *starts = meta + p->meta_starts;
	fd_v16 *rec = a2a_records(p);
	__shared__ a2a_run run;
	__shared__ uint32_t start;
	for (uint32_t r = blockIdx.x; r < runs; r += gridDim.x) {
		if (threadIdx.x == 0) {
			run = src[r];
			start = starts[r];
		}
		__syncthreads();
		const uint32_t tag = (uint32_t)run.kind | (uint32_t)run.source << 2 | (uint32_t)run.group << 12;
		for (uint32_t o = threadIdx.x; o < (uint32_t)run.count; o += blockDim.x) {
			fd_v16 v;
			v.x = (uint32_t)run.src_row + o, v.y = (uint32_t)run.padded + o, v.z = (uint32_t)run.combine_row + o, v.w = tag;
			fd_st16(rec + start + o, v);
		}
		__syncthreads();
	}
}

// a2a_recv_copies copies dispatch copies [lo, hi) into the output, a warp
// per row, the records A2A_PREFETCH rows ahead (a2a_walk_records).
__device__ void a2a_recv_copies(const a2a_params *p, uint32_t lo, uint32_t hi, uint8_t *out_x, uint64_t x_stride,
                                float *out_scales, uint64_t s_tok, uint64_t s_elem) {
	const uint32_t lane = fd_lane_id(), wpb = blockDim.x >> 5;
	const uint32_t tb = A2A_TB(p), hs = A2A_HS(p), slot = (tb + 15u) & ~15u;
	a2a_walk_records(a2a_records(p), lo, hi, blockIdx.x * wpb + (threadIdx.x >> 5), gridDim.x * wpb, lane,
	                 [&](const fd_v16 &r) {
		uint64_t buf = p->recv;
		if ((r.w & 3u) == A2A_SRC_OWN_SEND) buf = p->send;
		else if ((r.w & 3u) == A2A_SRC_PEER_SEND) buf = a2a_peer(p->peer_send, (r.w >> 2) & 0x3ffu);
		const uint8_t *src = a2a_drow(buf, p, r.x);
		a2a_copy_out(out_x + (uint64_t)r.y * x_stride, src, tb, lane, 32);
		for (uint32_t s = lane; s < hs; s += 32) out_scales[(uint64_t)r.y * s_tok + s * s_elem] = ((const float *)(src + slot))[s];
	});
}

// a2a_dispatch_recv: wait for the plan and the node ranks' rows, copy the
// node share, wait for the RDMA share, copy it; then the counts.
extern "C" __global__ void __launch_bounds__(A2A_THREADS, 1)
a2a_dispatch_recv(const a2a_params *p, uint8_t *out_x, uint64_t x_stride, float *out_scales, uint64_t s_tok,
                  uint64_t s_elem, int32_t *expert_tokens, int32_t *expert_offsets, uint64_t timeout_ns) {
	a2a_state *st = a2a_st(p);
	const uint32_t iter = st->iter + 1u, S = p->node_size, lid = a2a_launch_id(iter, A2A_PHASE_DISPATCH_RECV);
	if (!a2a_shape_ok(p, st, A2A_PHASE_DISPATCH_RECV, iter)) return;
	if (threadIdx.x == 0) {
		bool ok = a2a_wait(p, st, lid, a2a_ctrl(p, A2A_PLAN_READY), iter, timeout_ns, A2A_WAIT_PLAN, 0);
		for (uint32_t q = 0; ok && q < S; ++q)
			if (a2a_rank_flags(p, p->base + q) & A2A_RANK_ACTIVE)
				ok = a2a_wait(p, st, lid, (uint32_t *)p->sync + q, iter, timeout_ns, A2A_WAIT_NODE_DISPATCH, q);
	}
	if (!a2a_block_aborted(st, lid)) a2a_expand_plan(p);
	a2a_grid_sync(st, lid, timeout_ns);
	const uint32_t *meta = (const uint32_t *)p->meta;
	const uint32_t copies = meta[A2A_META_COPIES], remote = meta[A2A_META_REMOTE_COPIES];
	if (!a2a_block_aborted(st, lid)) a2a_recv_copies(p, remote, copies, out_x, x_stride, out_scales, s_tok, s_elem);
	if (threadIdx.x == 0 && p->nodes > 1u)
		a2a_wait(p, st, lid, a2a_ctrl(p, A2A_DISPATCH_RDMA), iter, timeout_ns, A2A_WAIT_RDMA_DISPATCH, 0);
	const bool skip = a2a_block_aborted(st, lid);
	if (!skip) a2a_recv_copies(p, 0, remote, out_x, x_stride, out_scales, s_tok, s_elem);
	if (blockIdx.x == 0 && !skip) {
		const int32_t *tpe = (const int32_t *)(meta + A2A_META_HEADER);
		const uint32_t L = p->local_experts;
		for (uint32_t i = threadIdx.x; i <= L; i += blockDim.x) {
			if (i < L) expert_tokens[i] = tpe[i];
			if (expert_offsets != 0) expert_offsets[i] = tpe[L + i];
		}
	}
	a2a_grid_sync(st, lid, timeout_ns);
	if (blockIdx.x == 0 && threadIdx.x == 0) {
		if (!a2a_aborted(st, lid)) {
			fd_fence_sys();
			fd_st_release_sys(a2a_ctrl(p, A2A_DRECV_DONE), iter);
		}
		a2a_finish(p, st, A2A_PHASE_DISPATCH_RECV, iter);
	}
}
