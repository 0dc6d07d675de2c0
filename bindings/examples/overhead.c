/*
 * overhead.c: what the C ABI costs on top of the engine.
 *
 * Over the "null" transport (every write completes at once, no byte moves)
 * it times, from C:
 *   - a trivial call that crosses into Go and back (ferry_engine_nics),
 *   - ferry_counter_read, the callback-free completion poll,
 *   - ferry_submit_imm with a counter: the submit path, the same request as
 *     the Go benchmark fabric.BenchmarkSubmit (compare their p50s),
 *   - whole transfers: imm writes with a window of 256 in flight.
 *
 *   cc -O2 -o overhead overhead.c -I.. -L<dir> -lferry -Wl,-rpath,<dir>
 *   ./overhead [iterations]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ferry.h"

#define TIMEOUT_MS 20000

#define expect(call)                                                                   \
	do {                                                                           \
		int rc_ = (call);                                                      \
		if (rc_ != FERRY_OK) {                                                 \
			char m_[512];                                                  \
			ferry_last_error(m_, sizeof m_);                               \
			fprintf(stderr, "overhead: %s = %s (%s)\n", #call, ferry_strerror(rc_), m_); \
			exit(1);                                                       \
		}                                                                      \
	} while (0)

static uint64_t now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b) {
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static void report(const char *what, uint64_t *lat, int n) {
	qsort(lat, (size_t)n, sizeof *lat, cmp_u64);
	printf("%-34s p50 %6llu ns   p99 %7llu ns\n", what, (unsigned long long)lat[n / 2],
	       (unsigned long long)lat[(size_t)n * 99 / 100]);
}

int main(int argc, char **argv) {
	int n = argc > 1 ? atoi(argv[1]) : 200000;
	if (n < 1000)
		n = 1000;
	uint64_t *lat = calloc((size_t)n, sizeof *lat);

	ferry_config cfg;
	ferry_config_init(&cfg);
	cfg.transport = "null";
	cfg.log_level = FERRY_LOG_ERROR;
	ferry_engine_t a, b;
	cfg.poll = FERRY_POLL_SPIN; /* as fabric.BenchmarkSubmit's writer */
	expect(ferry_engine_open(&cfg, TIMEOUT_MS, &a));
	cfg.poll = FERRY_POLL_ADAPTIVE;
	expect(ferry_engine_open(&cfg, TIMEOUT_MS, &b));
	void *buf;
	expect(ferry_host_alloc(1 << 20, &buf));
	ferry_region_t dreg;
	ferry_descriptor_t desc;
	expect(ferry_register(b, buf, 1 << 20, FERRY_ACCESS_REMOTE_WRITE, &dreg));
	expect(ferry_region_descriptor(dreg, &desc));
	ferry_counter_t c;
	expect(ferry_counter_new(&c));

	int32_t nics;
	for (int i = 0; i < n; i++) {
		uint64_t t0 = now_ns();
		ferry_engine_nics(a, &nics);
		lat[i] = now_ns() - t0;
	}
	report("ferry_engine_nics (a crossing)", lat, n);

	int64_t done, errors;
	for (int i = 0; i < n; i++) {
		uint64_t t0 = now_ns();
		ferry_counter_read(c, &done, &errors);
		lat[i] = now_ns() - t0;
	}
	report("ferry_counter_read", lat, n);

	for (int i = 0; i < n; i++) {
		uint64_t t0 = now_ns();
		expect(ferry_submit_imm(a, 1, desc, NULL, c));
		lat[i] = now_ns() - t0;
		if ((i + 1) % 256 == 0)
			expect(ferry_counter_wait(c, i + 1 - 128, TIMEOUT_MS));
	}
	expect(ferry_counter_wait(c, n, TIMEOUT_MS));
	report("ferry_submit_imm (counter)", lat, n);

	uint64_t t0 = now_ns();
	for (int i = 0; i < n; i++) {
		expect(ferry_submit_imm(a, 1, desc, NULL, c));
		if ((i + 1) % 256 == 0)
			expect(ferry_counter_wait(c, (int64_t)n + i + 1 - 256, TIMEOUT_MS));
	}
	expect(ferry_counter_wait(c, 2 * (int64_t)n, TIMEOUT_MS));
	double s = (double)(now_ns() - t0) / 1e9;
	expect(ferry_counter_read(c, &done, &errors));
	printf("%-34s %.0f transfers/s (%.0f ns each), %lld errors\n", "imm transfers, window 256", n / s,
	       s * 1e9 / n, (long long)errors);

	expect(ferry_counter_free(c));
	expect(ferry_descriptor_free(desc));
	expect(ferry_engine_close(a, TIMEOUT_MS));
	expect(ferry_engine_close(b, TIMEOUT_MS));
	expect(ferry_host_free(buf));
	free(lat);
	return errors == 0 ? 0 : 1;
}
