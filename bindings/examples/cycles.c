/*
 * cycles.c: opening and closing engines again and again leaks nothing.
 *
 * Each cycle opens two engines, registers memory, writes with an
 * immediate, waits for it at the target and closes everything. After the
 * first cycle (libraries may keep process-wide state from their first
 * use), the open file descriptors, the process's /dev/shm files and the
 * library's live handles must stay the same.
 *
 *   ./cycles transport [node|-] [nics] [cycles]
 *
 * Exit status as loopback.c's: 0 ok, 1 a check failed, 77 the transport
 * cannot run here.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

/* count_entries counts the entries of dir whose names start with prefix. */
static int count_entries(const char *dir, const char *prefix) {
	DIR *d = opendir(dir);
	if (d == NULL)
		return -1;
	int n = 0;
	for (struct dirent *e; (e = readdir(d)) != NULL;)
		if (e->d_name[0] != '.' && strncmp(e->d_name, prefix, strlen(prefix)) == 0)
			n++;
	closedir(d);
	return n;
}

static void cycle(const ferry_config *cfg, int nics) {
	ferry_engine_t a, b;
	open_or_skip(cfg, &a);
	expect(ferry_engine_open(cfg, TIMEOUT_MS, &b), FERRY_OK);
	void *src, *dst;
	expect(ferry_host_alloc(MIB, &src), FERRY_OK);
	expect(ferry_host_alloc(MIB, &dst), FERRY_OK);
	memset(src, 0x5a, MIB);
	ferry_region_t sr, dr;
	expect(ferry_register(a, src, MIB, FERRY_ACCESS_LOCAL, &sr), FERRY_OK);
	expect(ferry_register(b, dst, MIB, FERRY_ACCESS_REMOTE_WRITE, &dr), FERRY_OK);
	ferry_descriptor_t desc;
	expect(ferry_region_descriptor(dr, &desc), FERRY_OK);
	ferry_imm_counter_t ic;
	expect(ferry_imm_counter_new(b, 9, &ic), FERRY_OK);
	ferry_transfer_t t;
	expect(ferry_transfer_new(&t), FERRY_OK);
	ferry_single_write w = {.src = sr, .length = MIB, .dst = desc, .imm = 9, .has_imm = 1};
	expect(ferry_submit_single(a, &w, t), FERRY_OK);
	expect(ferry_transfer_wait(t, TIMEOUT_MS), FERRY_OK);
	expect(ferry_imm_counter_wait(ic, nics, TIMEOUT_MS), FERRY_OK);
	check(memcmp(src, dst, MIB) == 0);
	expect(ferry_transfer_free(t), FERRY_OK);
	expect(ferry_descriptor_free(desc), FERRY_OK);
	/* Regions and the counter go with their engines. */
	expect(ferry_engine_close(a, TIMEOUT_MS), FERRY_OK);
	expect(ferry_engine_close(b, TIMEOUT_MS), FERRY_OK);
	expect(ferry_host_free(src), FERRY_OK);
	expect(ferry_host_free(dst), FERRY_OK);
}

int main(int argc, char **argv) {
	if (argc < 2) {
		fprintf(stderr, "usage: %s transport [node|-] [nics] [cycles]\n", argv[0]);
		return 2;
	}
	const char *transport = argv[1];
	int nics = argc > 3 ? atoi(argv[3]) : 1;
	int cycles = argc > 4 ? atoi(argv[4]) : 10;
	char label[128], shm_prefix[64];
	snprintf(label, sizeof label, "cycles %s", transport);
	check_label = label;
	snprintf(shm_prefix, sizeof shm_prefix, "ferry-%d-", (int)getpid());

	ferry_config cfg;
	ferry_config_init(&cfg);
	cfg.transport = transport;
	cfg.node = argc > 2 && strcmp(argv[2], "-") != 0 ? argv[2] : NULL;
	cfg.nics = nics;
	cfg.log_level = FERRY_LOG_ERROR;

	cycle(&cfg, nics);
	int fds = count_entries("/proc/self/fd", "");
	uint64_t handles, now;
	expect(ferry_live_handles(&handles), FERRY_OK);
	for (int i = 1; i < cycles; i++)
		cycle(&cfg, nics);
	int fds_now = count_entries("/proc/self/fd", "");
	expect(ferry_live_handles(&now), FERRY_OK);
	int shm_left = count_entries("/dev/shm", shm_prefix);
	printf("cycles %s: %d cycles, %d fds after the first and %d after the last, %llu handles, %d /dev/shm files left\n",
	       transport, cycles, fds, fds_now, (unsigned long long)now, shm_left);
	check(fds_now == fds);
	check(now == handles && now == 0);
	check(shm_left <= 0);
	printf("cycles %s: ok\n", transport);
	return 0;
}
