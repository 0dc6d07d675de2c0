// Slots of the CUDA driver function-pointer table and the trampolines that
// call through it (cu_table.c). Each trampoline checks its pointer, makes
// the caller's context current when it is given one, and calls.
#ifndef FERRY_CU_TABLE_H
#define FERRY_CU_TABLE_H

#include "ferry_cuda.h"

enum {
	F_cuInit, F_cuDriverGetVersion, F_cuGetErrorName, F_cuGetErrorString,
	F_cuDeviceGetCount, F_cuDeviceGet, F_cuDeviceGetName, F_cuDeviceGetAttribute,
	F_cuDeviceGetPCIBusId, F_cuDeviceTotalMem, F_cuDeviceCanAccessPeer,
	F_cuDevicePrimaryCtxRetain, F_cuDevicePrimaryCtxRelease,
	F_cuCtxGetCurrent, F_cuCtxSetCurrent, F_cuCtxSynchronize,
	F_cuCtxEnablePeerAccess, F_cuCtxDisablePeerAccess,
	F_cuPointerGetAttribute, F_cuPointerSetAttribute,
	F_cuMemAlloc, F_cuMemFree, F_cuMemHostAlloc, F_cuMemFreeHost, F_cuMemHostGetDevicePointer,
	F_cuMemcpy, F_cuMemcpyHtoD, F_cuMemcpyDtoH, F_cuMemcpyDtoD, F_cuMemcpyAsync,
	F_cuMemsetD8, F_cuMemsetD8Async, F_cuMemGetHandleForAddressRange,
	F_cuMemGetAllocationGranularity, F_cuMemCreate, F_cuMemRelease,
	F_cuMemAddressReserve, F_cuMemAddressFree, F_cuMemMap, F_cuMemUnmap, F_cuMemSetAccess,
	F_cuMemExportToShareableHandle, F_cuMemImportFromShareableHandle,
	F_cuStreamCreate, F_cuStreamDestroy, F_cuStreamSynchronize, F_cuStreamQuery,
	F_cuStreamBeginCapture, F_cuStreamEndCapture,
	F_cuEventCreate, F_cuEventDestroy, F_cuEventRecord, F_cuEventQuery,
	F_cuEventSynchronize, F_cuEventElapsedTime,
	F_cuModuleLoadData, F_cuModuleUnload, F_cuModuleGetFunction, F_cuFuncGetAttribute,
	F_cuOccupancyMaxActiveBlocksPerMultiprocessor, F_cuLaunchKernel, F_cuLaunchCooperativeKernel,
	F_cuGraphInstantiate, F_cuGraphLaunch, F_cuGraphExecDestroy, F_cuGraphDestroy,
	F_cuFlushGPUDirectRDMAWrites,
	F_CU_COUNT
};

void ferry_cu_set(int i, void *p);
void ferry_cu_mark_loaded(void);
CUresult ferry_cuInit(unsigned int flags);
CUresult ferry_cuDriverGetVersion(int *v);
CUresult ferry_cuGetErrorName(CUresult r, const char **s);
CUresult ferry_cuGetErrorString(CUresult r, const char **s);
CUresult ferry_cuDeviceGetCount(int *n);
CUresult ferry_cuDeviceGet(CUdevice *d, int ordinal);
CUresult ferry_cuDeviceGetName(char *name, int len, CUdevice d);
CUresult ferry_cuDeviceGetAttribute(int *v, int attr, CUdevice d);
CUresult ferry_cuDeviceGetPCIBusId(char *id, int len, CUdevice d);
CUresult ferry_cuDeviceTotalMem(size_t *n, CUdevice d);
CUresult ferry_cuDeviceCanAccessPeer(int *can, CUdevice d, CUdevice peer);
CUresult ferry_cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d);
CUresult ferry_cuDevicePrimaryCtxRelease(CUdevice d);
CUresult ferry_cuCtxSynchronize(CUcontext c);
CUresult ferry_cuCtxEnablePeerAccess(CUcontext c, CUcontext peer);
CUresult ferry_cuCtxDisablePeerAccess(CUcontext c, CUcontext peer);
CUresult ferry_cuPointerGetAttribute(unsigned long long *v, int attr, CUdeviceptr p);
CUresult ferry_cuPointerSetAttribute(CUcontext c, int attr, unsigned int v, CUdeviceptr p);
CUresult ferry_cuMemAlloc(CUcontext c, CUdeviceptr *p, size_t n);
CUresult ferry_cuMemFree(CUcontext c, CUdeviceptr p);
CUresult ferry_cuMemHostAlloc(CUcontext c, void **p, size_t n, unsigned int flags);
CUresult ferry_cuMemFreeHost(CUcontext c, void *p);
CUresult ferry_cuMemHostGetDevicePointer(CUcontext c, CUdeviceptr *d, void *p);
CUresult ferry_cuMemcpy(CUcontext c, void *dst, void *src, size_t n);
CUresult ferry_cuMemcpyHtoD(CUcontext c, CUdeviceptr dst, const void *src, size_t n);
CUresult ferry_cuMemcpyDtoH(CUcontext c, void *dst, CUdeviceptr src, size_t n);
CUresult ferry_cuMemcpyDtoD(CUcontext c, CUdeviceptr dst, CUdeviceptr src, size_t n);
CUresult ferry_cuMemcpyAsync(CUcontext c, CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s);
CUresult ferry_cuMemsetD8(CUcontext c, CUdeviceptr dst, unsigned char v, size_t n);
CUresult ferry_cuMemsetD8Async(CUcontext c, CUdeviceptr dst, unsigned char v, size_t n, CUstream s);
CUresult ferry_cuMemGetHandleForAddressRange(CUcontext c, int *fd, CUdeviceptr p, size_t n, int type, unsigned long long flags);
CUresult ferry_cuMemGetAllocationGranularity(CUcontext c, size_t *g, int dev, int handles, int rdma, int option);
CUresult ferry_cuMemCreate(CUcontext c, CUmemGenericAllocationHandle *h, size_t n, int dev, int handles, int rdma);
CUresult ferry_cuMemRelease(CUcontext c, CUmemGenericAllocationHandle h);
CUresult ferry_cuMemAddressReserve(CUcontext c, CUdeviceptr *p, size_t n, size_t align, CUdeviceptr addr);
CUresult ferry_cuMemAddressFree(CUcontext c, CUdeviceptr p, size_t n);
CUresult ferry_cuMemMap(CUcontext c, CUdeviceptr p, size_t n, size_t off, CUmemGenericAllocationHandle h);
CUresult ferry_cuMemUnmap(CUcontext c, CUdeviceptr p, size_t n);
CUresult ferry_cuMemSetAccess(CUcontext c, CUdeviceptr p, size_t n, const int *devs, int ndev);
CUresult ferry_cuMemExportToShareableHandle(CUcontext c, int *fd, CUmemGenericAllocationHandle h, int type);
CUresult ferry_cuMemImportFromShareableHandle(CUcontext c, CUmemGenericAllocationHandle *h, int fd, int type);
CUresult ferry_cuStreamCreate(CUcontext c, CUstream *s, unsigned int flags);
CUresult ferry_cuStreamDestroy(CUcontext c, CUstream s);
CUresult ferry_cuStreamSynchronize(CUcontext c, CUstream s);
CUresult ferry_cuStreamQuery(CUcontext c, CUstream s);
CUresult ferry_cuStreamBeginCapture(CUcontext c, CUstream s, int mode);
CUresult ferry_cuStreamEndCapture(CUcontext c, CUstream s, CUgraph *g);
CUresult ferry_cuEventCreate(CUcontext c, CUevent *e, unsigned int flags);
CUresult ferry_cuEventDestroy(CUcontext c, CUevent e);
CUresult ferry_cuEventRecord(CUcontext c, CUevent e, CUstream s);
CUresult ferry_cuEventQuery(CUcontext c, CUevent e);
CUresult ferry_cuEventSynchronize(CUcontext c, CUevent e);
CUresult ferry_cuEventElapsedTime(CUcontext c, float *ms, CUevent a, CUevent b);
CUresult ferry_cuModuleLoadData(CUcontext c, CUmodule *m, const void *image);
CUresult ferry_cuModuleUnload(CUcontext c, CUmodule m);
CUresult ferry_cuModuleGetFunction(CUcontext c, CUfunction *fn, CUmodule m, const char *name);
CUresult ferry_cuFuncGetAttribute(CUcontext c, int *v, int attr, CUfunction fn);
CUresult ferry_cuOccupancyMaxActiveBlocksPerMultiprocessor(CUcontext c, int *n, CUfunction fn, int block, size_t smem);
CUresult ferry_cuFlushGPUDirectRDMAWrites(CUcontext c, int target, int scope);
CUresult ferry_cuLaunch(CUcontext c, CUfunction fn,
	unsigned int gx, unsigned int gy, unsigned int gz,
	unsigned int bx, unsigned int by, unsigned int bz,
	unsigned int smem, CUstream s,
	unsigned char *args, const unsigned int *offs, int nargs, int coop);
CUresult ferry_cuGraphInstantiate(CUcontext c, CUgraphExec *e, CUgraph g);
CUresult ferry_cuGraphLaunch(CUcontext c, CUgraphExec e, CUstream s);
CUresult ferry_cuGraphExecDestroy(CUcontext c, CUgraphExec e);
CUresult ferry_cuGraphDestroy(CUcontext c, CUgraph g);

#endif
