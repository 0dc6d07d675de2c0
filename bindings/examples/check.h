/*
 * check.h: the checking helpers the C examples share. Every failure prints
 * the calling thread's ferry_last_error, the way any ferry caller should
 * report, and exits 1.
 */
#ifndef FERRY_EXAMPLES_CHECK_H
#define FERRY_EXAMPLES_CHECK_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ferry.h"

#define MIB (1u << 20)
#define TIMEOUT_MS 20000

/* What the messages name: the program and its transport. */
static const char *check_label = "example";

/* expect fails the program unless call returned want. */
#define expect(call, want) expect_at(__LINE__, #call, (call), (want))

static inline void expect_at(int line, const char *what, int got, int want) {
	if (got == want)
		return;
	char msg[512];
	ferry_last_error(msg, sizeof msg);
	fprintf(stderr, "%s: line %d: %s = %s, want %s (last error: %s)\n", check_label, line, what,
	        ferry_strerror(got), ferry_strerror(want), msg);
	exit(1);
}

/* expect_err fails the program unless call returned want with a message
 * (ferry_last_error) that contains what: errors name their argument. */
#define expect_err(call, want, what) expect_err_at(__LINE__, #call, (call), (want), (what))

static inline void expect_err_at(int line, const char *call, int got, int want, const char *what) {
	expect_at(line, call, got, want);
	char msg[512];
	ferry_last_error(msg, sizeof msg);
	if (strstr(msg, what) == NULL) {
		fprintf(stderr, "%s: line %d: %s: message \"%s\" does not name %s\n", check_label, line, call, msg, what);
		exit(1);
	}
}

#define check(cond) check_at(__LINE__, #cond, (cond))

static inline void check_at(int line, const char *what, int ok) {
	if (!ok) {
		fprintf(stderr, "%s: line %d: check failed: %s\n", check_label, line, what);
		exit(1);
	}
}

static inline double now_s(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* wait_for polls *v (updated by a callback thread) until it reaches n. */
static inline void wait_for(int line, const int64_t *v, int64_t n) {
	double deadline = now_s() + TIMEOUT_MS / 1000.0;
	while (__atomic_load_n(v, __ATOMIC_ACQUIRE) < n) {
		if (now_s() > deadline) {
			fprintf(stderr, "%s: line %d: waited for %lld, have %lld\n", check_label, line,
			        (long long)n, (long long)__atomic_load_n(v, __ATOMIC_ACQUIRE));
			exit(1);
		}
		usleep(100);
	}
}

/* open_or_skip opens an engine, exiting 77 (the test harnesses' "skip")
 * when the transport cannot run on this machine. */
static inline void open_or_skip(const ferry_config *cfg, ferry_engine_t *e) {
	int rc = ferry_engine_open(cfg, TIMEOUT_MS, e);
	if (rc == FERRY_E_NOT_SUPPORTED) {
		char msg[512];
		ferry_last_error(msg, sizeof msg);
		fprintf(stderr, "%s: not supported here: %s\n", check_label, msg);
		exit(77);
	}
	expect(rc, FERRY_OK);
}

/* example_config reads the arguments most examples take, "transport
 * [node|-] [nics]", into cfg (logging off) and names the program and its
 * transport in check_label; without a transport it prints the usage and
 * exits 2. */
static inline void example_config(int argc, char **argv, const char *name, ferry_config *cfg) {
	static char label[128];
	if (argc < 2) {
		fprintf(stderr, "usage: %s transport [node|-] [nics]\n", argv[0]);
		exit(2);
	}
	snprintf(label, sizeof label, "%s %s", name, argv[1]);
	check_label = label;
	ferry_config_init(cfg);
	cfg->transport = argv[1];
	cfg->node = argc > 2 && strcmp(argv[2], "-") != 0 ? argv[2] : NULL;
	cfg->nics = argc > 3 ? atoi(argv[3]) : 1;
	cfg->log_level = FERRY_LOG_NONE;
}

#endif
