/*
 * connect.c: ferry_connect (ABI 1.4) warms a peer up before the first
 * write, twice without harm; a closed engine's address is refused with
 * FERRY_E_PEER_LOST (or FERRY_E_TIMEOUT at the deadline on tcp;ofi_rxm
 * when its incarnation question goes unanswered: a refused connection
 * shows only after the handshake timeout);
 * bad arguments are FERRY_E_INVALID.
 *
 *   cc -o connect connect.c -I.. -L<dir> -lferry -Wl,-rpath,<dir>
 *   ./connect mem
 *
 * Arguments: transport [node|-] [nics]. Exit status as loopback.c's.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

int main(int argc, char **argv) {
	ferry_config cfg;
	example_config(argc, argv, "connect", &cfg);
	const char *transport = cfg.transport;
	check(ferry_version() >= ((1u << 16) | (4u << 8)));

	ferry_engine_t a, b, c;
	open_or_skip(&cfg, &a);
	expect(ferry_engine_open(&cfg, TIMEOUT_MS, &b), FERRY_OK);
	expect(ferry_engine_open(&cfg, TIMEOUT_MS, &c), FERRY_OK);
	uint8_t addr_b[300], addr_c[300];
	size_t len_b, len_c;
	expect(ferry_engine_address(b, addr_b, sizeof addr_b, &len_b), FERRY_OK);
	expect(ferry_engine_address(c, addr_c, sizeof addr_c, &len_c), FERRY_OK);

	const uint8_t *live[1] = {addr_b};
	size_t live_len[1] = {len_b};
	expect(ferry_connect(a, live, live_len, 1, TIMEOUT_MS), FERRY_OK);
	expect(ferry_connect(a, live, live_len, 1, TIMEOUT_MS), FERRY_OK); /* again: no change */
	expect(ferry_connect(a, NULL, NULL, 0, TIMEOUT_MS), FERRY_OK);     /* nothing to do */

	/* The first write after it. */
	uint8_t *src, *dst;
	expect(ferry_host_alloc(MIB, (void **)&src), FERRY_OK);
	expect(ferry_host_alloc(MIB, (void **)&dst), FERRY_OK);
	for (size_t i = 0; i < 4096; i++)
		src[i] = (uint8_t)(i * 7 + 1);
	ferry_region_t src_reg, dst_reg;
	expect(ferry_register(a, src, MIB, FERRY_ACCESS_LOCAL, &src_reg), FERRY_OK);
	expect(ferry_register(b, dst, MIB, FERRY_ACCESS_REMOTE_WRITE, &dst_reg), FERRY_OK);
	ferry_descriptor_t desc;
	expect(ferry_region_descriptor(dst_reg, &desc), FERRY_OK);
	ferry_transfer_t t;
	expect(ferry_transfer_new(&t), FERRY_OK);
	/* The bytes are checked once the target counted the immediate: the
	 * writer's completion alone does not say they landed (tcp). */
	ferry_imm_counter_t landed;
	expect(ferry_imm_counter_new(b, 0x6c, &landed), FERRY_OK);
	ferry_single_write sw = {.src = src_reg, .length = 4096, .dst = desc, .imm = 0x6c, .has_imm = 1,
	                         .route = (ferry_route){.kind = FERRY_ROUTE_PINNED, .value = 0}};
	expect(ferry_submit_single(a, &sw, t), FERRY_OK);
	expect(ferry_transfer_wait(t, TIMEOUT_MS), FERRY_OK);
	expect(ferry_imm_counter_wait(landed, 1, TIMEOUT_MS), FERRY_OK);
	check(memcmp(src, dst, 4096) == 0);
	expect(ferry_imm_counter_free(landed), FERRY_OK);

	/* A closed engine's address. */
	expect(ferry_engine_close(c, TIMEOUT_MS), FERRY_OK);
	const uint8_t *dead[1] = {addr_c};
	size_t dead_len[1] = {len_c};
	int tcp = strcmp(transport, "tcp;ofi_rxm") == 0;
	double t0 = now_s();
	int rc = ferry_connect(a, dead, dead_len, 1, tcp ? 2000 : 10000);
	/* tcp;ofi_rxm: the incarnation question finds no one (PEER_LOST or
	 * STALE_DESCRIPTOR), unless its answer is lost, and then the refused
	 * connection shows only at the handshake timeout, past the deadline. */
	if (rc != FERRY_E_PEER_LOST && rc != FERRY_E_STALE_DESCRIPTOR && !(tcp && rc == FERRY_E_TIMEOUT)) {
		fprintf(stderr, "connect %s: ferry_connect of a closed engine = %d, want FERRY_E_PEER_LOST%s\n",
			transport, rc, tcp ? " or FERRY_E_TIMEOUT" : "");
		return 1;
	}
	check(now_s() - t0 < 15.0);
	expect(ferry_connect(a, live, live_len, 1, TIMEOUT_MS), FERRY_OK); /* the live peer is unaffected */

	/* Bad arguments. */
	expect(ferry_connect(a, NULL, live_len, 1, TIMEOUT_MS), FERRY_E_INVALID);
	expect(ferry_connect(a, live, NULL, 1, TIMEOUT_MS), FERRY_E_INVALID);
	expect(ferry_connect(a, live, live_len, 1, -1), FERRY_E_INVALID);
	size_t short_len[1] = {1};
	expect(ferry_connect(a, live, short_len, 1, TIMEOUT_MS), FERRY_E_BAD_ENCODING);
	const uint8_t *null_addr[1] = {NULL};
	expect(ferry_connect(a, null_addr, live_len, 1, TIMEOUT_MS), FERRY_E_INVALID);
	expect(ferry_connect(0, live, live_len, 1, TIMEOUT_MS), FERRY_E_BAD_HANDLE);

	expect(ferry_transfer_free(t), FERRY_OK);
	expect(ferry_descriptor_free(desc), FERRY_OK);
	expect(ferry_engine_close(a, TIMEOUT_MS), FERRY_OK);
	expect(ferry_engine_close(b, TIMEOUT_MS), FERRY_OK);
	expect(ferry_host_free(src), FERRY_OK);
	expect(ferry_host_free(dst), FERRY_OK);
	printf("connect %s: ok\n", transport);
	return 0;
}
