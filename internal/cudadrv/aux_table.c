//go:build cgo && linux

#include <stdlib.h>
#include <string.h>
#include "aux_table.h"

static void *ferry_nvrtc_fn[N_COUNT];
static void *ferry_gdr_fn[G_COUNT];

void ferry_nvrtc_set(int i, void *p) { if (i >= 0 && i < N_COUNT) ferry_nvrtc_fn[i] = p; }
void ferry_gdr_set(int i, void *p) { if (i >= 0 && i < G_COUNT) ferry_gdr_fn[i] = p; }

#define NV(idx, type) __typeof__(type) idx##_f = (type)ferry_nvrtc_fn[idx]
#define GD(idx, type) __typeof__(type) idx##_f = (type)ferry_gdr_fn[idx]

nvrtcResult ferry_nvrtcVersion(int *major, int *minor) {
	NV(N_nvrtcVersion, nvrtcResult (*)(int *, int *));
	if (!N_nvrtcVersion_f) return FERRY_NVRTC_MISSING;
	return N_nvrtcVersion_f(major, minor);
}

const char *ferry_nvrtcGetErrorString(nvrtcResult r) {
	NV(N_nvrtcGetErrorString, const char *(*)(nvrtcResult));
	if (!N_nvrtcGetErrorString_f) return NULL;
	return N_nvrtcGetErrorString_f(r);
}

nvrtcResult ferry_nvrtc_compile(const char *src, const char *name, int nheaders, const char *const *headers,
	const char *const *include_names, int nopts, const char *const *opts, char **log, char **cubin,
	size_t *cubin_size) {
	NV(N_nvrtcCreateProgram, nvrtcResult (*)(nvrtcProgram *, const char *, const char *, int,
		const char *const *, const char *const *));
	NV(N_nvrtcDestroyProgram, nvrtcResult (*)(nvrtcProgram *));
	NV(N_nvrtcCompileProgram, nvrtcResult (*)(nvrtcProgram, int, const char *const *));
	NV(N_nvrtcGetProgramLogSize, nvrtcResult (*)(nvrtcProgram, size_t *));
	NV(N_nvrtcGetProgramLog, nvrtcResult (*)(nvrtcProgram, char *));
	NV(N_nvrtcGetCUBINSize, nvrtcResult (*)(nvrtcProgram, size_t *));
	NV(N_nvrtcGetCUBIN, nvrtcResult (*)(nvrtcProgram, char *));
	*log = NULL;
	*cubin = NULL;
	*cubin_size = 0;
	if (!N_nvrtcCreateProgram_f || !N_nvrtcDestroyProgram_f || !N_nvrtcCompileProgram_f ||
		!N_nvrtcGetProgramLogSize_f || !N_nvrtcGetProgramLog_f || !N_nvrtcGetCUBINSize_f ||
		!N_nvrtcGetCUBIN_f)
		return FERRY_NVRTC_MISSING;

	nvrtcProgram prog = NULL;
	nvrtcResult r = N_nvrtcCreateProgram_f(&prog, src, name, nheaders, headers, include_names);
	if (r != 0) return r;
	nvrtcResult cr = N_nvrtcCompileProgram_f(prog, nopts, opts);
	size_t n = 0;
	if (N_nvrtcGetProgramLogSize_f(prog, &n) == 0 && n > 1) {
		*log = malloc(n);
		if (*log && N_nvrtcGetProgramLog_f(prog, *log) != 0) {
			free(*log);
			*log = NULL;
		}
	}
	if (cr == 0) {
		n = 0;
		cr = N_nvrtcGetCUBINSize_f(prog, &n);
		if (cr == 0 && n > 0) {
			*cubin = malloc(n);
			if (*cubin == NULL) {
				cr = 1; // NVRTC_ERROR_OUT_OF_MEMORY
			} else if ((cr = N_nvrtcGetCUBIN_f(prog, *cubin)) != 0) {
				free(*cubin);
				*cubin = NULL;
			} else {
				*cubin_size = n;
			}
		}
	}
	N_nvrtcDestroyProgram_f(&prog);
	return cr;
}

gdr_t ferry_gdr_open(void) {
	GD(G_gdr_open, gdr_t (*)(void));
	return G_gdr_open_f ? G_gdr_open_f() : NULL;
}

int ferry_gdr_close(gdr_t g) {
	GD(G_gdr_close, int (*)(gdr_t));
	return G_gdr_close_f ? G_gdr_close_f(g) : 22;
}

// gdr_mh_t is a one-field struct passed by value; the Go side holds its
// field, and these helpers wrap and unwrap it.
int ferry_gdr_pin_buffer(gdr_t g, unsigned long addr, size_t size, unsigned long *mh) {
	GD(G_gdr_pin_buffer, int (*)(gdr_t, unsigned long, size_t, uint64_t, uint32_t, gdr_mh_t *));
	if (!G_gdr_pin_buffer_f) return 22;
	gdr_mh_t h = {0};
	int r = G_gdr_pin_buffer_f(g, addr, size, 0, 0, &h);
	*mh = h.h;
	return r;
}

int ferry_gdr_unpin_buffer(gdr_t g, unsigned long mh) {
	GD(G_gdr_unpin_buffer, int (*)(gdr_t, gdr_mh_t));
	if (!G_gdr_unpin_buffer_f) return 22;
	gdr_mh_t h = {mh};
	return G_gdr_unpin_buffer_f(g, h);
}

int ferry_gdr_map(gdr_t g, unsigned long mh, void **va, size_t size) {
	GD(G_gdr_map, int (*)(gdr_t, gdr_mh_t, void **, size_t));
	if (!G_gdr_map_f) return 22;
	gdr_mh_t h = {mh};
	return G_gdr_map_f(g, h, va, size);
}

int ferry_gdr_unmap(gdr_t g, unsigned long mh, void *va, size_t size) {
	GD(G_gdr_unmap, int (*)(gdr_t, gdr_mh_t, void *, size_t));
	if (!G_gdr_unmap_f) return 22;
	gdr_mh_t h = {mh};
	return G_gdr_unmap_f(g, h, va, size);
}

void ferry_gdr_runtime_get_version(int *major, int *minor) {
	GD(G_gdr_runtime_get_version, void (*)(int *, int *));
	*major = *minor = 0;
	if (G_gdr_runtime_get_version_f) G_gdr_runtime_get_version_f(major, minor);
}

// The BAR mapping is write-combined: a plain volatile store, then a store
// fence so it leaves the write-combining buffer now rather than later.
void ferry_mmio_store32(void *p, uint32_t v) {
	*(volatile uint32_t *)p = v;
#if defined(__x86_64__) || defined(__i386__)
	__asm__ __volatile__("sfence" ::: "memory");
#else
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
#endif
}

uint32_t ferry_mmio_load32(const void *p) {
	uint32_t v = *(const volatile uint32_t *)p;
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	return v;
}
