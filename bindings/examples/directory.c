/*
 * directory.c: the directory functions of ABI 1.3. Two engines publish
 * themselves with labels, one a named region; a watch sees them join;
 * lookups by name and by selector, a wait for engines, the region's
 * descriptor written through; labels updated, an orderly close (closed)
 * and a directory handle dropped with its publication still open (lost,
 * at once on mem://, within the lease TTL on etcd), which
 * ferry_directory_lose_on_leave turns into a lost peer in the writer.
 * Bad input is refused with its code and a message naming the argument.
 *
 *     ./directory URL [transport]   (mem://NAME or etcd://HOST:PORT/PREFIX;
 *                                    transport default "mem")
 */
#include <string.h>

#include "check.h"

#define BUF 8192

/* next_event reads events until one of kind want arrives for name, and
 * returns its JSON text in buf; other events are checked to be well formed. */
static void next_event(int line, ferry_dir_watch_t w, int32_t want, const char *name, char *buf) {
	char key[256];
	snprintf(key, sizeof key, "\"name\":\"%s\"", name);
	double deadline = now_s() + 30;
	for (;;) {
		int32_t kind = 0;
		size_t n = 0;
		int rc = ferry_dir_watch_next(w, 1000, &kind, buf, BUF, &n);
		if (rc == FERRY_E_TIMEOUT && now_s() < deadline)
			continue;
		expect_at(line, "ferry_dir_watch_next", rc, FERRY_OK);
		check_at(line, "event length", n == strlen(buf));
		check_at(line, "event kind in range", kind >= FERRY_DIR_JOINED && kind <= FERRY_DIR_REJECTED);
		if (kind == want && strstr(buf, key) != NULL)
			return;
	}
}

int main(int argc, char **argv) {
	check_label = "directory";
	if (argc < 2) {
		fprintf(stderr, "usage: directory URL [transport]\n");
		return 2;
	}
	const char *url = argv[1];
	const char *transport = argc > 2 ? argv[2] : "mem";
	int etcd = strncmp(url, "etcd://", 7) == 0;
	uint64_t handles0 = 0, handles1 = 0;
	expect(ferry_live_handles(&handles0), FERRY_OK);
	check(ferry_version() >= ((1u << 16) | (3u << 8)));

	/* Bad input: each refused, naming what is wrong. */
	ferry_directory_t d = 0;
	expect_err(ferry_directory_open(NULL, 0, TIMEOUT_MS, &d), FERRY_E_INVALID, "url");
	expect_err(ferry_directory_open("redis://x", 0, TIMEOUT_MS, &d), FERRY_E_INVALID, "url");
	expect_err(ferry_directory_open("mem://", 0, TIMEOUT_MS, &d), FERRY_E_INVALID, "url");
	expect_err(ferry_directory_open(url, -1, TIMEOUT_MS, &d), FERRY_E_INVALID, "ttl_ms");
	expect_err(ferry_directory_open(url, 0, -1, &d), FERRY_E_INVALID, "timeout");
	expect_err(ferry_directory_open(url, 0, TIMEOUT_MS, NULL), FERRY_E_INVALID, "out");
	if (etcd) {
		/* Nothing listens on port 1: unreachable, within the timeout. */
		double t0 = now_s();
		expect(ferry_directory_open("etcd://127.0.0.1:1/ferry", 0, 500, &d), FERRY_E_UNAVAILABLE);
		check(now_s() - t0 < 10);
	}
	expect(ferry_directory_close(12345), FERRY_E_BAD_HANDLE);

	ferry_directory_t dir, other;
	expect(ferry_directory_open(url, 2000, TIMEOUT_MS, &dir), FERRY_OK);
	expect(ferry_directory_open(url, 2000, TIMEOUT_MS, &other), FERRY_OK);

	ferry_config cfg;
	ferry_config_init(&cfg);
	cfg.transport = transport;
	cfg.log_level = FERRY_LOG_NONE;
	cfg.liveness_interval_ms = 60000; /* only the directory reports losses here */
	ferry_engine_t writer, target;
	open_or_skip(&cfg, &writer);
	open_or_skip(&cfg, &target);
	void *src, *dst;
	expect(ferry_host_alloc(MIB, &src), FERRY_OK);
	expect(ferry_host_alloc(MIB, &dst), FERRY_OK);
	memset(src, 0x5a, 4096);
	ferry_region_t sreg, dreg;
	expect(ferry_register(writer, src, MIB, FERRY_ACCESS_REMOTE_WRITE, &sreg), FERRY_OK);
	expect(ferry_register(target, dst, MIB, FERRY_ACCESS_REMOTE_WRITE, &dreg), FERRY_OK);
	ferry_descriptor_t ddesc, sdesc;
	expect(ferry_region_descriptor(dreg, &ddesc), FERRY_OK);
	expect(ferry_region_descriptor(sreg, &sdesc), FERRY_OK);

	ferry_dir_watch_t w;
	expect(ferry_directory_watch(dir, TIMEOUT_MS, &w), FERRY_OK);
	expect(ferry_directory_watch(dir, TIMEOUT_MS, NULL), FERRY_E_INVALID);
	expect_err(ferry_directory_watch(dir, -1, &w), FERRY_E_INVALID, "timeout");

	const char *wl[] = {"role=prefill", "model=m1"};
	const char *tl[] = {"role=decode", "model=m1"};
	ferry_publication_t wp, tp, lp;
	expect_err(ferry_directory_publish(dir, writer, NULL, wl, 2, TIMEOUT_MS, &wp), FERRY_E_INVALID, "name");
	expect_err(ferry_directory_publish(dir, writer, "bad/name", wl, 2, TIMEOUT_MS, &wp), FERRY_E_INVALID, "name");
	const char *badl[] = {"noequals"};
	expect_err(ferry_directory_publish(dir, writer, "w", badl, 1, TIMEOUT_MS, &wp), FERRY_E_INVALID, "labels[0]");
	expect_err(ferry_directory_publish(dir, writer, "w", NULL, 1, TIMEOUT_MS, &wp), FERRY_E_INVALID, "labels");
	expect(ferry_directory_publish(dir, 999999, "w", wl, 2, TIMEOUT_MS, &wp), FERRY_E_BAD_HANDLE);
	expect(ferry_directory_publish(dir, writer, "w", wl, 2, TIMEOUT_MS, &wp), FERRY_OK);
	expect(ferry_directory_publish(dir, target, "w", tl, 2, TIMEOUT_MS, &tp), FERRY_E_EXISTS);
	expect(ferry_directory_publish(dir, target, "t", tl, 2, TIMEOUT_MS, &tp), FERRY_OK);

	/* Regions: the target's, with metadata; another engine's descriptor
	 * under the target's name is refused. */
	const char *meta[] = {"layer=3", "dtype=bf16"};
	expect(ferry_publication_add_region(tp, "kv", ddesc, meta, 2, TIMEOUT_MS), FERRY_OK);
	expect(ferry_publication_add_region(tp, "stolen", sdesc, NULL, 0, TIMEOUT_MS), FERRY_E_NIC_MISMATCH);
	expect_err(ferry_publication_add_region(tp, "kv", 0, NULL, 0, TIMEOUT_MS), FERRY_E_BAD_HANDLE, "descriptor");
	expect(ferry_publication_add_region(tp, "tmp", ddesc, NULL, 0, TIMEOUT_MS), FERRY_OK);
	expect(ferry_publication_remove_region(tp, "tmp", TIMEOUT_MS), FERRY_OK);
	expect(ferry_publication_remove_region(tp, "tmp", TIMEOUT_MS), FERRY_E_NOT_FOUND);

	/* The watch saw both join. */
	char buf[BUF];
	next_event(__LINE__, w, FERRY_DIR_JOINED, "w", buf);
	check(strstr(buf, "\"kind\":\"joined\"") != NULL && strstr(buf, "\"role\":\"prefill\"") != NULL);
	next_event(__LINE__, w, FERRY_DIR_JOINED, "t", buf);

	/* Lookups. */
	size_t n = 0;
	expect(ferry_directory_lookup(other, "t", TIMEOUT_MS, buf, sizeof buf, &n), FERRY_OK);
	check(strstr(buf, "\"name\":\"t\"") && strstr(buf, "\"role\":\"decode\"") && strstr(buf, "\"nics\":"));
	char small[4];
	expect(ferry_directory_lookup(other, "t", TIMEOUT_MS, small, sizeof small, &n), FERRY_E_BUFFER_TOO_SMALL);
	check(n > sizeof small);
	expect(ferry_directory_lookup(other, "nobody", TIMEOUT_MS, buf, sizeof buf, &n), FERRY_E_NOT_FOUND);
	expect_err(ferry_directory_lookup(other, "a/b", TIMEOUT_MS, buf, sizeof buf, &n), FERRY_E_INVALID, "name");
	expect_err(ferry_directory_lookup(other, NULL, TIMEOUT_MS, buf, sizeof buf, &n), FERRY_E_INVALID, "name");

	/* The entry's main address is the engine's. */
	char addr_hex[600];
	expect(ferry_directory_lookup(other, "t", TIMEOUT_MS, buf, sizeof buf, &n), FERRY_OK);
	const char *a0 = strstr(buf, "\"addrs\":[\"");
	check(a0 != NULL);
	a0 += strlen("\"addrs\":[\"");
	const char *a1 = strchr(a0, '"');
	check(a1 != NULL && (size_t)(a1 - a0) < sizeof addr_hex);
	memcpy(addr_hex, a0, (size_t)(a1 - a0));
	addr_hex[a1 - a0] = 0;
	uint8_t addr[300], want_addr[300];
	size_t alen = 0, wlen = 0;
	expect(ferry_address_from_hex(addr_hex, addr, sizeof addr, &alen), FERRY_OK);
	expect(ferry_engine_address(target, want_addr, sizeof want_addr, &wlen), FERRY_OK);
	check(alen == wlen && memcmp(addr, want_addr, alen) == 0);
	expect(ferry_address_from_hex("zz", addr, sizeof addr, &alen), FERRY_E_BAD_ENCODING);
	expect_err(ferry_address_from_hex(NULL, addr, sizeof addr, &alen), FERRY_E_INVALID, "hex");

	/* Selectors. */
	expect(ferry_directory_select(other, "role=decode", TIMEOUT_MS, buf, sizeof buf, &n), FERRY_OK);
	check(buf[0] == '[' && strstr(buf, "\"name\":\"t\"") && !strstr(buf, "\"name\":\"w\""));
	expect(ferry_directory_select(other, "model=m1", TIMEOUT_MS, buf, sizeof buf, &n), FERRY_OK);
	check(strstr(buf, "\"name\":\"t\"") && strstr(buf, "\"name\":\"w\""));
	expect(ferry_directory_select(other, "role=nothing", TIMEOUT_MS, buf, sizeof buf, &n), FERRY_OK);
	check(strcmp(buf, "[]") == 0);
	expect_err(ferry_directory_select(other, "a/b=c", TIMEOUT_MS, buf, sizeof buf, &n), FERRY_E_INVALID, "selector");
	expect(ferry_directory_wait_for(other, "model=m1", 2, TIMEOUT_MS, buf, sizeof buf, &n), FERRY_OK);
	check(strstr(buf, "\"name\":\"t\"") && strstr(buf, "\"name\":\"w\""));
	double t0 = now_s();
	expect(ferry_directory_wait_for(other, "model=m1", 3, 300, buf, sizeof buf, &n), FERRY_E_TIMEOUT);
	check(now_s() - t0 < 10);
	expect_err(ferry_directory_wait_for(other, NULL, 0, 300, buf, sizeof buf, &n), FERRY_E_INVALID, "n 0");

	/* The region, found by name, written through. */
	ferry_descriptor_t found;
	expect(ferry_directory_region(other, "t", "kv", TIMEOUT_MS, &found, small, sizeof small, &n), FERRY_E_BUFFER_TOO_SMALL);
	expect(ferry_directory_region(other, "t", "nothing", TIMEOUT_MS, &found, buf, sizeof buf, &n), FERRY_E_NOT_FOUND);
	expect(ferry_directory_region(other, "nobody", "kv", TIMEOUT_MS, &found, buf, sizeof buf, &n), FERRY_E_NOT_FOUND);
	expect_err(ferry_directory_region(other, "t", "kv", TIMEOUT_MS, NULL, buf, sizeof buf, &n), FERRY_E_INVALID, "desc");
	expect(ferry_directory_region(other, "t", "kv", TIMEOUT_MS, &found, buf, sizeof buf, &n), FERRY_OK);
	check(strstr(buf, "\"layer\":\"3\"") && strstr(buf, "\"dtype\":\"bf16\""));
	uint64_t length = 0;
	expect(ferry_descriptor_info(found, NULL, &length, NULL), FERRY_OK);
	check(length == MIB);
	ferry_transfer_t t;
	expect(ferry_transfer_new(&t), FERRY_OK);
	ferry_single_write sw = {.src = sreg, .length = 4096, .dst = found};
	expect(ferry_submit_single(writer, &sw, t), FERRY_OK);
	expect(ferry_transfer_wait(t, TIMEOUT_MS), FERRY_OK);
	check(memcmp(dst, src, 4096) == 0);

	/* Labels change: updated. */
	const char *wl2[] = {"role=prefill", "model=m1", "load=7"};
	expect(ferry_publication_set_labels(wp, wl2, 3, TIMEOUT_MS), FERRY_OK);
	next_event(__LINE__, w, FERRY_DIR_UPDATED, "w", buf);
	check(strstr(buf, "\"load\":\"7\"") != NULL);

	/* An event that does not fit stays first in line. */
	expect(ferry_directory_publish(dir, writer, "w2", NULL, 0, TIMEOUT_MS, &lp), FERRY_OK);
	int32_t kind = 0;
	int rc;
	t0 = now_s();
	while ((rc = ferry_dir_watch_next(w, 1000, &kind, small, sizeof small, &n)) == FERRY_E_TIMEOUT && now_s() - t0 < 30)
		;
	expect(rc, FERRY_E_BUFFER_TOO_SMALL);
	check(n > sizeof small);
	expect(ferry_dir_watch_next(w, 0, &kind, buf, sizeof buf, &n), FERRY_OK);
	check(kind == FERRY_DIR_JOINED && strstr(buf, "\"name\":\"w2\""));
	expect(ferry_publication_close(lp, TIMEOUT_MS), FERRY_OK);
	next_event(__LINE__, w, FERRY_DIR_CLOSED, "w2", buf);
	expect(ferry_dir_watch_next(w, 0, &kind, buf, sizeof buf, &n), FERRY_E_TIMEOUT);
	expect_err(ferry_dir_watch_next(w, -1, &kind, buf, sizeof buf, &n), FERRY_E_INVALID, "timeout");

	/* The writer's peers follow the directory. The target is published a
	 * second time through the other handle, which is then dropped with
	 * its publication open: the entry is lost (at once in memory, within
	 * the TTL on etcd), and the writer declares the target's address lost
	 * without any check of its own. */
	expect(ferry_directory_lose_on_leave(dir, writer, TIMEOUT_MS), FERRY_OK);
	ferry_publication_t tp2;
	expect(ferry_directory_publish(other, target, "t-again", NULL, 0, TIMEOUT_MS, &tp2), FERRY_OK);
	next_event(__LINE__, w, FERRY_DIR_JOINED, "t-again", buf);
	expect(ferry_peer_status(writer, want_addr, wlen), FERRY_OK);
	t0 = now_s();
	expect(ferry_directory_close(other), FERRY_OK);
	expect(ferry_publication_close(tp2, TIMEOUT_MS), FERRY_E_BAD_HANDLE); /* released with its directory */
	next_event(__LINE__, w, FERRY_DIR_LOST, "t-again", buf);
	double lost_s = now_s() - t0;
	for (int i = 0; i < 5000 && ferry_peer_status(writer, want_addr, wlen) == FERRY_OK; i++)
		usleep(1000);
	expect(ferry_peer_status(writer, want_addr, wlen), FERRY_E_PEER_LOST);
	expect(ferry_submit_single(writer, &sw, t), FERRY_OK);
	expect(ferry_transfer_wait(t, TIMEOUT_MS), FERRY_E_PEER_LOST);
	printf("directory: entry dropped with its publication open seen lost after %.2f s\n", lost_s);

	/* Orderly close: closed, not lost. */
	expect(ferry_publication_close(wp, TIMEOUT_MS), FERRY_OK);
	next_event(__LINE__, w, FERRY_DIR_CLOSED, "w", buf);
	expect(ferry_publication_close(wp, TIMEOUT_MS), FERRY_E_BAD_HANDLE);
	expect(ferry_publication_close(tp, TIMEOUT_MS), FERRY_OK);
	next_event(__LINE__, w, FERRY_DIR_CLOSED, "t", buf);

	/* Close ends the watch and releases it. */
	ferry_dir_watch_t w2;
	expect(ferry_directory_watch(dir, TIMEOUT_MS, &w2), FERRY_OK);
	expect(ferry_dir_watch_close(w2), FERRY_OK);
	expect(ferry_dir_watch_close(w2), FERRY_E_BAD_HANDLE);
	expect(ferry_directory_close(dir), FERRY_OK);
	expect(ferry_dir_watch_next(w, 0, &kind, buf, sizeof buf, &n), FERRY_E_BAD_HANDLE);
	expect(ferry_directory_lookup(dir, "t", TIMEOUT_MS, buf, sizeof buf, &n), FERRY_E_BAD_HANDLE);

	expect(ferry_transfer_free(t), FERRY_OK);
	expect(ferry_descriptor_free(found), FERRY_OK);
	expect(ferry_descriptor_free(ddesc), FERRY_OK);
	expect(ferry_descriptor_free(sdesc), FERRY_OK);
	expect(ferry_engine_close(writer, TIMEOUT_MS), FERRY_OK);
	expect(ferry_engine_close(target, TIMEOUT_MS), FERRY_OK);
	expect(ferry_host_free(src), FERRY_OK);
	expect(ferry_host_free(dst), FERRY_OK);
	expect(ferry_live_handles(&handles1), FERRY_OK);
	check(handles1 == handles0);
	printf("directory %s over %s: ok\n", etcd ? "etcd" : "mem", transport);
	return 0;
}
