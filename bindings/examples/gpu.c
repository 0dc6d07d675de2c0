/*
 * gpu.c: GPU memory through the C ABI (ferry_config.gpus,
 * ferry_register_gpu, ferry_gpu_dmabuf_supported).
 *
 * Usage: gpu nodriver | gpu fake. "nodriver" runs where no CUDA driver
 * loads: every GPU call must fail with FERRY_E_NOT_SUPPORTED and say
 * that the driver is missing. "fake" runs against a fake libcuda
 * (FERRY_CUDA_DRIVER pointing at the tests' fakecuda.c build, which
 * takes any address for device memory of GPU 0 and exports dma-bufs of
 * page-aligned ranges): an engine over the in-process "mem" transport
 * with groups for GPUs 0 and 1 registers "device" memory through the
 * dma-buf path when the kernel allows it, by address when the range
 * cannot be exported; bad ranges,
 * ordinals and engines without the GPU's group are refused. Prints
 * "gpu <mode>: ok".
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

int main(int argc, char **argv) {
	if (argc < 2 || (strcmp(argv[1], "nodriver") != 0 && strcmp(argv[1], "fake") != 0)) {
		fprintf(stderr, "usage: %s nodriver|fake\n", argv[0]);
		return 2;
	}
	const int fake = strcmp(argv[1], "fake") == 0;
	check_label = fake ? "gpu fake" : "gpu nodriver";
	uint64_t handles_at_start, handles_now;
	expect(ferry_live_handles(&handles_at_start), FERRY_OK);

	/* 2 MiB of host memory stands in for device memory: the fake driver
	 * says every address is GPU 0's. */
	const uint64_t n = 2u << 20;
	void *mem = aligned_alloc(n, n);
	check(mem != NULL);
	uint64_t dptr = (uint64_t)(uintptr_t)mem;
	int32_t gpus[2] = {0, 1};
	ferry_config cfg;
	ferry_config_init(&cfg);
	cfg.transport = "mem";
	ferry_engine_t e;
	ferry_region_t r;
	int32_t path = -1;

	expect_err(ferry_gpu_dmabuf_supported(-1), FERRY_E_INVALID, "ordinal -1");
	if (!fake) {
		expect_err(ferry_gpu_dmabuf_supported(0), FERRY_E_NOT_SUPPORTED, "driver");
		cfg.gpus = gpus;
		cfg.gpu_count = 1;
		expect_err(ferry_engine_open(&cfg, TIMEOUT_MS, &e), FERRY_E_NOT_SUPPORTED, "driver");
		cfg.gpu_placement = FERRY_GPU_PLACE_FIRST_NICS;
		expect_err(ferry_engine_open(&cfg, TIMEOUT_MS, &e), FERRY_E_NOT_SUPPORTED, "driver");
		cfg.gpus = NULL;
		cfg.gpu_count = 0;
		expect(ferry_engine_open(&cfg, TIMEOUT_MS, &e), FERRY_OK);
		expect_err(ferry_register_gpu(e, dptr, n, FERRY_ACCESS_REMOTE_WRITE, &r, &path), FERRY_E_NOT_SUPPORTED,
		           "driver");
		expect(ferry_engine_close(e, TIMEOUT_MS), FERRY_OK);
	} else {
		int dmabuf = ferry_gpu_dmabuf_supported(0);
		check(dmabuf == FERRY_OK || dmabuf == FERRY_E_NOT_SUPPORTED);
		if (dmabuf != FERRY_OK) {
			char msg[512];
			ferry_last_error(msg, sizeof msg);
			printf("%s: no dma-buf here (%s): the address path only\n", check_label, msg);
		}
		cfg.gpus = gpus;
		cfg.gpu_count = 2;
		cfg.gpu_placement = 7;
		expect_err(ferry_engine_open(&cfg, TIMEOUT_MS, &e), FERRY_E_INVALID, "gpu_placement");
		cfg.gpu_placement = FERRY_GPU_PLACE_FIRST_NICS;
		int32_t bad[1] = {5};
		cfg.gpus = bad;
		cfg.gpu_count = 1;
		expect_err(ferry_engine_open(&cfg, TIMEOUT_MS, &e), FERRY_E_INVALID, "ordinal 5");
		cfg.gpus = gpus;
		cfg.gpu_count = 2;
		expect(ferry_engine_open(&cfg, TIMEOUT_MS, &e), FERRY_OK);

		/* A page-aligned range exports as a dma-buf when the kernel allows. */
		expect(ferry_register_gpu(e, dptr, n, FERRY_ACCESS_REMOTE_WRITE, &r, &path), FERRY_OK);
		check(path == (dmabuf == FERRY_OK ? FERRY_GPU_PATH_DMABUF : FERRY_GPU_PATH_PEER_MEMORY));
		ferry_descriptor_t d;
		expect(ferry_region_descriptor(r, &d), FERRY_OK);
		expect(ferry_descriptor_free(d), FERRY_OK);
		/* A range the driver will not export (it starts inside a page)
		 * falls back to the address. */
		ferry_region_t r2;
		expect(ferry_register_gpu(e, dptr + 64, 4097, FERRY_ACCESS_LOCAL, &r2, &path), FERRY_OK);
		check(path == FERRY_GPU_PATH_PEER_MEMORY);
		expect(ferry_unregister(r2), FERRY_OK);
		expect(ferry_unregister(r), FERRY_OK);
		expect(ferry_unregister(r), FERRY_E_UNKNOWN_REGION);

		expect_err(ferry_register_gpu(e, 0, n, FERRY_ACCESS_LOCAL, &r, NULL), FERRY_E_INVALID, "register");
		expect_err(ferry_register_gpu(e, dptr, 0, FERRY_ACCESS_LOCAL, &r, NULL), FERRY_E_INVALID, "register");
		expect_err(ferry_register_gpu(e, dptr, n, 9, &r, NULL), FERRY_E_INVALID, "access 9");
		expect_err(ferry_register_gpu(e, dptr, n, FERRY_ACCESS_LOCAL, NULL, NULL), FERRY_E_INVALID, "out");
		expect(ferry_register_gpu(0, dptr, n, FERRY_ACCESS_LOCAL, &r, NULL), FERRY_E_BAD_HANDLE);
		/* Registered memory is released by the engine's close. */
		expect(ferry_register_gpu(e, dptr, n, FERRY_ACCESS_LOCAL, &r, NULL), FERRY_OK);
		expect(ferry_engine_close(e, TIMEOUT_MS), FERRY_OK);
		expect(ferry_unregister(r), FERRY_E_UNKNOWN_REGION);

		/* An engine without a group for the GPU refuses its memory. */
		cfg.gpus = NULL;
		cfg.gpu_count = 0;
		expect(ferry_engine_open(&cfg, TIMEOUT_MS, &e), FERRY_OK);
		expect_err(ferry_register_gpu(e, dptr, n, FERRY_ACCESS_LOCAL, &r, NULL), FERRY_E_INVALID,
		           "no group for device cuda:0");
		expect(ferry_engine_close(e, TIMEOUT_MS), FERRY_OK);
	}
	free(mem);
	expect(ferry_live_handles(&handles_now), FERRY_OK);
	check(handles_now == handles_at_start);
	printf("%s: ok\n", check_label);
	return 0;
}
