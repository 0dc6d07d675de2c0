//go:build cgo && linux

// Function-pointer table and trampolines for the CUDA driver API.
#include <stdint.h>
#include <string.h>
#include "cu_table.h"

static void *ferry_cu_fn[F_CU_COUNT];
static int ferry_cu_loaded;

void ferry_cu_set(int i, void *p) { if (i >= 0 && i < F_CU_COUNT) ferry_cu_fn[i] = p; }
void ferry_cu_mark_loaded(void) { ferry_cu_loaded = 1; }

// A NULL slot means "not loaded yet" before Load finished, and "this driver
// does not have it" after.
static CUresult ferry_cu_missing(void) {
	return ferry_cu_loaded ? CUDA_ERROR_NOT_SUPPORTED : CUDA_ERROR_NOT_INITIALIZED;
}

#define FERRY_FN(idx, type) __typeof__(type) f = (type)ferry_cu_fn[idx]; if (f == NULL) return ferry_cu_missing()

static CUresult ferry_cu_ctx(CUcontext c) {
	if (c == NULL) return CUDA_SUCCESS;
	CUresult (*get)(CUcontext *) = (CUresult (*)(CUcontext *))ferry_cu_fn[F_cuCtxGetCurrent];
	CUresult (*set)(CUcontext) = (CUresult (*)(CUcontext))ferry_cu_fn[F_cuCtxSetCurrent];
	if (get == NULL || set == NULL) return ferry_cu_missing();
	CUcontext cur = NULL;
	if (get(&cur) == CUDA_SUCCESS && cur == c) return CUDA_SUCCESS;
	return set(c);
}

#define FERRY_CTX(c) do { CUresult r_ = ferry_cu_ctx(c); if (r_ != CUDA_SUCCESS) return r_; } while (0)

CUresult ferry_cuInit(unsigned int flags) {
	FERRY_FN(F_cuInit, CUresult (*)(unsigned int));
	return f(flags);
}
CUresult ferry_cuDriverGetVersion(int *v) {
	FERRY_FN(F_cuDriverGetVersion, CUresult (*)(int *));
	return f(v);
}
CUresult ferry_cuGetErrorName(CUresult r, const char **s) {
	FERRY_FN(F_cuGetErrorName, CUresult (*)(CUresult, const char **));
	return f(r, s);
}
CUresult ferry_cuGetErrorString(CUresult r, const char **s) {
	FERRY_FN(F_cuGetErrorString, CUresult (*)(CUresult, const char **));
	return f(r, s);
}
CUresult ferry_cuDeviceGetCount(int *n) {
	FERRY_FN(F_cuDeviceGetCount, CUresult (*)(int *));
	return f(n);
}
CUresult ferry_cuDeviceGet(CUdevice *d, int ordinal) {
	FERRY_FN(F_cuDeviceGet, CUresult (*)(CUdevice *, int));
	return f(d, ordinal);
}
CUresult ferry_cuDeviceGetName(char *name, int len, CUdevice d) {
	FERRY_FN(F_cuDeviceGetName, CUresult (*)(char *, int, CUdevice));
	return f(name, len, d);
}
CUresult ferry_cuDeviceGetAttribute(int *v, int attr, CUdevice d) {
	FERRY_FN(F_cuDeviceGetAttribute, CUresult (*)(int *, int, CUdevice));
	return f(v, attr, d);
}
CUresult ferry_cuDeviceGetPCIBusId(char *id, int len, CUdevice d) {
	FERRY_FN(F_cuDeviceGetPCIBusId, CUresult (*)(char *, int, CUdevice));
	return f(id, len, d);
}
CUresult ferry_cuDeviceTotalMem(size_t *n, CUdevice d) {
	FERRY_FN(F_cuDeviceTotalMem, CUresult (*)(size_t *, CUdevice));
	return f(n, d);
}
CUresult ferry_cuDeviceCanAccessPeer(int *can, CUdevice d, CUdevice peer) {
	FERRY_FN(F_cuDeviceCanAccessPeer, CUresult (*)(int *, CUdevice, CUdevice));
	return f(can, d, peer);
}
CUresult ferry_cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d) {
	FERRY_FN(F_cuDevicePrimaryCtxRetain, CUresult (*)(CUcontext *, CUdevice));
	return f(c, d);
}
CUresult ferry_cuDevicePrimaryCtxRelease(CUdevice d) {
	FERRY_FN(F_cuDevicePrimaryCtxRelease, CUresult (*)(CUdevice));
	return f(d);
}
CUresult ferry_cuCtxSynchronize(CUcontext c) {
	FERRY_FN(F_cuCtxSynchronize, CUresult (*)(void));
	FERRY_CTX(c);
	return f();
}
CUresult ferry_cuCtxEnablePeerAccess(CUcontext c, CUcontext peer) {
	FERRY_FN(F_cuCtxEnablePeerAccess, CUresult (*)(CUcontext, unsigned int));
	FERRY_CTX(c);
	return f(peer, 0);
}
CUresult ferry_cuCtxDisablePeerAccess(CUcontext c, CUcontext peer) {
	FERRY_FN(F_cuCtxDisablePeerAccess, CUresult (*)(CUcontext));
	FERRY_CTX(c);
	return f(peer);
}
// Integer attributes only: the value is read into a zeroed 8-byte slot, so
// 4-byte attributes come back in its low half (little-endian hosts).
CUresult ferry_cuPointerGetAttribute(unsigned long long *v, int attr, CUdeviceptr p) {
	FERRY_FN(F_cuPointerGetAttribute, CUresult (*)(void *, int, CUdeviceptr));
	*v = 0;
	return f(v, attr, p);
}
CUresult ferry_cuPointerSetAttribute(CUcontext c, int attr, unsigned int v, CUdeviceptr p) {
	FERRY_FN(F_cuPointerSetAttribute, CUresult (*)(const void *, int, CUdeviceptr));
	FERRY_CTX(c);
	return f(&v, attr, p);
}
CUresult ferry_cuMemAlloc(CUcontext c, CUdeviceptr *p, size_t n) {
	FERRY_FN(F_cuMemAlloc, CUresult (*)(CUdeviceptr *, size_t));
	FERRY_CTX(c);
	return f(p, n);
}
CUresult ferry_cuMemFree(CUcontext c, CUdeviceptr p) {
	FERRY_FN(F_cuMemFree, CUresult (*)(CUdeviceptr));
	FERRY_CTX(c);
	return f(p);
}
CUresult ferry_cuMemHostAlloc(CUcontext c, void **p, size_t n, unsigned int flags) {
	FERRY_FN(F_cuMemHostAlloc, CUresult (*)(void **, size_t, unsigned int));
	FERRY_CTX(c);
	return f(p, n, flags);
}
CUresult ferry_cuMemFreeHost(CUcontext c, void *p) {
	FERRY_FN(F_cuMemFreeHost, CUresult (*)(void *));
	FERRY_CTX(c);
	return f(p);
}
CUresult ferry_cuMemHostGetDevicePointer(CUcontext c, CUdeviceptr *d, void *p) {
	FERRY_FN(F_cuMemHostGetDevicePointer, CUresult (*)(CUdeviceptr *, void *, unsigned int));
	FERRY_CTX(c);
	return f(d, p, 0);
}
CUresult ferry_cuMemcpy(CUcontext c, void *dst, void *src, size_t n) {
	FERRY_FN(F_cuMemcpy, CUresult (*)(CUdeviceptr, CUdeviceptr, size_t));
	FERRY_CTX(c);
	return f((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src, n);
}
CUresult ferry_cuMemcpyHtoD(CUcontext c, CUdeviceptr dst, const void *src, size_t n) {
	FERRY_FN(F_cuMemcpyHtoD, CUresult (*)(CUdeviceptr, const void *, size_t));
	FERRY_CTX(c);
	return f(dst, src, n);
}
CUresult ferry_cuMemcpyDtoH(CUcontext c, void *dst, CUdeviceptr src, size_t n) {
	FERRY_FN(F_cuMemcpyDtoH, CUresult (*)(void *, CUdeviceptr, size_t));
	FERRY_CTX(c);
	return f(dst, src, n);
}
CUresult ferry_cuMemcpyDtoD(CUcontext c, CUdeviceptr dst, CUdeviceptr src, size_t n) {
	FERRY_FN(F_cuMemcpyDtoD, CUresult (*)(CUdeviceptr, CUdeviceptr, size_t));
	FERRY_CTX(c);
	return f(dst, src, n);
}
CUresult ferry_cuMemcpyAsync(CUcontext c, CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
	FERRY_FN(F_cuMemcpyAsync, CUresult (*)(CUdeviceptr, CUdeviceptr, size_t, CUstream));
	FERRY_CTX(c);
	return f(dst, src, n, s);
}
CUresult ferry_cuMemsetD8(CUcontext c, CUdeviceptr dst, unsigned char v, size_t n) {
	FERRY_FN(F_cuMemsetD8, CUresult (*)(CUdeviceptr, unsigned char, size_t));
	FERRY_CTX(c);
	return f(dst, v, n);
}
CUresult ferry_cuMemsetD8Async(CUcontext c, CUdeviceptr dst, unsigned char v, size_t n, CUstream s) {
	FERRY_FN(F_cuMemsetD8Async, CUresult (*)(CUdeviceptr, unsigned char, size_t, CUstream));
	FERRY_CTX(c);
	return f(dst, v, n, s);
}
CUresult ferry_cuMemGetHandleForAddressRange(CUcontext c, int *fd, CUdeviceptr p, size_t n, int type, unsigned long long flags) {
	FERRY_FN(F_cuMemGetHandleForAddressRange, CUresult (*)(void *, CUdeviceptr, size_t, int, unsigned long long));
	FERRY_CTX(c);
	*fd = -1;
	return f(fd, p, n, type, flags);
}

static void ferry_fill_prop(CUmemAllocationProp *prop, int dev, int handles, int rdma) {
	memset(prop, 0, sizeof(*prop));
	prop->type = 1;          // CU_MEM_ALLOCATION_TYPE_PINNED
	prop->location.type = 1; // CU_MEM_LOCATION_TYPE_DEVICE
	prop->location.id = dev;
	prop->requestedHandleTypes = handles;
	prop->allocFlags.gpuDirectRDMACapable = rdma ? 1 : 0;
}
CUresult ferry_cuMemGetAllocationGranularity(CUcontext c, size_t *g, int dev, int handles, int rdma, int option) {
	FERRY_FN(F_cuMemGetAllocationGranularity, CUresult (*)(size_t *, const CUmemAllocationProp *, int));
	FERRY_CTX(c);
	CUmemAllocationProp prop;
	ferry_fill_prop(&prop, dev, handles, rdma);
	return f(g, &prop, option);
}
CUresult ferry_cuMemCreate(CUcontext c, CUmemGenericAllocationHandle *h, size_t n, int dev, int handles, int rdma) {
	FERRY_FN(F_cuMemCreate, CUresult (*)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long));
	FERRY_CTX(c);
	CUmemAllocationProp prop;
	ferry_fill_prop(&prop, dev, handles, rdma);
	return f(h, n, &prop, 0);
}
CUresult ferry_cuMemRelease(CUcontext c, CUmemGenericAllocationHandle h) {
	FERRY_FN(F_cuMemRelease, CUresult (*)(CUmemGenericAllocationHandle));
	FERRY_CTX(c);
	return f(h);
}
CUresult ferry_cuMemAddressReserve(CUcontext c, CUdeviceptr *p, size_t n, size_t align, CUdeviceptr addr) {
	FERRY_FN(F_cuMemAddressReserve, CUresult (*)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long));
	FERRY_CTX(c);
	return f(p, n, align, addr, 0);
}
CUresult ferry_cuMemAddressFree(CUcontext c, CUdeviceptr p, size_t n) {
	FERRY_FN(F_cuMemAddressFree, CUresult (*)(CUdeviceptr, size_t));
	FERRY_CTX(c);
	return f(p, n);
}
CUresult ferry_cuMemMap(CUcontext c, CUdeviceptr p, size_t n, size_t off, CUmemGenericAllocationHandle h) {
	FERRY_FN(F_cuMemMap, CUresult (*)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long));
	FERRY_CTX(c);
	return f(p, n, off, h, 0);
}
CUresult ferry_cuMemUnmap(CUcontext c, CUdeviceptr p, size_t n) {
	FERRY_FN(F_cuMemUnmap, CUresult (*)(CUdeviceptr, size_t));
	FERRY_CTX(c);
	return f(p, n);
}
// Grants read/write access to up to 64 devices.
CUresult ferry_cuMemSetAccess(CUcontext c, CUdeviceptr p, size_t n, const int *devs, int ndev) {
	FERRY_FN(F_cuMemSetAccess, CUresult (*)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t));
	FERRY_CTX(c);
	CUmemAccessDesc desc[64];
	if (ndev < 1 || ndev > 64) return CUDA_ERROR_INVALID_VALUE;
	for (int i = 0; i < ndev; i++) {
		desc[i].location.type = 1; // CU_MEM_LOCATION_TYPE_DEVICE
		desc[i].location.id = devs[i];
		desc[i].flags = 3;         // CU_MEM_ACCESS_FLAGS_PROT_READWRITE
	}
	return f(p, n, desc, (size_t)ndev);
}
CUresult ferry_cuMemExportToShareableHandle(CUcontext c, int *fd, CUmemGenericAllocationHandle h, int type) {
	FERRY_FN(F_cuMemExportToShareableHandle, CUresult (*)(void *, CUmemGenericAllocationHandle, int, unsigned long long));
	FERRY_CTX(c);
	*fd = -1;
	return f(fd, h, type, 0);
}
// For a POSIX fd the "OS handle" is the descriptor's value cast to a
// pointer, not a pointer to it.
CUresult ferry_cuMemImportFromShareableHandle(CUcontext c, CUmemGenericAllocationHandle *h, int fd, int type) {
	FERRY_FN(F_cuMemImportFromShareableHandle, CUresult (*)(CUmemGenericAllocationHandle *, void *, int));
	FERRY_CTX(c);
	return f(h, (void *)(uintptr_t)fd, type);
}
CUresult ferry_cuStreamCreate(CUcontext c, CUstream *s, unsigned int flags) {
	FERRY_FN(F_cuStreamCreate, CUresult (*)(CUstream *, unsigned int));
	FERRY_CTX(c);
	return f(s, flags);
}
CUresult ferry_cuStreamDestroy(CUcontext c, CUstream s) {
	FERRY_FN(F_cuStreamDestroy, CUresult (*)(CUstream));
	FERRY_CTX(c);
	return f(s);
}
CUresult ferry_cuStreamSynchronize(CUcontext c, CUstream s) {
	FERRY_FN(F_cuStreamSynchronize, CUresult (*)(CUstream));
	FERRY_CTX(c);
	return f(s);
}
CUresult ferry_cuStreamQuery(CUcontext c, CUstream s) {
	FERRY_FN(F_cuStreamQuery, CUresult (*)(CUstream));
	FERRY_CTX(c);
	return f(s);
}
CUresult ferry_cuStreamBeginCapture(CUcontext c, CUstream s, int mode) {
	FERRY_FN(F_cuStreamBeginCapture, CUresult (*)(CUstream, int));
	FERRY_CTX(c);
	return f(s, mode);
}
CUresult ferry_cuStreamEndCapture(CUcontext c, CUstream s, CUgraph *g) {
	FERRY_FN(F_cuStreamEndCapture, CUresult (*)(CUstream, CUgraph *));
	FERRY_CTX(c);
	return f(s, g);
}
CUresult ferry_cuEventCreate(CUcontext c, CUevent *e, unsigned int flags) {
	FERRY_FN(F_cuEventCreate, CUresult (*)(CUevent *, unsigned int));
	FERRY_CTX(c);
	return f(e, flags);
}
CUresult ferry_cuEventDestroy(CUcontext c, CUevent e) {
	FERRY_FN(F_cuEventDestroy, CUresult (*)(CUevent));
	FERRY_CTX(c);
	return f(e);
}
CUresult ferry_cuEventRecord(CUcontext c, CUevent e, CUstream s) {
	FERRY_FN(F_cuEventRecord, CUresult (*)(CUevent, CUstream));
	FERRY_CTX(c);
	return f(e, s);
}
CUresult ferry_cuEventQuery(CUcontext c, CUevent e) {
	FERRY_FN(F_cuEventQuery, CUresult (*)(CUevent));
	FERRY_CTX(c);
	return f(e);
}
CUresult ferry_cuEventSynchronize(CUcontext c, CUevent e) {
	FERRY_FN(F_cuEventSynchronize, CUresult (*)(CUevent));
	FERRY_CTX(c);
	return f(e);
}
CUresult ferry_cuEventElapsedTime(CUcontext c, float *ms, CUevent a, CUevent b) {
	FERRY_FN(F_cuEventElapsedTime, CUresult (*)(float *, CUevent, CUevent));
	FERRY_CTX(c);
	return f(ms, a, b);
}
CUresult ferry_cuModuleLoadData(CUcontext c, CUmodule *m, const void *image) {
	FERRY_FN(F_cuModuleLoadData, CUresult (*)(CUmodule *, const void *));
	FERRY_CTX(c);
	return f(m, image);
}
CUresult ferry_cuModuleUnload(CUcontext c, CUmodule m) {
	FERRY_FN(F_cuModuleUnload, CUresult (*)(CUmodule));
	FERRY_CTX(c);
	return f(m);
}
CUresult ferry_cuModuleGetFunction(CUcontext c, CUfunction *fn, CUmodule m, const char *name) {
	FERRY_FN(F_cuModuleGetFunction, CUresult (*)(CUfunction *, CUmodule, const char *));
	FERRY_CTX(c);
	return f(fn, m, name);
}
CUresult ferry_cuFuncGetAttribute(CUcontext c, int *v, int attr, CUfunction fn) {
	FERRY_FN(F_cuFuncGetAttribute, CUresult (*)(int *, int, CUfunction));
	FERRY_CTX(c);
	return f(v, attr, fn);
}
CUresult ferry_cuOccupancyMaxActiveBlocksPerMultiprocessor(CUcontext c, int *n, CUfunction fn, int block, size_t smem) {
	FERRY_FN(F_cuOccupancyMaxActiveBlocksPerMultiprocessor, CUresult (*)(int *, CUfunction, int, size_t));
	FERRY_CTX(c);
	return f(n, fn, block, smem);
}
CUresult ferry_cuFlushGPUDirectRDMAWrites(CUcontext c, int target, int scope) {
	FERRY_FN(F_cuFlushGPUDirectRDMAWrites, CUresult (*)(int, int));
	FERRY_CTX(c);
	return f(target, scope);
}

// ferry_cuLaunch builds the kernelParams array (one pointer per argument,
// into the caller's packed argument buffer) on its own stack; the driver
// copies the values before it returns, so nothing here outlives the call.
CUresult ferry_cuLaunch(CUcontext c, CUfunction fn,
	unsigned int gx, unsigned int gy, unsigned int gz,
	unsigned int bx, unsigned int by, unsigned int bz,
	unsigned int smem, CUstream s,
	unsigned char *args, const unsigned int *offs, int nargs, int coop) {
	void *params[64];
	if (nargs < 0 || nargs > 64) return CUDA_ERROR_INVALID_VALUE;
	for (int i = 0; i < nargs; i++) params[i] = args + offs[i];
	if (coop) {
		FERRY_FN(F_cuLaunchCooperativeKernel, CUresult (*)(CUfunction, unsigned int, unsigned int, unsigned int,
			unsigned int, unsigned int, unsigned int, unsigned int, CUstream, void **));
		FERRY_CTX(c);
		return f(fn, gx, gy, gz, bx, by, bz, smem, s, params);
	}
	FERRY_FN(F_cuLaunchKernel, CUresult (*)(CUfunction, unsigned int, unsigned int, unsigned int,
		unsigned int, unsigned int, unsigned int, unsigned int, CUstream, void **, void **));
	FERRY_CTX(c);
	return f(fn, gx, gy, gz, bx, by, bz, smem, s, params, NULL);
}
CUresult ferry_cuGraphInstantiate(CUcontext c, CUgraphExec *e, CUgraph g) {
	FERRY_FN(F_cuGraphInstantiate, CUresult (*)(CUgraphExec *, CUgraph, unsigned long long));
	FERRY_CTX(c);
	return f(e, g, 0);
}
CUresult ferry_cuGraphLaunch(CUcontext c, CUgraphExec e, CUstream s) {
	FERRY_FN(F_cuGraphLaunch, CUresult (*)(CUgraphExec, CUstream));
	FERRY_CTX(c);
	return f(e, s);
}
CUresult ferry_cuGraphExecDestroy(CUcontext c, CUgraphExec e) {
	FERRY_FN(F_cuGraphExecDestroy, CUresult (*)(CUgraphExec));
	FERRY_CTX(c);
	return f(e);
}
CUresult ferry_cuGraphDestroy(CUcontext c, CUgraph g) {
	FERRY_FN(F_cuGraphDestroy, CUresult (*)(CUgraph));
	FERRY_CTX(c);
	return f(g);
}

