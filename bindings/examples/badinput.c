/*
 * badinput.c: every kind of bad input through the C ABI is refused with its
 * own code and a message, posts nothing, hangs nothing, and leaves the
 * engines working.
 *
 *   cc -o badinput badinput.c -I.. -L<dir> -lferry -Wl,-rpath,<dir>
 *   ./badinput mem
 *   ./badinput 'tcp;ofi_rxm' 127.0.0.1 2
 *
 * Arguments: transport [node|-] [nics]. Exit status as loopback.c's: 0 ok,
 * 1 a check failed, 77 the transport cannot run here.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

int main(int argc, char **argv) {
	ferry_config cfg;
	example_config(argc, argv, "badinput", &cfg);
	const char *transport = cfg.transport;
	int nics = cfg.nics;
	uint64_t handles_at_start, handles_now;
	expect(ferry_live_handles(&handles_at_start), FERRY_OK);

	/* Bad configurations. */
	ferry_engine_t a, b, never;
	expect(ferry_engine_open(NULL, TIMEOUT_MS, &never), FERRY_E_INVALID);
	ferry_config bad_cfg = cfg;
	bad_cfg.struct_size = 4;
	expect(ferry_engine_open(&bad_cfg, TIMEOUT_MS, &never), FERRY_E_INVALID);
	bad_cfg = cfg;
	bad_cfg.poll = 9;
	expect(ferry_engine_open(&bad_cfg, TIMEOUT_MS, &never), FERRY_E_INVALID);
	bad_cfg = cfg;
	bad_cfg.nics = 5;
	expect(ferry_engine_open(&bad_cfg, TIMEOUT_MS, &never), FERRY_E_INVALID);
	bad_cfg = cfg;
	bad_cfg.log_level = 42;
	expect(ferry_engine_open(&bad_cfg, TIMEOUT_MS, &never), FERRY_E_INVALID);
	expect(ferry_engine_open(&cfg, -1, &never), FERRY_E_INVALID);
	bad_cfg = cfg;
	bad_cfg.transport = "shmm"; /* a typo: unknown, and the message lists the valid names */
	expect(ferry_engine_open(&bad_cfg, TIMEOUT_MS, &never), FERRY_E_UNKNOWN_PROVIDER);
	{
		char msg[1024];
		ferry_last_error(msg, sizeof msg);
		if (!strstr(msg, "unknown transport \"shmm\"") || !strstr(msg, "tcp;ofi_rxm") || !strstr(msg, "verbs")) {
			fprintf(stderr, "badinput: unknown transport message does not list the valid names: %s\n", msg);
			return 1;
		}
	}

	open_or_skip(&cfg, &a);
	expect(ferry_engine_open(&cfg, TIMEOUT_MS, &b), FERRY_OK);
	uint8_t *src, *dst;
	expect(ferry_host_alloc(MIB, (void **)&src), FERRY_OK);
	expect(ferry_host_alloc(MIB, (void **)&dst), FERRY_OK);
	ferry_region_t src_reg, dst_reg;
	expect(ferry_register(a, src, MIB, FERRY_ACCESS_LOCAL, &src_reg), FERRY_OK);
	expect(ferry_register(b, dst, MIB, FERRY_ACCESS_REMOTE_WRITE, &dst_reg), FERRY_OK);
	ferry_descriptor_t desc, scratch;
	expect(ferry_region_descriptor(dst_reg, &desc), FERRY_OK);
	uint8_t wire[512], addr_b[300];
	size_t wire_len, addr_len;
	expect(ferry_descriptor_to_bytes(desc, wire, sizeof wire, &wire_len), FERRY_OK);
	expect(ferry_engine_address(b, addr_b, sizeof addr_b, &addr_len), FERRY_OK);
	ferry_transfer_t t;
	expect(ferry_transfer_new(&t), FERRY_OK);
	ferry_imm_counter_t credits;
	expect(ferry_imm_counter_new(b, 0x100, &credits), FERRY_OK);

	/* Requests: bounds, regions, routes, handles of the wrong kind. */
	char msg[256];
	ferry_single_write sw = {.src = src_reg, .length = 4096, .dst = desc, .imm = 0x100, .has_imm = 1};
	ferry_single_write bad = sw;
	bad.dst_offset = MIB - 1;
	bad.length = 2;
	expect(ferry_submit_single(a, &bad, t), FERRY_E_OUT_OF_BOUNDS);
	check(ferry_last_error(msg, sizeof msg) > 0 && strstr(msg, "single write") != NULL);
	bad = sw;
	bad.src_offset = MIB;
	expect(ferry_submit_single(a, &bad, t), FERRY_E_OUT_OF_BOUNDS);
	bad = sw;
	bad.length = UINT64_MAX;
	expect(ferry_submit_single(a, &bad, t), FERRY_E_OUT_OF_BOUNDS);
	bad = sw;
	bad.src = 0;
	expect(ferry_submit_single(a, &bad, t), FERRY_E_UNKNOWN_REGION);
	bad.src = dst_reg; /* B's region used on A */
	expect(ferry_submit_single(a, &bad, t), FERRY_E_UNKNOWN_REGION);
	bad = sw;
	bad.route = (ferry_route){.kind = FERRY_ROUTE_PINNED, .value = nics};
	expect(ferry_submit_single(a, &bad, t), FERRY_E_INVALID);
	bad.route = (ferry_route){.kind = FERRY_ROUTE_SHARDED, .value = nics + 1};
	expect(ferry_submit_single(a, &bad, t), FERRY_E_INVALID);
	bad.route = (ferry_route){.kind = 17};
	expect(ferry_submit_single(a, &bad, t), FERRY_E_INVALID);
	bad = sw;
	bad.dst = src_reg; /* not a descriptor */
	expect(ferry_submit_single(a, &bad, t), FERRY_E_BAD_HANDLE);
	expect(ferry_submit_single(a, &sw, desc), FERRY_E_BAD_HANDLE); /* not a completion */
	expect(ferry_submit_single(a, NULL, t), FERRY_E_INVALID);
	expect(ferry_submit_single(0, &sw, t), FERRY_E_BAD_HANDLE);

	uint32_t pages[4] = {7, 6, 5, 4};
	ferry_paged_write pw = {.src = src_reg, .src_pages = pages, .src_stride = 4096, .dst = desc,
	                        .dst_pages = pages, .dst_stride = 4096, .pages = 4, .length = 4096};
	ferry_paged_write pbad = pw;
	pbad.src_pages = NULL;
	expect(ferry_submit_paged(a, &pbad, t), FERRY_E_INVALID);
	pbad = pw;
	pbad.pages = 0;
	expect(ferry_submit_paged(a, &pbad, t), FERRY_E_INVALID);
	pbad = pw;
	pbad.src_stride = MIB; /* page 7 at a 1 MiB stride */
	expect(ferry_submit_paged(a, &pbad, t), FERRY_E_OUT_OF_BOUNDS);
	pbad = pw;
	pbad.dst_stride = UINT64_MAX / 2; /* must not wrap around */
	expect(ferry_submit_paged(a, &pbad, t), FERRY_E_OUT_OF_BOUNDS);

	ferry_scatter_target tg = {.dst = desc, .length = MIB + 1};
	ferry_scatter_write sc = {.src = src_reg, .targets = &tg, .count = 1};
	expect(ferry_submit_scatter(a, &sc, t), FERRY_E_OUT_OF_BOUNDS);
	sc.count = 0;
	expect(ferry_submit_scatter(a, &sc, t), FERRY_E_INVALID);
	sc.count = 1;
	tg.length = 1;
	sc.route = (ferry_route){.kind = FERRY_ROUTE_PINNED, .value = nics};
	expect(ferry_submit_scatter(a, &sc, t), FERRY_E_INVALID);
	sc.route = (ferry_route){.kind = FERRY_ROUTE_SHARDED, .value = 2};
	expect(ferry_submit_scatter(a, &sc, t), FERRY_E_INVALID);

	expect(ferry_submit_barrier(a, 1, NULL, 0, NULL, t), FERRY_E_INVALID);
	ferry_descriptor_t dsts[2] = {desc, t};
	expect(ferry_submit_barrier(a, 1, dsts, 2, NULL, t), FERRY_E_BAD_HANDLE);
	expect(ferry_submit_imm(a, 1, 0, NULL, t), FERRY_E_BAD_HANDLE);

	/* Encodings, handles, outputs. */
	expect(ferry_descriptor_from_bytes(wire, wire_len - 1, &scratch), FERRY_E_BAD_ENCODING);
	wire[1] = 99; /* an unknown version */
	expect(ferry_descriptor_from_bytes(wire, wire_len, &scratch), FERRY_E_BAD_ENCODING);
	expect(ferry_descriptor_from_bytes(NULL, 0, &scratch), FERRY_E_BAD_ENCODING);
	expect(ferry_descriptor_from_hex("zz", &scratch), FERRY_E_BAD_ENCODING);
	expect(ferry_descriptor_from_hex(NULL, &scratch), FERRY_E_INVALID);
	expect(ferry_region_descriptor(src_reg, &scratch), FERRY_E_INVALID); /* local only */
	size_t need;
	expect(ferry_descriptor_to_bytes(desc, wire, 3, &need), FERRY_E_BUFFER_TOO_SMALL);
	check(need == wire_len);
	char small[8];
	expect(ferry_descriptor_to_hex(desc, small, sizeof small, &need), FERRY_E_BUFFER_TOO_SMALL);
	check(need == 2 * wire_len);
	int32_t n;
	expect(ferry_engine_nics(0, &n), FERRY_E_BAD_HANDLE);
	expect(ferry_engine_nics(123456789, &n), FERRY_E_BAD_HANDLE);
	expect(ferry_engine_nics(desc, &n), FERRY_E_BAD_HANDLE);
	expect(ferry_engine_nics(a, NULL), FERRY_E_INVALID);
	expect(ferry_descriptor_free(t), FERRY_E_BAD_HANDLE);
	expect(ferry_counter_free(t), FERRY_E_BAD_HANDLE);

	/* Memory. */
	expect(ferry_register(a, NULL, 4096, FERRY_ACCESS_LOCAL, &scratch), FERRY_E_INVALID);
	expect(ferry_register(a, src, 0, FERRY_ACCESS_LOCAL, &scratch), FERRY_E_INVALID);
	expect(ferry_register(a, src, MIB, 7, &scratch), FERRY_E_INVALID);
	expect(ferry_host_alloc(0, (void **)&src), FERRY_E_INVALID);
	expect(ferry_host_free(src + 1), FERRY_E_INVALID);
	expect(ferry_host_free(dst), FERRY_E_BUSY); /* still registered */

	/* Waits: no unbounded wait, a timeout gives credits back. */
	int64_t count;
	expect(ferry_transfer_wait(t, -1), FERRY_E_INVALID);
	expect(ferry_transfer_wait(t, 0), FERRY_E_TIMEOUT); /* nothing submitted */
	expect(ferry_imm_counter_wait(credits, 1, 0), FERRY_E_TIMEOUT);
	expect(ferry_imm_counter_wait(credits, -1, 0), FERRY_E_INVALID);
	expect(ferry_imm_counter_count(credits, &count), FERRY_OK);
	check(count == 0);

	/* Immediates and the side channel. */
	expect(ferry_expect_imm(b, 0x200, 0, NULL, NULL, NULL), FERRY_E_INVALID);
	expect(ferry_remove_imm(b, 0x999, NULL), FERRY_E_INVALID);
	expect(ferry_on_imm(b, NULL, NULL), FERRY_E_INVALID);
	expect(ferry_recv_bouncing(b, 0, 64, NULL, NULL, NULL), FERRY_E_INVALID);
	expect(ferry_send(a, addr_b, addr_len, src, 65537, t, TIMEOUT_MS), FERRY_E_TOO_LARGE);
	expect(ferry_send(a, addr_b, 1, src, 1, t, TIMEOUT_MS), FERRY_E_BAD_ENCODING);
	expect(ferry_callback_new(NULL, NULL, &scratch), FERRY_E_INVALID);

	/* Nothing was posted and the engines still work. */
	ferry_stats st;
	expect(ferry_engine_stats(a, &st), FERRY_OK);
	check(st.posted == 0 && st.failed == 0);
	expect(ferry_submit_single(a, &sw, t), FERRY_OK);
	expect(ferry_transfer_wait(t, TIMEOUT_MS), FERRY_OK);
	expect(ferry_imm_counter_wait(credits, nics, TIMEOUT_MS), FERRY_OK);

	expect(ferry_transfer_free(t), FERRY_OK);
	expect(ferry_descriptor_free(desc), FERRY_OK);
	expect(ferry_engine_close(a, TIMEOUT_MS), FERRY_OK);
	expect(ferry_engine_close(b, TIMEOUT_MS), FERRY_OK);
	expect(ferry_host_free(src), FERRY_OK);
	expect(ferry_host_free(dst), FERRY_OK);
	expect(ferry_live_handles(&handles_now), FERRY_OK);
	check(handles_now == handles_at_start);
	printf("badinput %s: ok\n", transport);
	return 0;
}
