/*
 * read.c: RDMA READ through the C ABI (1.5). Engine b registers a region
 * readable (FERRY_ACCESS_REMOTE_READ) and a write-only one; engine a
 * reads from the readable one with ferry_submit_read (pinned and
 * sharded), ferry_submit_paged_read and ferry_submit_scatter_read (from b
 * and a third engine c), checking every byte and the bytes around each
 * range. A read of the write-only region fails with FERRY_E_NOT_READABLE
 * where the transport checks read access at the target (mem, ipc, verbs;
 * libfabric's tcp and shm do not, and the program does not try there).
 * Bad input is refused at submit. ferry_expected_imms gives the counts of
 * fabric.ExpectedImms; a sharded write between unequal groups delivers
 * exactly that many immediates.
 *
 *   cc -o read read.c -I.. -L<dir> -lferry -Wl,-rpath,<dir>
 *   ./read mem - 2
 *
 * Arguments: transport [node|-] [nics]. Exit status as loopback.c's.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

#define REGION (4 * MIB)

static int libfabric(const char *transport) {
	return strcmp(transport, "shm") == 0 || strcmp(transport, "tcp;ofi_rxm") == 0;
}

/* reads one request through t and returns its result. */
static int wait_read(ferry_transfer_t t, int rc) {
	if (rc != FERRY_OK)
		return rc;
	return ferry_transfer_wait(t, TIMEOUT_MS);
}

/* same reports whether dst[d, +n) equals src[s, +n), and the byte after the
 * range (and the one before, when there is one) is still zero. */
static int same(const uint8_t *dst, uint64_t d, const uint8_t *src, uint64_t s, uint64_t n) {
	return memcmp(dst + d, src + s, n) == 0 && dst[d + n] == 0 && (d == 0 || dst[d - 1] == 0);
}

int main(int argc, char **argv) {
	ferry_config cfg;
	example_config(argc, argv, "read", &cfg);
	const char *transport = cfg.transport;
	int nics = cfg.nics;
	check(ferry_version() >= ((1u << 16) | (5u << 8)));
	check(strcmp(ferry_strerror(FERRY_E_NOT_READABLE), "FERRY_E_NOT_READABLE") == 0);

	ferry_engine_t a, b, c;
	open_or_skip(&cfg, &a);
	expect(ferry_engine_open(&cfg, TIMEOUT_MS, &b), FERRY_OK);
	expect(ferry_engine_open(&cfg, TIMEOUT_MS, &c), FERRY_OK);

	uint8_t *src, *src_c, *dst;
	expect(ferry_host_alloc(REGION, (void **)&src), FERRY_OK);
	expect(ferry_host_alloc(REGION, (void **)&src_c), FERRY_OK);
	expect(ferry_host_alloc(REGION, (void **)&dst), FERRY_OK);
	for (uint64_t i = 0; i < REGION; i++) {
		src[i] = (uint8_t)(i * 31 + (i >> 9) + 1);
		src_c[i] = (uint8_t)(i * 13 + 5);
	}
	ferry_region_t src_reg, src_c_reg, wonly_reg, dst_reg;
	expect(ferry_register(b, src, REGION, FERRY_ACCESS_REMOTE_READ | FERRY_ACCESS_REMOTE_WRITE, &src_reg), FERRY_OK);
	expect(ferry_register(c, src_c, REGION, FERRY_ACCESS_REMOTE_READ, &src_c_reg), FERRY_OK);
	expect(ferry_register(a, dst, REGION, FERRY_ACCESS_LOCAL, &dst_reg), FERRY_OK);
	expect(ferry_register(b, src, REGION, 4, &wonly_reg), FERRY_E_INVALID); /* an unknown access bit */
	ferry_descriptor_t desc, desc_c;
	expect(ferry_region_descriptor(src_reg, &desc), FERRY_OK);
	expect(ferry_region_descriptor(src_c_reg, &desc_c), FERRY_OK); /* read-only regions have one too */
	ferry_transfer_t t;
	expect(ferry_transfer_new(&t), FERRY_OK);

	/* Single reads: pinned and sharded, odd sizes and offsets. */
	struct {
		uint64_t n, s, d;
		ferry_route route;
	} singles[] = {
		{1, 0, 0, {FERRY_ROUTE_PINNED, 0}},
		{7, 4093, 17, {FERRY_ROUTE_SHARDED, 0}},
		{4097, 1, 3, {FERRY_ROUTE_PINNED, nics - 1}},
		{MIB + 3, 5, 4099, {FERRY_ROUTE_SHARDED, 0}},
		{REGION - 8, 7, 1, {FERRY_ROUTE_SHARDED, 0}},
	};
	for (size_t k = 0; k < sizeof singles / sizeof singles[0]; k++) {
		memset(dst, 0, REGION);
		ferry_single_read r = {.dst = dst_reg, .dst_offset = singles[k].d, .length = singles[k].n,
		                       .src = desc, .src_offset = singles[k].s, .route = singles[k].route};
		expect(wait_read(t, ferry_submit_read(a, &r, t)), FERRY_OK);
		check(same(dst, singles[k].d, src, singles[k].s, singles[k].n));
	}

	/* A paged read: 37 pages of 1000 bytes in shuffled order. */
	enum { PAGES = 37, PAGE = 1000 };
	uint32_t sp[PAGES], dp[PAGES];
	for (uint32_t i = 0; i < PAGES; i++) {
		sp[i] = (i * 11) % PAGES;
		dp[i] = i;
	}
	memset(dst, 0, REGION);
	ferry_paged_read pr = {.dst = dst_reg, .dst_pages = dp, .dst_stride = 1024, .dst_offset = 3,
	                       .src = desc, .src_pages = sp, .src_stride = 4099, .src_offset = 1,
	                       .pages = PAGES, .length = PAGE};
	expect(wait_read(t, ferry_submit_paged_read(a, &pr, t)), FERRY_OK);
	for (uint32_t i = 0; i < PAGES; i++)
		check(memcmp(dst + 3 + 1024 * (uint64_t)dp[i], src + 1 + 4099 * (uint64_t)sp[i], PAGE) == 0);

	/* Scatter reads from b and c, every routing. */
	ferry_scatter_source ss[4] = {
		{.src = desc, .length = 100, .src_offset = 11, .dst_offset = 0},
		{.src = desc_c, .length = 70001, .src_offset = 3, .dst_offset = 200},
		{.src = desc, .length = 0, .src_offset = 0, .dst_offset = 80000},
		{.src = desc_c, .length = 2 * MIB + 1, .src_offset = 999, .dst_offset = 90001},
	};
	ferry_route routes[3] = {{FERRY_ROUTE_SHARDED, 0}, {FERRY_ROUTE_SHARD_BYTES, 0}, {FERRY_ROUTE_PINNED, nics - 1}};
	for (int k = 0; k < 3; k++) {
		memset(dst, 0, REGION);
		ferry_scatter_read sr = {.dst = dst_reg, .sources = ss, .count = 4, .route = routes[k]};
		expect(wait_read(t, ferry_submit_scatter_read(a, &sr, t)), FERRY_OK);
		check(same(dst, 0, src, 11, 100));
		check(same(dst, 200, src_c, 3, 70001));
		check(same(dst, 90001, src_c, 999, 2 * MIB + 1));
	}

	/* Bad input: refused at submit, nothing posted. */
	ferry_single_read bad = {.dst = dst_reg, .length = 16, .src = desc, .src_offset = REGION - 8};
	expect_err(ferry_submit_read(a, &bad, t), FERRY_E_OUT_OF_BOUNDS, "source");
	bad = (ferry_single_read){.dst = dst_reg, .length = 16, .dst_offset = REGION - 8, .src = desc};
	expect_err(ferry_submit_read(a, &bad, t), FERRY_E_OUT_OF_BOUNDS, "destination");
	bad = (ferry_single_read){.dst = src_reg, .length = 16, .src = desc}; /* b's region */
	expect(ferry_submit_read(a, &bad, t), FERRY_E_UNKNOWN_REGION);
	bad = (ferry_single_read){.dst = dst_reg, .length = 16, .src = 0};
	expect(ferry_submit_read(a, &bad, t), FERRY_E_BAD_HANDLE);
	bad = (ferry_single_read){.dst = dst_reg, .length = 16, .src = desc, .route = {7, 0}};
	expect(ferry_submit_read(a, &bad, t), FERRY_E_INVALID);
	expect(ferry_submit_read(a, NULL, t), FERRY_E_INVALID);
	ferry_paged_read bad_pages = pr;
	bad_pages.src_pages = NULL;
	expect(ferry_submit_paged_read(a, &bad_pages, t), FERRY_E_INVALID);
	ferry_scatter_read bad_scatter = {.dst = dst_reg, .sources = NULL, .count = 2};
	expect(ferry_submit_scatter_read(a, &bad_scatter, t), FERRY_E_INVALID);
	bad_scatter = (ferry_scatter_read){.dst = dst_reg, .sources = ss, .count = 0};
	expect_err(ferry_submit_scatter_read(a, &bad_scatter, t), FERRY_E_INVALID, "no sources");

	/* A write-only region cannot be read, where the target checks. */
	if (!libfabric(transport)) {
		expect(ferry_register(b, src, REGION, FERRY_ACCESS_REMOTE_WRITE, &wonly_reg), FERRY_OK);
		ferry_descriptor_t wdesc;
		expect(ferry_region_descriptor(wonly_reg, &wdesc), FERRY_OK);
		memset(dst, 0, 4096);
		ferry_single_read r = {.dst = dst_reg, .length = 4096, .src = wdesc,
		                       .route = {FERRY_ROUTE_PINNED, 0}};
		expect(wait_read(t, ferry_submit_read(a, &r, t)), FERRY_E_NOT_READABLE);
		for (int i = 0; i < 4096; i++)
			check(dst[i] == 0);
		expect(ferry_descriptor_free(wdesc), FERRY_OK);
		expect(ferry_unregister(wonly_reg), FERRY_OK);
		/* The readable region still reads. */
		r.src = desc;
		expect(wait_read(t, ferry_submit_read(a, &r, t)), FERRY_OK);
		check(memcmp(dst, src, 4096) == 0);
	}

	/* ferry_expected_imms. */
	int64_t n = -1;
	ferry_route sharded = {FERRY_ROUTE_SHARDED, 0}, pinned = {FERRY_ROUTE_PINNED, 0},
	            bytes = {FERRY_ROUTE_SHARD_BYTES, 0}, three = {FERRY_ROUTE_SHARDED, 3};
	expect(ferry_expected_imms(FERRY_SHAPE_SINGLE, &sharded, 0, 1, 4, &n), FERRY_OK);
	check(n == 4);
	expect(ferry_expected_imms(FERRY_SHAPE_SINGLE, NULL, 0, 4, 2, &n), FERRY_OK);
	check(n == 4);
	expect(ferry_expected_imms(FERRY_SHAPE_SINGLE, &pinned, 0, 4, 2, &n), FERRY_OK);
	check(n == 1);
	expect(ferry_expected_imms(FERRY_SHAPE_SINGLE, &three, 0, 2, 1, &n), FERRY_OK);
	check(n == 0); /* more shards than NICs: the submit refuses it */
	expect(ferry_expected_imms(FERRY_SHAPE_PAGED, NULL, 37, 2, 4, &n), FERRY_OK);
	check(n == 37);
	expect(ferry_expected_imms(FERRY_SHAPE_SCATTER, &sharded, 5, 4, 1, &n), FERRY_OK);
	check(n == 5);
	expect(ferry_expected_imms(FERRY_SHAPE_SCATTER, &bytes, 5, 4, 1, &n), FERRY_OK);
	check(n == 20);
	expect(ferry_expected_imms(FERRY_SHAPE_IMM, NULL, 0, 1, 1, &n), FERRY_OK);
	check(n == 1);
	expect(ferry_expected_imms(FERRY_SHAPE_BARRIER, NULL, 3, 1, 2, &n), FERRY_OK);
	check(n == 3);
	expect_err(ferry_expected_imms(9, NULL, 0, 1, 1, &n), FERRY_E_INVALID, "shape");
	expect(ferry_expected_imms(FERRY_SHAPE_SINGLE, NULL, 0, 0, 1, &n), FERRY_E_INVALID);
	expect(ferry_expected_imms(FERRY_SHAPE_SINGLE, NULL, 0, 1, 5, &n), FERRY_E_INVALID);
	expect(ferry_expected_imms(FERRY_SHAPE_PAGED, NULL, -1, 1, 1, &n), FERRY_E_INVALID);
	ferry_route badroute = {9, 0};
	expect(ferry_expected_imms(FERRY_SHAPE_SINGLE, &badroute, 0, 1, 1, &n), FERRY_E_INVALID);
	expect(ferry_expected_imms(FERRY_SHAPE_SINGLE, NULL, 0, 1, 1, NULL), FERRY_E_INVALID);

	/* The count a receiver waits for: a sharded write from a (nics NICs)
	 * into b's region (nics NICs) delivers exactly what it says. */
	int32_t target_nics = 0;
	expect(ferry_descriptor_info(desc, NULL, NULL, &target_nics), FERRY_OK);
	expect(ferry_expected_imms(FERRY_SHAPE_SINGLE, &sharded, 0, nics, target_nics, &n), FERRY_OK);
	check(n == (nics > target_nics ? nics : target_nics));
	ferry_imm_counter_t landed;
	expect(ferry_imm_counter_new(b, 0x5eed, &landed), FERRY_OK);
	ferry_single_write w = {.src = dst_reg, .length = 65536, .dst = desc, .dst_offset = 0, .imm = 0x5eed,
	                        .has_imm = 1, .route = sharded};
	expect(ferry_submit_single(a, &w, t), FERRY_OK);
	expect(ferry_transfer_wait(t, TIMEOUT_MS), FERRY_OK);
	expect(ferry_imm_counter_wait(landed, n, TIMEOUT_MS), FERRY_OK);
	usleep(20000); /* an extra immediate would be counted by now */
	int64_t count = -1;
	expect(ferry_imm_counter_count(landed, &count), FERRY_OK);
	check(count == 0); /* every arrival was one of the n credits taken */
	expect(ferry_imm_counter_free(landed), FERRY_OK);

	expect(ferry_transfer_free(t), FERRY_OK);
	expect(ferry_descriptor_free(desc), FERRY_OK);
	expect(ferry_descriptor_free(desc_c), FERRY_OK);
	expect(ferry_engine_close(a, TIMEOUT_MS), FERRY_OK);
	expect(ferry_engine_close(b, TIMEOUT_MS), FERRY_OK);
	expect(ferry_engine_close(c, TIMEOUT_MS), FERRY_OK);
	expect(ferry_host_free(src), FERRY_OK);
	expect(ferry_host_free(src_c), FERRY_OK);
	expect(ferry_host_free(dst), FERRY_OK);
	printf("read %s: ok\n", transport);
	return 0;
}
