//go:build cgo

/*
 * The raw benchmark loop, which drives libfabric with no Go in between,
 * and the layout report the Go side checks its structs against.
 */
#include <time.h>

#include "shim.h"

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The raw benchmark: for each iteration post all of ops on init (polling
 * both queues whenever the provider is busy, since tcp and shm progress
 * only when polled), then wait for every initiator completion and, for
 * writes with an immediate, every target immediate. Warmup iterations run
 * first and are not timed. On failure *phase is the iteration (warmups
 * negative) and the return value a negative fi errno. */
int ferry_raw_loop(struct ferry_ep *init, struct ferry_ep *target,
		   const struct ferry_write_op *ops, int n, int iters, int warmup,
		   int64_t timeout_ns, int64_t *lat_ns, int *phase)
{
	struct ferry_event ev[64];
	int expect_imm = 0, i, it;

	for (i = 0; i < n; i++)
		if (ops[i].flags & FERRY_WRITE_HAS_IMM)
			expect_imm++;
	for (it = -warmup; it < iters; it++) {
		int64_t t0 = now_ns();
		int posted = 0, done = 0, imms = 0;
		unsigned spins = 0;

		*phase = it;
		while (posted < n || done < n || imms < expect_imm) {
			int m;

			if (posted < n) {
				posted += ferry_post_writes(init, ops + posted, n - posted);
				if (init->last_err)
					return init->last_err;
			}
			m = ferry_poll(init, ev, 64);
			if (m < 0)
				return m;
			for (i = 0; i < m; i++) {
				if (ev[i].err)
					return -ev[i].err;
				if (ev[i].kind == FERRY_EV_WRITE)
					done++;
			}
			m = ferry_poll(target, ev, 64);
			if (m < 0)
				return m;
			for (i = 0; i < m; i++) {
				if (ev[i].err)
					return -ev[i].err;
				if (ev[i].kind == FERRY_EV_IMM)
					imms++;
			}
			if ((++spins & 1023) == 0 && now_ns() - t0 > timeout_ns)
				return -FI_ETIMEDOUT;
		}
		if (it >= 0)
			lat_ns[it] = now_ns() - t0;
	}
	return 0;
}

void ferry_layout(uint64_t *out, int max)
{
	uint64_t v[] = {
		sizeof(struct ferry_write_op),
		offsetof(struct ferry_write_op, local),
		offsetof(struct ferry_write_op, length),
		offsetof(struct ferry_write_op, local_desc),
		offsetof(struct ferry_write_op, remote),
		offsetof(struct ferry_write_op, remote_key),
		offsetof(struct ferry_write_op, peer),
		offsetof(struct ferry_write_op, context),
		offsetof(struct ferry_write_op, imm),
		offsetof(struct ferry_write_op, flags),
		sizeof(struct ferry_send_op),
		offsetof(struct ferry_send_op, local),
		offsetof(struct ferry_send_op, length),
		offsetof(struct ferry_send_op, local_desc),
		offsetof(struct ferry_send_op, peer),
		offsetof(struct ferry_send_op, context),
		sizeof(struct ferry_recv_op),
		offsetof(struct ferry_recv_op, local),
		offsetof(struct ferry_recv_op, length),
		offsetof(struct ferry_recv_op, local_desc),
		offsetof(struct ferry_recv_op, context),
		sizeof(struct ferry_event),
		offsetof(struct ferry_event, context),
		offsetof(struct ferry_event, length),
		offsetof(struct ferry_event, kind),
		offsetof(struct ferry_event, imm),
		offsetof(struct ferry_event, err),
		offsetof(struct ferry_event, prov_errno),
	};
	int i;
	for (i = 0; i < max && i < (int)(sizeof v / sizeof v[0]); i++)
		out[i] = v[i];
}
