// Function-pointer tables and trampolines for NVRTC and GDRCopy
// (aux_table.c). A NULL slot returns an error, never a call to address 0.
#ifndef FERRY_AUX_TABLE_H
#define FERRY_AUX_TABLE_H

#include "ferry_cuda.h"

enum {
	N_nvrtcVersion, N_nvrtcGetErrorString, N_nvrtcCreateProgram, N_nvrtcDestroyProgram,
	N_nvrtcCompileProgram, N_nvrtcGetProgramLogSize, N_nvrtcGetProgramLog,
	N_nvrtcGetCUBINSize, N_nvrtcGetCUBIN,
	N_COUNT
};

enum {
	G_gdr_open, G_gdr_close, G_gdr_pin_buffer, G_gdr_unpin_buffer, G_gdr_map, G_gdr_unmap,
	G_gdr_runtime_get_version,
	G_COUNT
};

// NVRTC_ERROR_INVALID_INPUT is what an unloaded slot reports.
#define FERRY_NVRTC_MISSING 3

void ferry_nvrtc_set(int i, void *p);
void ferry_gdr_set(int i, void *p);

nvrtcResult ferry_nvrtcVersion(int *major, int *minor);
const char *ferry_nvrtcGetErrorString(nvrtcResult r);
// ferry_nvrtc_compile creates (with in-memory headers), compiles and
// destroys one program. On return
// *log and *cubin are malloc'd (or NULL); the caller frees them.
nvrtcResult ferry_nvrtc_compile(const char *src, const char *name, int nheaders, const char *const *headers,
	const char *const *include_names, int nopts, const char *const *opts, char **log, char **cubin,
	size_t *cubin_size);

gdr_t ferry_gdr_open(void);
int ferry_gdr_close(gdr_t g);
int ferry_gdr_pin_buffer(gdr_t g, unsigned long addr, size_t size, unsigned long *mh);
int ferry_gdr_unpin_buffer(gdr_t g, unsigned long mh);
int ferry_gdr_map(gdr_t g, unsigned long mh, void **va, size_t size);
int ferry_gdr_unmap(gdr_t g, unsigned long mh, void *va, size_t size);
void ferry_gdr_runtime_get_version(int *major, int *minor);
void ferry_mmio_store32(void *p, uint32_t v);
uint32_t ferry_mmio_load32(const void *p);

#endif
