// A fake libcuda.so.1 for the package's tests on machines without a GPU.
// "Device" memory is host memory, kernels are two C functions, graphs
// record the launches made while a stream is captured, VMM allocations
// are memfds (an exported handle is a file another process can import and
// map, and the live handles, mappings and reserved ranges are counted).
// It checks what the
// real driver would refuse: calls that need a current context without
// one, malformed allocation properties, unknown images and kernels.
// Built by the test with: cc -shared -fPIC -o libcuda.so.1 fakecuda.c
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;

static __thread void *current;
static void *const contexts[2] = {(void *)0x1000, (void *)0x2000};
static int retained[2];
static int capturing; // launches are recorded instead of run
static int capture_mode = -1;

// Counters the tests read as device attributes 9000 + which.
static long set_current_calls, launches, coop_launches, live_allocs;
static long live_handles, live_mappings, live_ranges; // VMM
static int last_rdma, last_handle_types, last_access_flags, last_access_count;
static long rdma_flushes;

long fake_stats(int which) {
	switch (which) {
	case 0: return set_current_calls;
	case 1: return launches;
	case 2: return coop_launches;
	case 3: return live_allocs;
	case 4: return last_rdma;
	case 5: return last_handle_types;
	case 6: return last_access_flags;
	case 7: return last_access_count;
	case 8: return capture_mode;
	case 9: return live_handles;
	case 10: return live_mappings;
	case 11: return live_ranges;
	case 12: return rdma_flushes;
	}
	return -1;
}

#define NEED_CTX() do { if (current == NULL) return 201; } while (0) // CUDA_ERROR_INVALID_CONTEXT

CUresult cuInit(unsigned f) { return f == 0 ? 0 : 1; }
CUresult cuDriverGetVersion(int *v) { *v = 13000; return 0; }
CUresult cuGetErrorName(CUresult r, const char **s) { *s = "CUDA_ERROR_FAKE"; return 0; }
CUresult cuGetErrorString(CUresult r, const char **s) { *s = "fake driver error"; return 0; }
CUresult cuDeviceGetCount(int *n) { *n = 2; return 0; }
CUresult cuDeviceGet(int *d, int o) { if (o < 0 || o > 1) return 101; *d = o; return 0; }
CUresult cuDeviceGetName(char *s, int n, int d) { strncpy(s, d ? "Fake GPU B" : "Fake GPU A", n); return 0; }
CUresult cuDeviceGetAttribute(int *v, int a, int d) {
	if (a >= 9000) { *v = (int)fake_stats(a - 9000); return 0; } // test hook
	switch (a) {
	case 16: *v = 4; break;              // SMs
	case 75: *v = 9; break;              // major
	case 76: *v = 0; break;              // minor
	case 110: *v = d == 0; break;        // GPUDirect RDMA with VMM: device 0 only
	case 86: *v = d == 0; break;         // host native atomics (C2C): device 0 only
	default: *v = 1;
	}
	return 0;
}
CUresult cuDeviceGetPCIBusId(char *s, int n, int d) { strncpy(s, d ? "0000:02:00.0" : "0000:01:00.0", n); return 0; }
CUresult cuDeviceTotalMem_v2(size_t *n, int d) { *n = (size_t)80 << 30; return 0; }
CUresult cuDeviceCanAccessPeer(int *c, int d, int p) { *c = d != p; return 0; }
CUresult cuDevicePrimaryCtxRetain(void **c, int d) { retained[d]++; *c = contexts[d]; return 0; }
CUresult cuDevicePrimaryCtxRelease_v2(int d) { return retained[d]-- > 0 ? 0 : 201; }
CUresult cuCtxGetCurrent(void **c) { *c = current; return 0; }
CUresult cuCtxSetCurrent(void *c) { set_current_calls++; current = c; return 0; }
CUresult cuCtxSynchronize(void) { NEED_CTX(); return 0; }
CUresult cuCtxEnablePeerAccess(void *p, unsigned f) { NEED_CTX(); return p == current ? 1 : 0; }
CUresult cuCtxDisablePeerAccess(void *p) { NEED_CTX(); return 0; }
CUresult cuPointerGetAttribute(void *v, int a, CUdeviceptr p) {
	if (a == 2) *(unsigned *)v = 2;      // device memory
	else if (a == 9) *(int *)v = 0;      // ordinal 0
	else return 1;
	return 0;
}

CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) {
	NEED_CTX();
	void *m = NULL;
	if (posix_memalign(&m, 2 << 20, n)) return 2;
	live_allocs++;
	*p = (CUdeviceptr)(uintptr_t)m;
	return 0;
}
CUresult cuMemFree_v2(CUdeviceptr p) { NEED_CTX(); live_allocs--; free((void *)(uintptr_t)p); return 0; }
CUresult cuMemHostAlloc(void **p, size_t n, unsigned f) { NEED_CTX(); *p = malloc(n); memset(*p, 0xee, n); live_allocs++; return 0; }
CUresult cuMemFreeHost(void *p) { NEED_CTX(); live_allocs--; free(p); return 0; }
CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *d, void *p, unsigned f) { NEED_CTX(); *d = (CUdeviceptr)(uintptr_t)p; return f ? 1 : 0; }
CUresult cuMemcpy(CUdeviceptr d, CUdeviceptr s, size_t n) { NEED_CTX(); memcpy((void *)(uintptr_t)d, (void *)(uintptr_t)s, n); return 0; }
CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void *s, size_t n) { NEED_CTX(); memcpy((void *)(uintptr_t)d, s, n); return 0; }
CUresult cuMemcpyDtoH_v2(void *d, CUdeviceptr s, size_t n) { NEED_CTX(); memcpy(d, (void *)(uintptr_t)s, n); return 0; }
CUresult cuMemcpyDtoD_v2(CUdeviceptr d, CUdeviceptr s, size_t n) { NEED_CTX(); memmove((void *)(uintptr_t)d, (void *)(uintptr_t)s, n); return 0; }
CUresult cuMemcpyAsync(CUdeviceptr d, CUdeviceptr s, size_t n, void *st) { return cuMemcpy(d, s, n); }
CUresult cuMemsetD8_v2(CUdeviceptr d, unsigned char v, size_t n) { NEED_CTX(); memset((void *)(uintptr_t)d, v, n); return 0; }
CUresult cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, void *st) { return cuMemsetD8_v2(d, v, n); }
CUresult cuMemGetHandleForAddressRange(void *h, CUdeviceptr p, size_t n, int type, unsigned long long f) {
	NEED_CTX();
	if (type != 1 || (p & 4095) || (n & 4095) || n == 0) return 1;
	*(int *)h = dup(0);
	return 0;
}

// VMM. The property layout is checked field by field.
typedef struct { int type, id; } loc_t;
typedef struct {
	int type, handles;
	loc_t loc;
	void *win32;
	unsigned char compression, rdma;
	unsigned short usage;
	unsigned char reserved[4];
} prop_t;
typedef struct { loc_t loc; int flags; } access_t;
// A VMM allocation is a memfd, so an exported handle is a real file a
// peer process can import and map: stores through one mapping show in
// every other, as with physical memory mapped twice.
typedef struct { int fd; size_t size; } alloc_t;
// Reserved ranges are PROT_NONE address space; cuMemMap maps the memfd
// over one, cuMemUnmap returns it to PROT_NONE. The driver is thread-safe,
// so the table is locked.
typedef struct { CUdeviceptr at; size_t size; int mapped; } range_t;
static range_t ranges[64];
static pthread_mutex_t vmm_lock = PTHREAD_MUTEX_INITIALIZER;
static void vmm_unlock(int *unused) { pthread_mutex_unlock(&vmm_lock); }
#define VMM_LOCK() pthread_mutex_lock(&vmm_lock); __attribute__((cleanup(vmm_unlock))) int vmm_guard_ = 0

static CUresult check_prop(const prop_t *p) {
	if (p->type != 1 || p->loc.type != 1 || p->loc.id < 0 || p->loc.id > 1 || p->win32 != NULL ||
	    p->compression != 0 || p->usage != 0)
		return 1;
	last_rdma = p->rdma;
	last_handle_types = p->handles;
	return 0;
}
static range_t *range_at(CUdeviceptr p, size_t n) {
	for (int i = 0; i < 64; i++)
		if (ranges[i].at == p && ranges[i].size == n) return &ranges[i];
	return NULL;
}
static alloc_t *new_alloc(int fd, size_t n) {
	alloc_t *a = calloc(1, sizeof(*a));
	a->fd = fd;
	a->size = n;
	live_handles++;
	return a;
}
CUresult cuMemGetAllocationGranularity(size_t *g, const prop_t *p, int opt) { NEED_CTX(); *g = 2 << 20; return check_prop(p); }
CUresult cuMemCreate(unsigned long long *h, size_t n, const prop_t *p, unsigned long long f) {
	VMM_LOCK();
	NEED_CTX();
	if (check_prop(p) || f || n % (2 << 20)) return 1;
	int fd = memfd_create("fake-vmm", MFD_CLOEXEC);
	if (fd < 0 || ftruncate(fd, (off_t)n) != 0) return 2;
	*h = (unsigned long long)(uintptr_t)new_alloc(fd, n);
	return 0;
}
// Release drops the handle; mappings keep the memory, as on a GPU.
CUresult cuMemRelease(unsigned long long h) {
	VMM_LOCK();
	NEED_CTX();
	alloc_t *a = (alloc_t *)(uintptr_t)h;
	close(a->fd);
	free(a);
	live_handles--;
	return 0;
}
CUresult cuMemAddressReserve(CUdeviceptr *p, size_t n, size_t al, CUdeviceptr addr, unsigned long long f) {
	VMM_LOCK();
	NEED_CTX();
	for (int i = 0; i < 64; i++) {
		if (ranges[i].at) continue;
		void *m = mmap(NULL, n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (m == MAP_FAILED) return 2;
		ranges[i] = (range_t){(CUdeviceptr)(uintptr_t)m, n, 0};
		live_ranges++;
		*p = ranges[i].at;
		return 0;
	}
	return 2;
}
CUresult cuMemAddressFree(CUdeviceptr p, size_t n) {
	VMM_LOCK();
	NEED_CTX();
	range_t *r = range_at(p, n);
	if (r == NULL || r->mapped) return 1; // unknown, or still mapped
	munmap((void *)(uintptr_t)p, n);
	*r = (range_t){0};
	live_ranges--;
	return 0;
}
CUresult cuMemMap(CUdeviceptr p, size_t n, size_t off, unsigned long long h, unsigned long long f) {
	VMM_LOCK();
	NEED_CTX();
	alloc_t *a = (alloc_t *)(uintptr_t)h;
	range_t *r = range_at(p, n);
	if (r == NULL || r->mapped || n != a->size || off || f) return 1;
	if (mmap((void *)(uintptr_t)p, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, a->fd, 0) == MAP_FAILED) return 2;
	r->mapped = 1;
	live_mappings++;
	return 0;
}
CUresult cuMemUnmap(CUdeviceptr p, size_t n) {
	VMM_LOCK();
	NEED_CTX();
	range_t *r = range_at(p, n);
	if (r == NULL || !r->mapped) return 1;
	mmap((void *)(uintptr_t)p, n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
	r->mapped = 0;
	live_mappings--;
	return 0;
}
CUresult cuMemSetAccess(CUdeviceptr p, size_t n, const access_t *d, size_t count) {
	VMM_LOCK();
	NEED_CTX();
	range_t *r = range_at(p, n);
	if (r == NULL || !r->mapped) return 1; // access is set on mapped ranges only
	last_access_count = (int)count;
	last_access_flags = d[0].flags;
	for (size_t i = 0; i < count; i++)
		if (d[i].loc.type != 1 || d[i].flags != 3) return 1;
	return 0;
}
// Export gives a new descriptor of the memfd; import takes the fd value
// itself (not a pointer to it) and keeps its own duplicate.
CUresult cuMemExportToShareableHandle(void *out, unsigned long long h, int type, unsigned long long f) {
	NEED_CTX();
	if (type != 1 || f) return 1;
	*(int *)out = fcntl(((alloc_t *)(uintptr_t)h)->fd, F_DUPFD_CLOEXEC, 0);
	return 0;
}
CUresult cuMemImportFromShareableHandle(unsigned long long *h, void *os_handle, int type) {
	VMM_LOCK();
	NEED_CTX();
	intptr_t fd = (intptr_t)os_handle;
	struct stat st;
	if (type != 1 || fd < 0 || fd > 65535 || fstat((int)fd, &st) != 0) return 1; // a pointer here would be a bug
	*h = (unsigned long long)(uintptr_t)new_alloc(fcntl((int)fd, F_DUPFD_CLOEXEC, 0), (size_t)st.st_size);
	return 0;
}

CUresult cuStreamCreate(void **s, unsigned f) { NEED_CTX(); *s = malloc(1); return 0; }
CUresult cuStreamDestroy_v2(void *s) { NEED_CTX(); free(s); return 0; }
CUresult cuStreamSynchronize(void *s) { NEED_CTX(); return 0; }
CUresult cuStreamQuery(void *s) { NEED_CTX(); return 0; }
CUresult cuEventCreate(void **e, unsigned f) { NEED_CTX(); *e = malloc(1); return 0; }
CUresult cuEventDestroy_v2(void *e) { NEED_CTX(); free(e); return 0; }
CUresult cuEventRecord(void *e, void *s) { NEED_CTX(); return 0; }
CUresult cuEventQuery(void *e) { NEED_CTX(); return 0; }
CUresult cuEventSynchronize(void *e) { NEED_CTX(); return 0; }
CUresult cuEventElapsedTime_v2(float *ms, void *a, void *b) { NEED_CTX(); *ms = 1.5f; return 0; }

// Kernels: fake_add(unsigned long long *p, unsigned int v) adds v to *p;
// fake_args(u8, u16, u32, u64, f32, f64, ptr out) stores their sum.
static char module_tag;
static char fn_add, fn_args;
CUresult cuModuleLoadData(void **m, const void *image) {
	NEED_CTX();
	if (memcmp(image, "\177ELF", 4) != 0) return 200; // CUDA_ERROR_INVALID_IMAGE
	if (strstr((const char *)image + 4, "STALE")) return 209; // CUDA_ERROR_NO_BINARY_FOR_GPU
	*m = &module_tag;
	return 0;
}
CUresult cuModuleUnload(void *m) { NEED_CTX(); return m == &module_tag ? 0 : 400; }
CUresult cuModuleGetFunction(void **f, void *m, const char *name) {
	NEED_CTX();
	if (strcmp(name, "fake_add") == 0) *f = &fn_add;
	else if (strcmp(name, "fake_args") == 0) *f = &fn_args;
	else return 500; // CUDA_ERROR_NOT_FOUND
	return 0;
}
CUresult cuFuncGetAttribute(int *v, int a, void *f) { NEED_CTX(); *v = 1024; return 0; }
CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *n, void *f, int b, size_t s) { NEED_CTX(); *n = 2; return 0; }
CUresult cuFlushGPUDirectRDMAWrites(int target, int scope) {
	NEED_CTX();
	if (target != 0 || scope != 100) return 1; // CUDA_ERROR_INVALID_VALUE
	rdma_flushes++;
	return 0;
}

typedef struct { void *f; unsigned long long *p; unsigned int v; } rec_t;
static rec_t recorded[64];
static int nrecorded;

static CUresult run(void *f, void **params) {
	if (f == &fn_add) {
		unsigned long long *p = *(unsigned long long **)params[0];
		unsigned int v = *(unsigned int *)params[1];
		if (capturing) {
			if (nrecorded == 64) return 1;
			recorded[nrecorded++] = (rec_t){f, p, v};
			return 0;
		}
		*p += v;
		return 0;
	}
	if (f == &fn_args) {
		double sum = *(unsigned char *)params[0] + *(unsigned short *)params[1] + *(unsigned int *)params[2] +
			(double)*(unsigned long long *)params[3] + *(float *)params[4] + *(double *)params[5];
		**(double **)params[6] = sum;
		return 0;
	}
	return 400;
}
CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
	unsigned smem, void *s, void **params, void **extra) {
	NEED_CTX();
	if (!gx || !gy || !gz || !bx || !by || !bz || extra) return 1;
	launches++;
	return run(f, params);
}
CUresult cuLaunchCooperativeKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
	unsigned bz, unsigned smem, void *s, void **params) {
	NEED_CTX();
	if (gx * gy * gz > 4 * 2) return 720; // CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE
	coop_launches++;
	return run(f, params);
}

// Graphs: a graph is the list of launches recorded during the capture.
typedef struct { int n; rec_t r[64]; } graph_t;
CUresult cuStreamBeginCapture_v2(void *s, int mode) { NEED_CTX(); capturing = 1; capture_mode = mode; nrecorded = 0; return 0; }
CUresult cuStreamEndCapture(void *s, void **g) {
	NEED_CTX();
	capturing = 0;
	graph_t *gr = calloc(1, sizeof(*gr));
	gr->n = nrecorded;
	memcpy(gr->r, recorded, sizeof(recorded));
	*g = gr;
	return 0;
}
CUresult cuGraphInstantiateWithFlags(void **e, void *g, unsigned long long f) {
	NEED_CTX();
	graph_t *c = malloc(sizeof(graph_t));
	memcpy(c, g, sizeof(graph_t));
	*e = c;
	return 0;
}
CUresult cuGraphLaunch(void *e, void *s) {
	NEED_CTX();
	graph_t *g = e;
	for (int i = 0; i < g->n; i++) *g->r[i].p += g->r[i].v;
	return 0;
}
CUresult cuGraphExecDestroy(void *e) { NEED_CTX(); free(e); return 0; }
CUresult cuGraphDestroy(void *g) { NEED_CTX(); free(g); return 0; }
