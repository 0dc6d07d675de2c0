/*
 * notified.c: requests that carry notifications, registration counts and
 * huge-page host memory through the C ABI (1.6). Engine a writes to b and
 * c with ferry_submit_notified: a sharded single write and a paged write
 * with one notification, a scatter to both with one notification per
 * target engine; each target checks every byte of the request the moment
 * its notification is handed over. A mailbox queues FERRY_MAILBOX_DEPTH
 * notifications, returned in order; a second engine sending to the same
 * mailbox is reported as FERRY_E_NOTIFICATIONS_LOST. Bad input is refused
 * at submit. ferry_engine_registration_stats counts a range-cache hit;
 * ferry_host_alloc_with gives base pages or huge pages as asked, or says
 * why not.
 *
 *   cc -o notified notified.c -I.. -L<dir> -lferry -Wl,-rpath,<dir>
 *   ./notified mem - 2
 *
 * Arguments: transport [node|-] [nics]. Exit status as loopback.c's.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

#define REGION (4 * MIB)

/* A lease on engine e and its mailbox's bytes. */
typedef struct {
	ferry_lease_t lease;
	uint8_t box[256];
	size_t box_len;
} mailbox;

static void lease_with_box(ferry_engine_t e, mailbox *m) {
	uint32_t first = 0;
	expect(ferry_lease_imms(e, 1, &m->lease, &first), FERRY_OK);
	expect(ferry_lease_mailbox(m->lease, m->box, sizeof m->box, &m->box_len), FERRY_OK);
}

/* take waits for m's next notification and checks its payload. */
static void take(mailbox *m, const char *want) {
	char got[FERRY_MAX_NOTIFY_PAYLOAD];
	size_t n = 0;
	expect(ferry_lease_wait_notification(m->lease, TIMEOUT_MS, got, sizeof got, &n, NULL), FERRY_OK);
	check(n == strlen(want) && memcmp(got, want, n) == 0);
}

int main(int argc, char **argv) {
	ferry_config cfg;
	example_config(argc, argv, "notified", &cfg);
	const char *transport = cfg.transport;
	check(ferry_version() >= ((1u << 16) | (6u << 8)));
	check(strcmp(ferry_strerror(FERRY_E_NOTIFICATIONS_LOST), "FERRY_E_NOTIFICATIONS_LOST") == 0);

	ferry_engine_t a, b, c;
	open_or_skip(&cfg, &a);
	expect(ferry_engine_open(&cfg, TIMEOUT_MS, &b), FERRY_OK);
	expect(ferry_engine_open(&cfg, TIMEOUT_MS, &c), FERRY_OK);

	uint8_t *src, *src_c, *dst_b, *dst_c;
	expect(ferry_host_alloc(REGION, (void **)&src), FERRY_OK);
	expect(ferry_host_alloc(REGION, (void **)&src_c), FERRY_OK);
	expect(ferry_host_alloc(REGION, (void **)&dst_b), FERRY_OK);
	expect(ferry_host_alloc(REGION, (void **)&dst_c), FERRY_OK);
	for (uint64_t i = 0; i < REGION; i++)
		src[i] = (uint8_t)(i * 29 + (i >> 11) + 3);
	ferry_region_t src_reg, src_c_reg, b_reg, c_reg;
	expect(ferry_register(a, src, REGION, FERRY_ACCESS_LOCAL, &src_reg), FERRY_OK);
	expect(ferry_register(c, src_c, REGION, FERRY_ACCESS_LOCAL, &src_c_reg), FERRY_OK);
	expect(ferry_register(b, dst_b, REGION, FERRY_ACCESS_REMOTE_WRITE, &b_reg), FERRY_OK);
	expect(ferry_register(c, dst_c, REGION, FERRY_ACCESS_REMOTE_WRITE, &c_reg), FERRY_OK);
	ferry_descriptor_t desc_b, desc_c;
	expect(ferry_region_descriptor(b_reg, &desc_b), FERRY_OK);
	expect(ferry_region_descriptor(c_reg, &desc_c), FERRY_OK);
	ferry_transfer_t t;
	expect(ferry_transfer_new(&t), FERRY_OK);

	/* A sharded single write over every NIC, then a paged write, each
	 * with its notification: the bytes are all there when it arrives. */
	mailbox mb;
	lease_with_box(b, &mb);
	ferry_single_write w = {.src = src_reg, .src_offset = 5, .length = 3 * MIB + 1, .dst = desc_b,
	                        .dst_offset = 7, .route = {FERRY_ROUTE_SHARDED, 0}};
	ferry_notification note = {.mailbox = mb.box, .mailbox_len = mb.box_len, .payload = "single", .len = 6};
	expect(ferry_submit_notified(a, FERRY_SHAPE_SINGLE, &w, &note, 1, t), FERRY_OK);
	take(&mb, "single");
	check(memcmp(dst_b + 7, src + 5, 3 * MIB + 1) == 0);
	expect(ferry_transfer_wait(t, TIMEOUT_MS), FERRY_OK);

	enum { PAGES = 24, PAGE = 65536 };
	uint32_t sp[PAGES], dp[PAGES];
	for (uint32_t i = 0; i < PAGES; i++) {
		sp[i] = (i * 7) % PAGES;
		dp[i] = i;
	}
	memset(dst_b, 0, REGION);
	ferry_paged_write pw = {.src = src_reg, .src_pages = sp, .src_stride = PAGE, .dst = desc_b,
	                        .dst_pages = dp, .dst_stride = PAGE, .dst_offset = 3, .pages = PAGES,
	                        .length = PAGE};
	note.payload = "paged";
	note.len = 5;
	expect(ferry_submit_notified(a, FERRY_SHAPE_PAGED, &pw, &note, 1, t), FERRY_OK);
	take(&mb, "paged");
	for (uint32_t i = 0; i < PAGES; i++)
		check(memcmp(dst_b + 3 + (uint64_t)dp[i] * PAGE, src + (uint64_t)sp[i] * PAGE, PAGE) == 0);
	expect(ferry_transfer_wait(t, TIMEOUT_MS), FERRY_OK);

	/* A scatter to b and c, one notification per target engine, over
	 * both routings that spread it over the NICs. */
	mailbox mc;
	lease_with_box(c, &mc);
	ferry_scatter_target ts[4] = {
		{.dst = desc_b, .length = MIB + 11, .src_offset = 0, .dst_offset = 1},
		{.dst = desc_c, .length = 700001, .src_offset = 3, .dst_offset = 0},
		{.dst = desc_b, .length = MIB, .src_offset = 2 * MIB, .dst_offset = 2 * MIB},
		{.dst = desc_c, .length = 2 * MIB, .src_offset = MIB, .dst_offset = MIB + 5},
	};
	ferry_route routes[2] = {{FERRY_ROUTE_SHARDED, 0}, {FERRY_ROUTE_SHARD_BYTES, 0}};
	for (int k = 0; k < 2; k++) {
		memset(dst_b, 0, REGION);
		memset(dst_c, 0, REGION);
		ferry_notification notes[2] = {
			{.mailbox = mb.box, .mailbox_len = mb.box_len, .payload = "to b", .len = 4},
			{.mailbox = mc.box, .mailbox_len = mc.box_len, .payload = "to c", .len = 4},
		};
		ferry_scatter_write sw = {.src = src_reg, .targets = ts, .count = 4, .route = routes[k]};
		expect(ferry_submit_notified(a, FERRY_SHAPE_SCATTER, &sw, notes, 2, t), FERRY_OK);
		take(&mb, "to b");
		check(memcmp(dst_b + 1, src, MIB + 11) == 0);
		check(memcmp(dst_b + 2 * MIB, src + 2 * MIB, MIB) == 0);
		take(&mc, "to c");
		check(memcmp(dst_c, src + 3, 700001) == 0);
		check(memcmp(dst_c + MIB + 5, src + MIB, 2 * MIB) == 0);
		expect(ferry_transfer_wait(t, TIMEOUT_MS), FERRY_OK);
	}

	/* A mailbox queues FERRY_MAILBOX_DEPTH notifications, in order. */
	char payloads[FERRY_MAILBOX_DEPTH][16];
	for (int i = 0; i < FERRY_MAILBOX_DEPTH; i++) {
		snprintf(payloads[i], sizeof payloads[i], "queued %d", i);
		ferry_single_write small = {.src = src_reg, .length = 64, .dst = desc_b, .dst_offset = 64 * (uint64_t)i,
		                            .route = {FERRY_ROUTE_PINNED, 0}};
		ferry_notification n = {.mailbox = mb.box, .mailbox_len = mb.box_len, .payload = payloads[i],
		                        .len = strlen(payloads[i])};
		expect(ferry_submit_notified(a, FERRY_SHAPE_SINGLE, &small, &n, 1, t), FERRY_OK);
		expect(ferry_transfer_wait(t, TIMEOUT_MS), FERRY_OK);
	}
	for (int i = 0; i < FERRY_MAILBOX_DEPTH; i++)
		take(&mb, payloads[i]);

	/* A second sender to the same mailbox collides with the first: what
	 * it sent is reported lost, in its place. */
	ferry_single_write from_c = {.src = src_c_reg, .length = 64, .dst = desc_b, .route = {FERRY_ROUTE_PINNED, 0}};
	ferry_notification n2 = {.mailbox = mb.box, .mailbox_len = mb.box_len, .payload = "c", .len = 1};
	expect(ferry_submit_notified(c, FERRY_SHAPE_SINGLE, &from_c, &n2, 1, t), FERRY_OK);
	expect(ferry_transfer_wait(t, TIMEOUT_MS), FERRY_OK);
	char buf[FERRY_MAX_NOTIFY_PAYLOAD];
	size_t got = 0;
	expect_err(ferry_lease_wait_notification(mb.lease, TIMEOUT_MS, buf, sizeof buf, &got, NULL),
	           FERRY_E_NOTIFICATIONS_LOST, "1 lost");
	uint64_t imms_dropped = 0, notes_dropped = 0;
	expect(ferry_engine_drops(b, &imms_dropped, &notes_dropped), FERRY_OK);
	check(notes_dropped == 1);
	note.payload = "after";
	note.len = 5;
	w = (ferry_single_write){.src = src_reg, .length = 64, .dst = desc_b, .route = {FERRY_ROUTE_PINNED, 0}};
	expect(ferry_submit_notified(a, FERRY_SHAPE_SINGLE, &w, &note, 1, t), FERRY_OK);
	take(&mb, "after");
	expect(ferry_transfer_wait(t, TIMEOUT_MS), FERRY_OK);

	/* Bad input: refused at submit, nothing sent. */
	expect_err(ferry_submit_notified(a, FERRY_SHAPE_SINGLE, &w, &note, 0, t), FERRY_E_INVALID, "no notifications");
	ferry_notification two[2] = {note, note};
	expect_err(ferry_submit_notified(a, FERRY_SHAPE_SINGLE, &w, two, 2, t), FERRY_E_INVALID, "takes 1");
	expect_err(ferry_submit_notified(a, FERRY_SHAPE_IMM, &w, &note, 1, t), FERRY_E_INVALID, "shape");
	expect(ferry_submit_notified(a, FERRY_SHAPE_SINGLE, NULL, &note, 1, t), FERRY_E_INVALID);
	expect(ferry_submit_notified(a, FERRY_SHAPE_SINGLE, &w, NULL, 1, t), FERRY_E_INVALID);
	ferry_notification big = note;
	big.payload = buf;
	big.len = FERRY_MAX_NOTIFY_PAYLOAD + 1;
	expect(ferry_submit_notified(a, FERRY_SHAPE_SINGLE, &w, &big, 1, t), FERRY_E_NOTIFY_TOO_LARGE);
	uint8_t junk[8] = {9, 9, 9, 9, 9, 9, 9, 9};
	ferry_notification bad = {.mailbox = junk, .mailbox_len = sizeof junk};
	expect(ferry_submit_notified(a, FERRY_SHAPE_SINGLE, &w, &bad, 1, t), FERRY_E_BAD_ENCODING);
	ferry_single_write oob = w;
	oob.dst_offset = REGION;
	expect(ferry_submit_notified(a, FERRY_SHAPE_SINGLE, &oob, &note, 1, t), FERRY_E_OUT_OF_BOUNDS);
	expect(ferry_lease_wait_notification(mb.lease, 50, buf, sizeof buf, &got, NULL), FERRY_E_TIMEOUT);

	/* Registration counts: a range inside a live registration is a hit
	 * that adds a handle and no registration. */
	ferry_registration_stats before, after;
	memset(&before, 0, sizeof before);
	before.struct_size = sizeof before;
	expect(ferry_engine_registration_stats(a, &before), FERRY_OK);
	check(before.groups >= 1 && before.handles >= 1 && before.registrations >= 1);
	for (uint32_t g = 0; g < before.groups && g < 16; g++)
		check(before.modes[g] >= FERRY_REGISTER_ON_WORKER && before.modes[g] <= FERRY_REGISTER_BESIDE);
	ferry_region_t inner;
	expect(ferry_register(a, src + 4096, 8192, FERRY_ACCESS_LOCAL, &inner), FERRY_OK);
	memset(&after, 0, sizeof after);
	after.struct_size = sizeof after;
	expect(ferry_engine_registration_stats(a, &after), FERRY_OK);
	check(after.handles == before.handles + 1);
	check(after.registrations == before.registrations);
	check(after.hits == before.hits + 1 && after.misses == before.misses);
	expect(ferry_unregister(inner), FERRY_OK);
	/* An older, shorter struct: nothing past its size is written. */
	memset(&after, 0x7f, sizeof after);
	after.struct_size = offsetof(ferry_registration_stats, modes);
	expect(ferry_engine_registration_stats(a, &after), FERRY_OK);
	check(after.struct_size == offsetof(ferry_registration_stats, modes));
	check(after.modes[0] == 0x7f7f7f7f);
	after.struct_size = 2;
	expect(ferry_engine_registration_stats(a, &after), FERRY_E_INVALID);
	expect(ferry_engine_registration_stats(a, NULL), FERRY_E_INVALID);

	/* Host memory with a huge-page policy. */
	void *p = NULL;
	size_t page = 0;
	expect(ferry_host_alloc_with(REGION, FERRY_HUGE_PAGES_NEVER, &p, &page), FERRY_OK);
	check(page == (size_t)sysconf(_SC_PAGESIZE) && ((uintptr_t)p % page) == 0);
	memset(p, 1, REGION);
	expect(ferry_host_free(p), FERRY_OK);
	expect(ferry_host_alloc_with(REGION, FERRY_HUGE_PAGES_AUTO, &p, &page), FERRY_OK);
	check(page >= (size_t)sysconf(_SC_PAGESIZE) && ((uintptr_t)p % page) == 0);
	ferry_region_t hreg;
	expect(ferry_register(b, p, REGION, FERRY_ACCESS_REMOTE_WRITE, &hreg), FERRY_OK);
	expect(ferry_unregister(hreg), FERRY_OK);
	expect(ferry_host_free(p), FERRY_OK);
	int rc = ferry_host_alloc_with(REGION, FERRY_HUGE_PAGES_REQUIRED, &p, &page);
	if (rc == FERRY_OK) {
		check(page > (size_t)sysconf(_SC_PAGESIZE) && ((uintptr_t)p % page) == 0);
		expect(ferry_host_free(p), FERRY_OK);
	} else {
		/* No huge pages configured here: said so, with its reason. */
		check(rc == FERRY_E_NOT_SUPPORTED || rc == FERRY_E_NO_MEMORY);
	}
	expect(ferry_host_alloc_with(REGION, 7, &p, &page), FERRY_E_INVALID);
	expect(ferry_host_alloc_with(0, FERRY_HUGE_PAGES_NEVER, &p, &page), FERRY_E_INVALID);
	expect(ferry_host_alloc_with(REGION, FERRY_HUGE_PAGES_NEVER, NULL, &page), FERRY_E_INVALID);

	expect(ferry_lease_retire(mb.lease), FERRY_OK);
	expect(ferry_lease_retire(mc.lease), FERRY_OK);
	expect(ferry_transfer_free(t), FERRY_OK);
	expect(ferry_descriptor_free(desc_b), FERRY_OK);
	expect(ferry_descriptor_free(desc_c), FERRY_OK);
	expect(ferry_engine_close(a, TIMEOUT_MS), FERRY_OK);
	expect(ferry_engine_close(b, TIMEOUT_MS), FERRY_OK);
	expect(ferry_engine_close(c, TIMEOUT_MS), FERRY_OK);
	expect(ferry_host_free(src), FERRY_OK);
	expect(ferry_host_free(src_c), FERRY_OK);
	expect(ferry_host_free(dst_b), FERRY_OK);
	expect(ferry_host_free(dst_c), FERRY_OK);
	printf("notified %s: ok\n", transport);
	return 0;
}
