/*
 * a2a.c: MoE dispatch and combine through the C ABI, with every result
 * checked against rows this program computes itself.
 *
 * Two ranks run as two threads of this process (an explicit world named
 * by world_name, each rank with its own engine over the in-process "mem"
 * transport), or as two processes (see Usage). For each of three worlds (rdma: two domains of one rank, fp8
 * tokens with scales, bf16 combine, expert padding, a small private
 * window; node: one domain of two ranks, the batched expert layout, bf16
 * tokens, fp32 combine; overflow: the batched layout over its bound), the
 * ranks run iterations of
 *   dispatch (whole, or split into send and receive halves), checked row
 *     by row: counts, tokens, scales, and untouched padding rows;
 *   an "expert" computing y from each received row;
 *   combine (whole or split, plain or accumulating), checked bit for bit
 *     against sum_k w * y in fp32 rounded once.
 * Rank 0 uses bound_m to dispatch fewer tokens than its dp_x holds. Before
 * the first iteration rank 0 passes bad arguments (wrong shape, dtype,
 * sizes, NULL, calls out of order, device memory, a stream) and each must
 * fail with its code and a message naming the argument, changing nothing.
 * The overflow world checks that both ranks get FERRY_E_EXPERT_OVERFLOW,
 * that the context is broken, and that ferry_a2a_set_active revives it.
 *
 * Usage: a2a host|cuda-emu [transport | --cuda-memory]. With
 * --cuda-memory every tensor is passed as FERRY_MEMORY_CUDA, which the
 * library stages through host memory with the CUDA driver's copies (the
 * test runs it against the fake libcuda, whose device pointers are host
 * memory). With a transport, the program is
 * one rank of a two-process job launched as ranks.c is (torchrun, mpirun,
 * or FERRY_* variables): the world is its bootstrap group, each rank a
 * process, and an NVLink domain of two shares memory between processes.
 * Prints "a2a <backend>: ok" (one line per rank in process mode).
 */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

#define W 2
#define MAXK 4

struct world {
	const char *name;
	int32_t nvlink, T, H, Hs, E, K, pad, private_tokens, batched;
	int32_t dispatch_dtype, combine_dtype;
	int overflow; /* route everything to experts 0..K-1 over a bound of 3 */
};

static const struct world worlds[] = {
	{"rdma", 1, 6, 24, 3, 8, 3, 4, 2, 0, FERRY_DTYPE_FP8, FERRY_DTYPE_BF16, 0},
	{"node", 2, 5, 16, 0, 6, 2, 1, 0, 2 * 5, FERRY_DTYPE_BF16, FERRY_DTYPE_FP32, 0},
	{"overflow", 2, 5, 8, 0, 4, 2, 1, 0, 3, FERRY_DTYPE_FP32, FERRY_DTYPE_FP32, 1},
};

static int backend;
static const char *backend_name;
/* Process mode: the world is the bootstrap group, over this transport. */
static ferry_group_t group;
static const char *transport = "mem";
/* Which memory the tensors say they are in (--cuda-memory: CUDA). */
static int32_t mem_kind = FERRY_MEMORY_HOST;

/* ---------------------------------------------------------------- values */

static size_t esize(int32_t dtype) {
	switch (dtype) {
	case FERRY_DTYPE_FP8: return 1;
	case FERRY_DTYPE_BF16: return 2;
	default: return 4;
	}
}

static uint16_t to_bf16(float f) { /* round to nearest even */
	uint32_t u;
	memcpy(&u, &f, 4);
	u += 0x7fff + ((u >> 16) & 1);
	return (uint16_t)(u >> 16);
}

static float from_bf16(uint16_t h) {
	uint32_t u = (uint32_t)h << 16;
	float f;
	memcpy(&f, &u, 4);
	return f;
}

static float load(int32_t dtype, const uint8_t *p, size_t i) {
	switch (dtype) {
	case FERRY_DTYPE_FP8: return (float)(p[i] % 8);
	case FERRY_DTYPE_BF16: {
		uint16_t h;
		memcpy(&h, p + 2 * i, 2);
		return from_bf16(h);
	}
	default: {
		float f;
		memcpy(&f, p + 4 * i, 4);
		return f;
	}
	}
}

static void store(int32_t dtype, uint8_t *p, size_t i, float v) {
	if (dtype == FERRY_DTYPE_BF16) {
		uint16_t h = to_bf16(v);
		memcpy(p + 2 * i, &h, 2);
	} else {
		memcpy(p + 4 * i, &v, 4);
	}
}

/* The inputs of group (= rank) h in iteration it, the same on every rank:
 * token bytes, scales, the K distinct experts and the gate weights. */
static uint8_t token_byte(int h, int it, int t, int c) { return (uint8_t)(h * 53 + it * 29 + t * 17 + c * 3 + 1); }
static float scale_of(int h, int t, int s) { return (float)(h * 100 + t * 10 + s) + 0.5f; }
static int32_t expert_of(const struct world *wd, int h, int it, int t, int k) {
	if (wd->overflow)
		return k;
	return (h * 3 + it * 5 + t * 7 + k * 5) % wd->E; /* step 5, E coprime: K distinct ids */
}
static float weight_of(int h, int t, int k) { return 0.25f * (float)((h + t + k) % 4 + 1); }
static int tokens_of(const struct world *wd, int h) { return h == 0 ? wd->T - 1 : wd->T; } /* m */

static void fill_x(const struct world *wd, int h, int it, uint8_t *x) {
	size_t es = esize(wd->dispatch_dtype);
	for (int t = 0; t < wd->T; t++)
		for (int c = 0; c < wd->H; c++) {
			uint8_t b = token_byte(h, it, t, c);
			if (es == 1)
				x[(size_t)t * wd->H + c] = b;
			else
				store(wd->dispatch_dtype, x, (size_t)t * wd->H + c, (float)(b % 8));
		}
}

/* The expert: y = x + local expert index, element by element. */
static float expert_fn(const struct world *wd, const uint8_t *row, int c, int local) {
	return load(wd->dispatch_dtype, row, (size_t)c) + (float)local;
}

/* ---------------------------------------------------------------- tensors */

static ferry_tensor tensor(void *data, size_t nbytes, int32_t dtype, int ndim, int64_t d0, int64_t d1, int64_t d2) {
	ferry_tensor t;
	memset(&t, 0, sizeof t);
	t.data = data;
	t.nbytes = nbytes;
	t.dtype = dtype;
	t.ndim = ndim;
	t.shape[0] = d0;
	t.shape[1] = d1;
	t.shape[2] = d2;
	t.memory = mem_kind;
	return t;
}

/* ---------------------------------------------------------------- a rank */

struct rank {
	const struct world *wd;
	int r;
	ferry_a2a_t a;
	ferry_a2a_info info;
	int failed_overflow;
};

static pthread_barrier_t ready;

static void bad_inputs(struct rank *rk, ferry_tensor *counts, ferry_tensor *ox, ferry_tensor *os, ferry_tensor *x,
                       ferry_tensor *xs, ferry_tensor *idx, ferry_tensor *w) {
	const struct world *wd = rk->wd;
	ferry_a2a_t a = rk->a;
	const ferry_tensor *osp = wd->Hs ? os : NULL, *xsp = wd->Hs ? xs : NULL;
	ferry_tensor t;

	t = *x;
	t.shape[1] = wd->H + 1;
	expect_err(ferry_a2a_dispatch(a, counts, ox, osp, &t, xsp, idx, w, NULL, 1, 1, 0, TIMEOUT_MS), FERRY_E_INVALID,
	           "dp_x");
	t = *x;
	t.dtype = wd->dispatch_dtype == FERRY_DTYPE_FP32 ? FERRY_DTYPE_INT32 : FERRY_DTYPE_FP32;
	expect_err(ferry_a2a_dispatch(a, counts, ox, osp, &t, xsp, idx, w, NULL, 1, 1, 0, TIMEOUT_MS), FERRY_E_INVALID,
	           "dp_x: dtype");
	t = *x;
	t.nbytes -= 1;
	expect_err(ferry_a2a_dispatch(a, counts, ox, osp, &t, xsp, idx, w, NULL, 1, 1, 0, TIMEOUT_MS), FERRY_E_INVALID,
	           "nbytes");
	expect_err(ferry_a2a_dispatch(a, counts, ox, osp, x, xsp, NULL, w, NULL, 1, 1, 0, TIMEOUT_MS), FERRY_E_INVALID,
	           "indices: NULL");
	/* Token rows move as contiguous bytes: a strided inner dimension is
	 * refused (checked before any byte is read: nbytes only claims room). */
	t = *x;
	t.nbytes *= 4;
	t.strides[0] = 2 * wd->H;
	t.strides[1] = 2;
	expect_err(ferry_a2a_dispatch(a, counts, ox, osp, &t, xsp, idx, w, NULL, 1, 1, 0, TIMEOUT_MS), FERRY_E_INVALID,
	           "dp_x: inner stride 2");
	t = *ox;
	t.nbytes *= 4;
	t.strides[t.ndim - 1] = 2;
	t.strides[t.ndim - 2] = 2 * wd->H;
	if (t.ndim == 3)
		t.strides[0] = 2 * wd->H * wd->batched;
	expect_err(ferry_a2a_dispatch(a, counts, &t, osp, x, xsp, idx, w, NULL, 1, 1, 0, TIMEOUT_MS), FERRY_E_INVALID,
	           "out_expert_x: inner stride 2");
	t = *idx;
	t.dtype = FERRY_DTYPE_FP32;
	expect_err(ferry_a2a_dispatch(a, counts, ox, osp, x, xsp, &t, w, NULL, 1, 1, 0, TIMEOUT_MS), FERRY_E_INVALID,
	           "indices: dtype");
	t = *ox;
	t.nbytes /= 2;
	expect_err(ferry_a2a_dispatch(a, counts, &t, osp, x, xsp, idx, w, NULL, 1, 1, 0, TIMEOUT_MS), FERRY_E_INVALID,
	           "out_expert_x");
	t = *counts;
	t.shape[0] += 1;
	expect_err(ferry_a2a_dispatch(a, &t, ox, osp, x, xsp, idx, w, NULL, 1, 1, 0, TIMEOUT_MS), FERRY_E_INVALID,
	           "out_expert_num_tokens");
	if (wd->batched) {
		/* The flat shape where the batched one is due. */
		t = *ox;
		t.ndim = 2;
		t.shape[0] = rk->info.output_rows;
		t.shape[1] = wd->H;
		expect_err(ferry_a2a_dispatch(a, counts, &t, osp, x, xsp, idx, w, NULL, 1, 1, 0, TIMEOUT_MS),
		           FERRY_E_INVALID, "out_expert_x: 2 dimensions, want 3");
	}
	if (wd->Hs) {
		expect_err(ferry_a2a_dispatch(a, counts, ox, os, x, NULL, idx, w, NULL, 1, 1, 0, TIMEOUT_MS),
		           FERRY_E_INVALID, "dp_x_scale: NULL");
	}
	int32_t too_many = wd->T + 1;
	ferry_tensor bm = tensor(&too_many, 4, FERRY_DTYPE_INT32, 0, 0, 0, 0);
	expect_err(ferry_a2a_dispatch(a, counts, ox, osp, x, xsp, idx, w, &bm, 1, 1, 0, TIMEOUT_MS), FERRY_E_INVALID,
	           "bound_m");
	expect_err(ferry_a2a_dispatch(a, counts, ox, osp, x, xsp, idx, w, NULL, 0, 0, 0, TIMEOUT_MS), FERRY_E_INVALID,
	           "do_send and do_recv");
	t = *x;
	t.memory = 7;
	expect_err(ferry_a2a_dispatch(a, counts, ox, osp, &t, xsp, idx, w, NULL, 1, 1, 0, TIMEOUT_MS), FERRY_E_INVALID,
	           "dp_x: memory 7");
	expect_err(ferry_a2a_dispatch(a, counts, ox, osp, x, xsp, idx, w, NULL, 1, 1, 0x1234, TIMEOUT_MS),
	           FERRY_E_NOT_SUPPORTED, "stream");
	/* Out of order: a receive half or a combine before any send. */
	expect_err(ferry_a2a_dispatch(a, counts, ox, osp, NULL, NULL, NULL, NULL, NULL, 0, 1, 0, TIMEOUT_MS),
	           FERRY_E_CALL_ORDER, "DispatchRecv");
	t = *ox;
	t.dtype = FERRY_DTYPE_INT32;
	expect_err(ferry_a2a_combine(a, NULL, NULL, NULL, &t, NULL, 1, 0, 0, 0, TIMEOUT_MS), FERRY_E_INVALID,
	           "expert_y: dtype");
	expect(ferry_a2a_dropped(a, NULL, (int32_t *)counts->data, 1), FERRY_E_INVALID);
	expect(ferry_a2a_dispatch(0, counts, ox, osp, x, xsp, idx, w, NULL, 1, 1, 0, TIMEOUT_MS), FERRY_E_BAD_HANDLE);
}

static void *run_rank(void *arg) {
	struct rank *rk = arg;
	const struct world *wd = rk->wd;
	const int r = rk->r, T = wd->T, H = wd->H, Hs = wd->Hs, K = wd->K;
	char world_name[64];
	snprintf(world_name, sizeof world_name, "a2a-example-%s", wd->name);

	ferry_a2a_config cfg;
	ferry_a2a_config_init(&cfg);
	cfg.backend = backend;
	cfg.rank = r;
	cfg.world_size = W;
	if (group != 0)
		cfg.group = group;
	else
		cfg.world_name = world_name;
	cfg.transport = transport;
	cfg.nvlink_size = wd->nvlink;
	cfg.max_tokens = T;
	cfg.hidden = H;
	cfg.hidden_scales = Hs;
	cfg.num_experts = wd->E;
	cfg.experts_per_token = K;
	cfg.dispatch_dtype = wd->dispatch_dtype;
	cfg.combine_dtype = wd->combine_dtype;
	cfg.expert_padding = wd->pad;
	cfg.max_private_tokens = wd->private_tokens;
	cfg.max_tokens_per_expert = wd->batched;
	cfg.timeout_ms = TIMEOUT_MS;
	if (r == 0) {
		/* A bad config names its field and creates nothing. */
		ferry_a2a_config bad = cfg;
		ferry_a2a_t none;
		bad.experts_per_token = wd->E + 1;
		expect_err(ferry_a2a_create(&bad, TIMEOUT_MS, &none), FERRY_E_INVALID, "experts_per_token");
		bad = cfg;
		bad.backend = 9;
		expect_err(ferry_a2a_create(&bad, TIMEOUT_MS, &none), FERRY_E_INVALID, "backend");
		bad = cfg;
		bad.dispatch_dtype = FERRY_DTYPE_INT32;
		expect_err(ferry_a2a_create(&bad, TIMEOUT_MS, &none), FERRY_E_INVALID, "dispatch_dtype");
		expect_err(ferry_a2a_create(NULL, TIMEOUT_MS, &none), FERRY_E_INVALID, "cfg");
	}
	expect(ferry_a2a_create(&cfg, 60000, &rk->a), FERRY_OK);
	memset(&rk->info, 0, sizeof rk->info);
	rk->info.struct_size = sizeof rk->info;
	expect(ferry_a2a_get_info(rk->a, &rk->info), FERRY_OK);
	const ferry_a2a_info *in = &rk->info;
	const int L = in->local_experts, R = in->output_rows;
	check(in->rank == r && in->world_size == W && L == (wd->E + W - 1) / W);
	check(in->max_tokens_per_expert == wd->batched);
	check(!wd->batched || R == L * wd->batched);

	size_t xes = esize(wd->dispatch_dtype), yes = esize(wd->combine_dtype);
	uint8_t *x = calloc((size_t)T * H, xes);
	float *xs = calloc((size_t)T * (Hs ? Hs : 1), 4);
	int32_t *idx = calloc((size_t)T * K, 4);
	float *w = calloc((size_t)T * K, 4);
	int32_t *counts = calloc((size_t)L, 4);
	uint8_t *ox = calloc((size_t)R * H, xes);
	/* Scales out column-major ([Hs][R]) to exercise arbitrary strides. */
	float *os = calloc((size_t)R * (Hs ? Hs : 1), 4);
	uint8_t *y = calloc((size_t)R * H, yes);
	uint8_t *out = calloc((size_t)T * H, yes);
	check(x && xs && idx && w && counts && ox && os && y && out);

	ferry_tensor tx = tensor(x, (size_t)T * H * xes, wd->dispatch_dtype, 2, T, H, 0);
	ferry_tensor txs = tensor(xs, (size_t)T * Hs * 4, FERRY_DTYPE_FP32, 2, T, Hs, 0);
	ferry_tensor tidx = tensor(idx, (size_t)T * K * 4, FERRY_DTYPE_INT32, 2, T, K, 0);
	ferry_tensor tw = tensor(w, (size_t)T * K * 4, FERRY_DTYPE_FP32, 2, T, K, 0);
	ferry_tensor tcounts = tensor(counts, (size_t)L * 4, FERRY_DTYPE_INT32, 1, L, 0, 0);
	ferry_tensor tox, tos, ty;
	if (wd->batched) {
		tox = tensor(ox, (size_t)R * H * xes, wd->dispatch_dtype, 3, L, wd->batched, H);
		tos = tensor(os, (size_t)R * Hs * 4, FERRY_DTYPE_FP32, 3, L, wd->batched, Hs);
		ty = tensor(y, (size_t)R * H * yes, wd->combine_dtype, 3, L, wd->batched, H);
		tos.strides[0] = wd->batched;
		tos.strides[1] = 1;
		tos.strides[2] = R;
	} else {
		tox = tensor(ox, (size_t)R * H * xes, wd->dispatch_dtype, 2, R, H, 0);
		tos = tensor(os, (size_t)R * Hs * 4, FERRY_DTYPE_FP32, 2, R, Hs, 0);
		ty = tensor(y, (size_t)R * H * yes, wd->combine_dtype, 2, R, H, 0);
		tos.strides[0] = 1;
		tos.strides[1] = R;
	}
	ferry_tensor tout = tensor(out, (size_t)T * H * yes, wd->combine_dtype, 2, T, H, 0);
	int32_t m_bound = tokens_of(wd, r);
	ferry_tensor tbm = tensor(&m_bound, 4, FERRY_DTYPE_INT32, 1, 1, 0, 0);
	const ferry_tensor *bm = r == 0 ? &tbm : NULL; /* rank 1's m is dp_x's rows */
	const ferry_tensor *tosp = Hs ? &tos : NULL, *txsp = Hs ? &txs : NULL;

	if (r == 0)
		bad_inputs(rk, &tcounts, &tox, &tos, &tx, &txs, &tidx, &tw);
	if (group != 0)
		expect(ferry_group_barrier(group, TIMEOUT_MS), FERRY_OK);
	else
		pthread_barrier_wait(&ready);

	const int iters = wd->overflow ? 1 : 3;
	for (int it = 0; it < iters; it++) {
		const int split = it == 1, accumulate = it == 2;
		const int m = tokens_of(wd, r);
		fill_x(wd, r, it, x);
		for (int t = 0; t < T; t++) {
			for (int s = 0; s < Hs; s++)
				xs[t * Hs + s] = scale_of(r, t, s);
			for (int k = 0; k < K; k++) {
				idx[t * K + k] = expert_of(wd, r, it, t, k);
				w[t * K + k] = weight_of(r, t, k);
			}
		}
		/* Poison the outputs: padding rows must stay as they were. */
		memset(ox, 0xa5, (size_t)R * H * xes);
		for (int i = 0; i < R * Hs; i++)
			os[i] = -1.0f;

		int rc;
		if (split) {
			rc = ferry_a2a_dispatch(rk->a, NULL, NULL, NULL, &tx, txsp, &tidx, &tw, bm, 1, 0, 0, TIMEOUT_MS);
			if (rc == FERRY_OK)
				rc = ferry_a2a_dispatch(rk->a, &tcounts, &tox, tosp, NULL, NULL, NULL, NULL, NULL, 0, 1, 0,
				                        TIMEOUT_MS);
		} else {
			rc = ferry_a2a_dispatch(rk->a, &tcounts, &tox, tosp, &tx, txsp, &tidx, &tw, bm, 1, 1, 0, TIMEOUT_MS);
		}
		if (wd->overflow) {
			expect_err_at(__LINE__, "dispatch over the bound", rc, FERRY_E_EXPERT_OVERFLOW, "max tokens per expert");
			rk->failed_overflow = 1;
			expect_err(ferry_a2a_dispatch(rk->a, &tcounts, &tox, tosp, &tx, txsp, &tidx, &tw, bm, 1, 1, 0,
			                              TIMEOUT_MS),
			           FERRY_E_BROKEN, "broken");
			/* Both ranks revive the context with the same mask. */
			uint8_t active[W] = {1, 1};
			expect(ferry_a2a_set_active(rk->a, 1, active, W, TIMEOUT_MS), FERRY_OK);
			memset(&rk->info, 0, sizeof rk->info);
			rk->info.struct_size = sizeof rk->info;
			expect(ferry_a2a_get_info(rk->a, &rk->info), FERRY_OK);
			check(rk->info.generation == 1);
			/* Within the bound (one token each) it works again. */
			int32_t one = 1;
			ferry_tensor tone = tensor(&one, 4, FERRY_DTYPE_INT32, 0, 0, 0, 0);
			expect(ferry_a2a_dispatch(rk->a, &tcounts, &tox, tosp, &tx, txsp, &tidx, &tw, &tone, 1, 1, 0,
			                          TIMEOUT_MS),
			       FERRY_OK);
			for (int i = 0; i < L; i++)
				check(counts[i] == (r * L + i < K ? W : 0));
			expect(ferry_a2a_combine(rk->a, &tout, &tidx, &tw, &ty, &tone, 1, 1, 0, 0, TIMEOUT_MS), FERRY_OK);
			break;
		}
		expect_at(__LINE__, "dispatch", rc, FERRY_OK);

		/* Check the dispatch against the rows computed here: sources in
		 * the receiver's order (the other rank, then itself), then tokens,
		 * then slots. */
		int row = 0;
		for (int i = 0; i < L; i++) {
			const int e = r * L + i;
			int start = wd->batched ? i * wd->batched : row;
			row = start;
			for (int src = 0; src < W; src++) {
				const int h = (r + 1 + src) % W;
				for (int t = 0; t < tokens_of(wd, h); t++)
					for (int k = 0; k < K; k++) {
						if (expert_of(wd, h, it, t, k) != e)
							continue;
						check(wd->batched == 0 || row - start < wd->batched);
						for (int c = 0; c < H; c++) {
							uint8_t b = token_byte(h, it, t, c);
							if (xes == 1)
								check(ox[(size_t)row * H + c] == b);
							else
								check(load(wd->dispatch_dtype, ox, (size_t)row * H + c) ==
								      (float)(b % 8));
						}
						for (int s = 0; s < Hs; s++)
							check(os[(size_t)s * R + row] == scale_of(h, t, s));
						row++;
					}
			}
			check(counts[i] == row - start);
			/* The rows after the expert's, up to the next segment, are
			 * untouched. */
			int end = wd->batched ? (i + 1) * wd->batched : (row + wd->pad - 1) / wd->pad * wd->pad;
			for (int p = row; p < end && p < R; p++)
				for (int c = 0; c < H; c++)
					check(xes != 1 || ox[(size_t)p * H + c] == 0xa5);
			row = end;
		}
		int64_t dropped = -1;
		expect(ferry_a2a_dropped(rk->a, &dropped, NULL, 0), FERRY_OK);
		check(dropped == 0);

		/* The experts run. Rows outside any expert's count are poison. */
		memset(y, 0x7f, (size_t)R * H * yes);
		for (int i = 0; i < L; i++) {
			int start = 0;
			if (wd->batched) {
				start = i * wd->batched;
			} else {
				for (int j = 0; j < i; j++)
					start += (counts[j] + wd->pad - 1) / wd->pad * wd->pad;
			}
			for (int q = start; q < start + counts[i]; q++)
				for (int c = 0; c < H; c++)
					store(wd->combine_dtype, y, (size_t)q * H + c,
					      expert_fn(wd, ox + (size_t)q * H * xes, c, i));
		}

		for (int t = 0; t < T; t++)
			for (int c = 0; c < H; c++)
				store(wd->combine_dtype, out, (size_t)t * H + c, accumulate ? 1.0f : 99.0f);
		if (split) {
			expect(ferry_a2a_combine(rk->a, NULL, NULL, NULL, &ty, NULL, 1, 0, 0, 0, TIMEOUT_MS), FERRY_OK);
			expect(ferry_a2a_combine(rk->a, &tout, &tidx, &tw, NULL, bm, 0, 1, accumulate, 0, TIMEOUT_MS),
			       FERRY_OK);
		} else {
			expect(ferry_a2a_combine(rk->a, &tout, &tidx, &tw, &ty, bm, 1, 1, accumulate, 0, TIMEOUT_MS),
			       FERRY_OK);
		}
		/* out[t] = (accumulate ? 1 : 0) + sum_k w * y, y = x + local expert. */
		for (int t = 0; t < m; t++)
			for (int c = 0; c < H; c++) {
				float acc = accumulate ? 1.0f : 0.0f;
				for (int k = 0; k < K; k++) {
					int e = expert_of(wd, r, it, t, k);
					float xv = (float)(token_byte(r, it, t, c) % 8);
					float yv = xv + (float)(e % L);
					if (wd->combine_dtype == FERRY_DTYPE_BF16)
						yv = from_bf16(to_bf16(yv));
					float p = weight_of(r, t, k) * yv;
					acc = acc + p;
				}
				float got = load(wd->combine_dtype, out, (size_t)t * H + c);
				float want = wd->combine_dtype == FERRY_DTYPE_BF16 ? from_bf16(to_bf16(acc)) : acc;
				if (got != want) {
					fprintf(stderr, "%s: world %s rank %d it %d: out[%d][%d] = %g, want %g\n", check_label,
					        wd->name, r, it, t, c, got, want);
					exit(1);
				}
			}
		/* Rows past m are not written. */
		for (int t = m; t < T; t++)
			check(load(wd->combine_dtype, out, (size_t)t * H) == (accumulate ? 1.0f : 99.0f));
	}

	expect(ferry_a2a_close(rk->a), FERRY_OK);
	expect(ferry_a2a_close(rk->a), FERRY_E_BAD_HANDLE);
	expect_err(ferry_a2a_dispatch(rk->a, &tcounts, &tox, tosp, &tx, txsp, &tidx, &tw, NULL, 1, 1, 0, TIMEOUT_MS),
	           FERRY_E_BAD_HANDLE, "a2a handle");
	free(x), free(xs), free(idx), free(w), free(counts), free(ox), free(os), free(y), free(out);
	return NULL;
}

int main(int argc, char **argv) {
	if (argc < 2 || (strcmp(argv[1], "host") != 0 && strcmp(argv[1], "cuda-emu") != 0)) {
		fprintf(stderr, "usage: %s host|cuda-emu [transport]\n", argv[0]);
		return 2;
	}
	backend_name = argv[1];
	backend = strcmp(backend_name, "host") == 0 ? FERRY_A2A_BACKEND_HOST : FERRY_A2A_BACKEND_CUDA_EMU;
	static char label[96];
	snprintf(label, sizeof label, "a2a %s", backend_name);
	check_label = label;

	uint64_t handles_at_start, handles_now;
	expect(ferry_live_handles(&handles_at_start), FERRY_OK);
	int32_t me = -1;
	if (argc > 2 && strcmp(argv[2], "--cuda-memory") == 0) {
		/* Every tensor claims to be CUDA memory: the library stages it
		 * through the host with the driver's copies (run it against the
		 * fake libcuda, whose "device" pointers are host memory). */
		mem_kind = FERRY_MEMORY_CUDA;
		snprintf(label, sizeof label, "a2a %s cuda-memory", backend_name);
		argc = 2;
	}
	if (argc > 2) {
		/* One rank per process: the world is the launcher's group. */
		transport = argv[2];
		int32_t world;
		expect(ferry_group_join(TIMEOUT_MS, &group), FERRY_OK);
		expect(ferry_group_rank(group, &me, &world), FERRY_OK);
		check(world == W);
		snprintf(label, sizeof label, "a2a %s rank %d over %s", backend_name, me, transport);
	}
	for (size_t wi = 0; wi < sizeof worlds / sizeof worlds[0]; wi++) {
		struct rank ranks[W];
		memset(ranks, 0, sizeof ranks);
		if (group != 0) {
			ranks[0].wd = &worlds[wi];
			ranks[0].r = me;
			run_rank(&ranks[0]);
			if (worlds[wi].overflow)
				check(ranks[0].failed_overflow);
		} else {
			pthread_t th[W];
			pthread_barrier_init(&ready, NULL, W);
			for (int r = 0; r < W; r++) {
				ranks[r].wd = &worlds[wi];
				ranks[r].r = r;
				check(pthread_create(&th[r], NULL, run_rank, &ranks[r]) == 0);
			}
			for (int r = 0; r < W; r++)
				pthread_join(th[r], NULL);
			pthread_barrier_destroy(&ready);
			if (worlds[wi].overflow)
				check(ranks[0].failed_overflow && ranks[1].failed_overflow);
		}
		printf("%s: world %s: ok\n", label, worlds[wi].name);
	}
	if (group != 0) {
		/* Rank 0 serves the group's store: nobody leaves before all are done. */
		expect(ferry_group_barrier(group, TIMEOUT_MS), FERRY_OK);
		expect(ferry_group_close(group), FERRY_OK);
	}
	expect(ferry_live_handles(&handles_now), FERRY_OK);
	check(handles_now == handles_at_start);
	printf("%s: ok\n", label);
	return 0;
}
