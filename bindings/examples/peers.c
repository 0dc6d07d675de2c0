/*
 * peers.c: failure semantics from C. A target engine's peer, a writer,
 * watches it (ferry_watch_peer) with a short liveness interval and a
 * callback for lost peers; the target closes; the writer learns it (the
 * callback runs, ferry_peer_status says FERRY_E_STALE_DESCRIPTOR, the kind
 * of FERRY_E_PEER_LOST of an engine gone for good) and a write to it fails
 * with FERRY_E_STALE_DESCRIPTOR long before the transfer deadline.
 *
 *     ./peers [transport]          (default "mem")
 */
#include <stdatomic.h>
#include <string.h>

#include "check.h"

static atomic_int lost;
static uint8_t lost_addr[256];
static size_t lost_len;

static void on_lost(void *ud, const uint8_t *addr, size_t n) {
	(void)ud;
	if (n <= sizeof lost_addr) {
		memcpy(lost_addr, addr, n);
		lost_len = n;
	}
	atomic_fetch_add(&lost, 1);
}

int main(int argc, char **argv) {
	const char *transport = argc > 1 ? argv[1] : "mem";
	check_label = "peers";
	ferry_config cfg;
	ferry_config_init(&cfg);
	cfg.transport = transport;
	cfg.log_level = FERRY_LOG_NONE;
	cfg.liveness_interval_ms = 20;
	cfg.request_timeout_ms = 60000;
	cfg.max_pending = 64;

	ferry_engine_t writer, target;
	expect(ferry_engine_open(&cfg, TIMEOUT_MS, &writer), FERRY_OK);
	expect(ferry_engine_open(&cfg, TIMEOUT_MS, &target), FERRY_OK);

	void *src, *dst;
	expect(ferry_host_alloc(MIB, &src), FERRY_OK);
	expect(ferry_host_alloc(MIB, &dst), FERRY_OK);
	ferry_region_t sreg, dreg;
	expect(ferry_register(writer, src, MIB, FERRY_ACCESS_LOCAL, &sreg), FERRY_OK);
	expect(ferry_register(target, dst, MIB, FERRY_ACCESS_REMOTE_WRITE, &dreg), FERRY_OK);
	ferry_descriptor_t desc;
	expect(ferry_region_descriptor(dreg, &desc), FERRY_OK);

	uint8_t addr[256];
	size_t addr_len = 0;
	expect(ferry_engine_address(target, addr, sizeof addr, &addr_len), FERRY_OK);
	expect(ferry_on_peer_lost(writer, on_lost, NULL), FERRY_OK);
	expect(ferry_on_peer_lost(writer, NULL, NULL), FERRY_E_INVALID);
	expect(ferry_watch_peer(writer, addr, addr_len), FERRY_OK);
	expect(ferry_watch_peer(writer, NULL, 0), FERRY_E_INVALID);
	expect(ferry_peer_status(writer, addr, addr_len), FERRY_OK);

	/* A write while the target lives. */
	ferry_transfer_t t;
	expect(ferry_transfer_new(&t), FERRY_OK);
	ferry_single_write w = {.src = sreg, .length = 4096, .dst = desc};
	expect(ferry_submit_single(writer, &w, t), FERRY_OK);
	expect(ferry_transfer_wait(t, TIMEOUT_MS), FERRY_OK);

	/* The target goes away. */
	expect(ferry_engine_close(target, TIMEOUT_MS), FERRY_OK);
	for (int i = 0; i < 5000 && atomic_load(&lost) == 0; i++)
		usleep(1000);
	check(atomic_load(&lost) >= 1);
	check(lost_len == addr_len && memcmp(lost_addr, addr, addr_len) == 0);
	expect(ferry_peer_status(writer, addr, addr_len), FERRY_E_STALE_DESCRIPTOR);

	/* A write to it now fails at once, not at the 60 s deadline. */
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	expect(ferry_submit_single(writer, &w, t), FERRY_OK);
	expect(ferry_transfer_wait(t, TIMEOUT_MS), FERRY_E_STALE_DESCRIPTOR);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double secs = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
	check(secs < 10.0);

	expect(ferry_transfer_free(t), FERRY_OK);
	expect(ferry_descriptor_free(desc), FERRY_OK);
	expect(ferry_engine_close(writer, TIMEOUT_MS), FERRY_OK);
	expect(ferry_host_free(src), FERRY_OK);
	expect(ferry_host_free(dst), FERRY_OK);
	printf("peers %s: ok (peer lost noticed, write failed after %.3f s)\n", transport, secs);
	return 0;
}
