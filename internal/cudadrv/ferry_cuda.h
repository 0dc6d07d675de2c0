// Minimal CUDA driver, NVRTC and GDRCopy declarations: only the types,
// values and layouts ferry uses, written from the public API documentation
// so that a build needs no CUDA toolkit. The functions themselves are never
// linked: they are looked up with dlsym and called through the pointer
// table in table.c.
#ifndef FERRY_CUDA_H
#define FERRY_CUDA_H

#include <stddef.h>
#include <stdint.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef unsigned long long CUmemGenericAllocationHandle;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphExec_st *CUgraphExec;

#define CUDA_SUCCESS 0
#define CUDA_ERROR_INVALID_VALUE 1
#define CUDA_ERROR_NOT_INITIALIZED 3
#define CUDA_ERROR_NOT_SUPPORTED 801

// CUmemLocation and CUmemAllocationProp (cuda.h, CUDA 11.x to 13.x). The
// asserts below pin the x86-64/aarch64 layout the driver expects.
typedef struct {
	int type; // CUmemLocationType: 1 = device
	int id;
} CUmemLocation;

typedef struct {
	int type;                 // CUmemAllocationType: 1 = pinned
	int requestedHandleTypes; // CUmemAllocationHandleType bit set
	CUmemLocation location;
	void *win32HandleMetaData;
	struct {
		unsigned char compressionType;
		unsigned char gpuDirectRDMACapable;
		unsigned short usage;
		unsigned char reserved[4];
	} allocFlags;
} CUmemAllocationProp;

typedef struct {
	CUmemLocation location;
	int flags; // CUmemAccess_flags: 3 = read/write
} CUmemAccessDesc;

_Static_assert(sizeof(CUmemLocation) == 8, "CUmemLocation layout");
_Static_assert(sizeof(CUmemAllocationProp) == 32, "CUmemAllocationProp layout");
_Static_assert(offsetof(CUmemAllocationProp, allocFlags) == 24, "allocFlags offset");
_Static_assert(sizeof(CUmemAccessDesc) == 12, "CUmemAccessDesc layout");

// NVRTC.
typedef int nvrtcResult;
typedef struct _nvrtcProgram *nvrtcProgram;

// GDRCopy (gdrapi.h, API 2.x).
typedef struct gdr *gdr_t;
typedef struct gdr_mh_s {
	unsigned long h;
} gdr_mh_t;

#endif
