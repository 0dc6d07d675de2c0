/*
 * ranks.c: one rank of a multi-process ferry job through the C ABI.
 *
 * Each rank joins the job's bootstrap group, opens an engine, registers a
 * receive buffer and all-gathers (main address, descriptor) pairs. Then it
 * writes a block of its own pattern into the next rank's buffer with an
 * immediate naming itself, sends the next rank a message over the side
 * channel, and checks what the previous rank wrote and sent to it.
 *
 * Launch it with any launcher the bootstrap understands (torchrun, mpirun,
 * srun), or by hand:
 *
 *   FERRY_WORLD_SIZE=2 FERRY_MASTER=127.0.0.1:29500 FERRY_JOB_TOKEN=t \
 *     FERRY_RANK=0 ./ranks shm &
 *   FERRY_WORLD_SIZE=2 FERRY_MASTER=127.0.0.1:29500 FERRY_JOB_TOKEN=t \
 *     FERRY_RANK=1 ./ranks shm
 *
 * Arguments: transport [node|-] [nics]. Exit status 77: the transport
 * cannot run here.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ferry.h"

#define BLOCK (256 * 1024)
#define SLOT 1024 /* bytes per rank in the all-gather */
#define TIMEOUT_MS 20000

static int rank = -1;

#define expect(call, want) expect_at(__LINE__, #call, (call), (want))

static void expect_at(int line, const char *what, int got, int want) {
	if (got == want)
		return;
	char msg[512];
	ferry_last_error(msg, sizeof msg);
	fprintf(stderr, "rank %d: line %d: %s = %s, want %s (%s)\n", rank, line, what,
	        ferry_strerror(got), ferry_strerror(want), msg);
	exit(1);
}

static uint8_t pattern(int r, size_t i) { return (uint8_t)(i * 31 + (size_t)r * 97 + 5); }

struct inbox {
	char msg[128];
	int64_t got;
};

static void on_data(void *ud, const uint8_t *data, size_t len) {
	struct inbox *in = ud;
	if (len < sizeof in->msg) {
		memcpy(in->msg, data, len);
		in->msg[len] = 0;
	}
	__atomic_store_n(&in->got, 1, __ATOMIC_RELEASE);
}

int main(int argc, char **argv) {
	if (argc < 2) {
		fprintf(stderr, "usage: %s transport [node|-] [nics]\n", argv[0]);
		return 2;
	}
	const char *transport = argv[1];
	const char *node = argc > 2 && strcmp(argv[2], "-") != 0 ? argv[2] : NULL;
	int nics = argc > 3 ? atoi(argv[3]) : 1;

	uint64_t handles_at_start, handles_now;
	expect(ferry_live_handles(&handles_at_start), FERRY_OK);
	ferry_group_t g;
	expect(ferry_group_join(TIMEOUT_MS, &g), FERRY_OK);
	int32_t r, world;
	expect(ferry_group_rank(g, &r, &world), FERRY_OK);
	rank = r;
	int next = (rank + 1) % world, prev = (rank + world - 1) % world;

	ferry_config cfg;
	ferry_config_init(&cfg);
	cfg.transport = transport;
	cfg.node = node;
	cfg.nics = nics;
	cfg.log_level = FERRY_LOG_ERROR;
	ferry_engine_t e;
	int rc = ferry_engine_open(&cfg, TIMEOUT_MS, &e);
	/* Every rank must take part in every collective, even to give up:
	 * agree on whether the transport works before going on. */
	uint8_t usable = rc == FERRY_OK, all[64 * SLOT];
	size_t lens[64];
	if (world > 64) {
		fprintf(stderr, "rank %d: this example handles up to 64 ranks\n", rank);
		return 2;
	}
	expect(ferry_group_all_gather(g, &usable, 1, all, SLOT, lens, TIMEOUT_MS), FERRY_OK);
	for (int i = 0; i < world; i++) {
		if (!all[i * SLOT]) {
			fprintf(stderr, "rank %d: %s not usable on rank %d\n", rank, transport, i);
			if (rc == FERRY_OK)
				ferry_engine_close(e, TIMEOUT_MS);
			ferry_group_close(g);
			return 77;
		}
	}

	uint8_t *src, *dst;
	expect(ferry_host_alloc(BLOCK, (void **)&src), FERRY_OK);
	expect(ferry_host_alloc(BLOCK, (void **)&dst), FERRY_OK);
	for (size_t i = 0; i < BLOCK; i++)
		src[i] = pattern(rank, i);
	ferry_region_t src_reg, dst_reg;
	expect(ferry_register(e, src, BLOCK, FERRY_ACCESS_LOCAL, &src_reg), FERRY_OK);
	expect(ferry_register(e, dst, BLOCK, FERRY_ACCESS_REMOTE_WRITE, &dst_reg), FERRY_OK);

	/* Counters and receives go up before the exchange: once a peer has our
	 * descriptor it may write at any time. */
	ferry_imm_counter_t from_prev;
	expect(ferry_imm_counter_new(e, 0x1000 + (uint32_t)prev, &from_prev), FERRY_OK);
	static struct inbox inbox;
	expect(ferry_recv_bouncing(e, 4, 128, on_data, NULL, &inbox), FERRY_OK);

	/* Slot layout: u16 address length, address, u16 descriptor length,
	 * descriptor. */
	uint8_t mine[SLOT];
	size_t alen, dlen;
	ferry_descriptor_t own;
	expect(ferry_engine_address(e, mine + 2, SLOT - 2, &alen), FERRY_OK);
	expect(ferry_region_descriptor(dst_reg, &own), FERRY_OK);
	expect(ferry_descriptor_to_bytes(own, mine + 4 + alen, SLOT - 4 - alen, &dlen), FERRY_OK);
	mine[0] = (uint8_t)alen;
	mine[1] = (uint8_t)(alen >> 8);
	mine[2 + alen] = (uint8_t)dlen;
	mine[3 + alen] = (uint8_t)(dlen >> 8);
	expect(ferry_group_all_gather(g, mine, 4 + alen + dlen, all, SLOT, lens, TIMEOUT_MS), FERRY_OK);
	const uint8_t *peer = all + (size_t)next * SLOT;
	size_t palen = peer[0] | (size_t)peer[1] << 8;
	size_t pdlen = peer[2 + palen] | (size_t)peer[3 + palen] << 8;
	ferry_descriptor_t dst_next;
	expect(ferry_descriptor_from_bytes(peer + 4 + palen, pdlen, &dst_next), FERRY_OK);

	/* Write our pattern into the next rank, then say hello. */
	ferry_transfer_t t;
	expect(ferry_transfer_new(&t), FERRY_OK);
	ferry_single_write w = {.src = src_reg, .length = BLOCK, .dst = dst_next,
	                        .imm = 0x1000 + (uint32_t)rank, .has_imm = 1};
	expect(ferry_submit_single(e, &w, t), FERRY_OK);
	expect(ferry_transfer_wait(t, TIMEOUT_MS), FERRY_OK);
	char hello[64];
	int hlen = snprintf(hello, sizeof hello, "hello from rank %d", rank);
	expect(ferry_send(e, peer + 2, palen, hello, (size_t)hlen, t, TIMEOUT_MS), FERRY_OK);
	expect(ferry_transfer_wait(t, TIMEOUT_MS), FERRY_OK);

	/* What the previous rank did to us: one immediate per NIC (the write
	 * was sharded over all of them), its pattern, its message. */
	expect(ferry_imm_counter_wait(from_prev, nics, TIMEOUT_MS), FERRY_OK);
	for (size_t i = 0; i < BLOCK; i++) {
		if (dst[i] != pattern(prev, i)) {
			fprintf(stderr, "rank %d: byte %zu from rank %d is %u, want %u\n", rank, i, prev,
			        dst[i], pattern(prev, i));
			return 1;
		}
	}
	char want[64];
	snprintf(want, sizeof want, "hello from rank %d", prev);
	for (int i = 0; i < 20000 && !__atomic_load_n(&inbox.got, __ATOMIC_ACQUIRE); i++)
		usleep(1000);
	if (!inbox.got || strcmp(inbox.msg, want) != 0) {
		fprintf(stderr, "rank %d: message %d [%s], want [%s]\n", rank, (int)inbox.got, inbox.msg, want);
		return 1;
	}

	/* Nobody closes while a peer may still write to it. */
	expect(ferry_group_barrier(g, TIMEOUT_MS), FERRY_OK);
	expect(ferry_transfer_free(t), FERRY_OK);
	expect(ferry_descriptor_free(own), FERRY_OK);
	expect(ferry_descriptor_free(dst_next), FERRY_OK);
	expect(ferry_engine_close(e, TIMEOUT_MS), FERRY_OK);
	expect(ferry_host_free(src), FERRY_OK);
	expect(ferry_host_free(dst), FERRY_OK);
	/* Rank 0 serves the store: leave only when everyone is done with it. */
	expect(ferry_group_barrier(g, TIMEOUT_MS), FERRY_OK);
	expect(ferry_group_close(g), FERRY_OK);
	expect(ferry_live_handles(&handles_now), FERRY_OK);
	if (handles_now != handles_at_start) {
		fprintf(stderr, "rank %d: %llu handles left\n", rank, (unsigned long long)(handles_now - handles_at_start));
		return 1;
	}
	printf("rank %d of %d over %s: ok\n", rank, world, transport);
	return 0;
}
