// ferry_device.h: the one device header of ferry's kernels.
//
// Every kernel source goes through this header for everything that is not
// plain C++, so that the same source compiles three ways:
//   - NVRTC (package cuda prepends `#include "ferry_device.h"` and hands
//     this file over as an in-memory header; NVRTC has no other headers);
//   - nvcc, if anyone wants to;
//   - g++ -std=c++20 for the CPU emulator (cuda/emu), where
//     fd_emu_device.h supplies the host implementation of the same names.
// Inline PTX lives in this file only. Features newer than PTX ISA 7.8
// (CUDA 11.8, the NVRTC that CI machines install) are guarded with
// __CUDACC_VER_MAJOR__ >= 12 and have a PTX 7.8 fallback.
//
// Kernels are written
//   extern "C" __global__ void __launch_bounds__(N) name(params...)
// with pointers, 32/64-bit integers, floats or small POD structs as
// parameters. __launch_bounds__ is required by the compile gate.
//
// CUDA spellings kept (the emulator implements them): threadIdx, blockIdx,
// blockDim, gridDim, warpSize, __syncthreads, __syncthreads_count/_and/_or,
// __syncwarp, __shfl_sync, __shfl_up_sync, __shfl_down_sync,
// __shfl_xor_sync, __ballot_sync, __any_sync, __all_sync, __reduce_add_sync,
// __reduce_min_sync, __reduce_max_sync, __reduce_or_sync, __reduce_and_sync
// (unsigned, sm_80+), __popc, __popcll, __ffs, __ffsll, __clz, __clzll,
// __brev, min, max, __float_as_uint, __uint_as_float, __float_as_int,
// __int_as_float, __fmul_rn, __fadd_rn, __device__, __forceinline__,
// __restrict__, __global__, __launch_bounds__, __align__, static
// `__shared__` arrays inside kernels, __trap.
//
// fd_ names (all __device__, usable from any thread):
//   uint8_t..uint64_t, int8_t..int64_t, size_t, uintptr_t (NVRTC has no
//     headers; the host side takes them from <cstdint>)
//   fd_ld_acquire_{cta,gpu,sys}(p), fd_ld_relaxed_{gpu,sys}(p)
//   fd_st_release_{cta,gpu,sys}(p, v), fd_st_relaxed_{gpu,sys}(p, v)
//     for int, unsigned, long, unsigned long, long long, unsigned long long
//   fd_atomic_add_{gpu,sys}(p, v) -> old          relaxed, like atomicAdd
//   fd_atomic_add_acq_rel_{gpu,sys}(p, v) -> old  publishes and observes
//   fd_atomic_cas_{gpu,sys}(p, cmp, v) -> old     relaxed
//   fd_atomic_cas_acq_rel_{gpu,sys}(p, cmp, v) -> old
//   fd_atomic_exch_{gpu,sys}(p, v) -> old         relaxed
//   fd_atomic_max_gpu(p, v) -> old                relaxed
//     (u32 and u64 forms; max also for int)
//   fd_fence_{cta,gpu,sys}()                      sequentially consistent
//   fd_globaltimer_ns() -> u64, fd_nanosleep(ns)
//   fd_lane_id(), fd_warp_id() (linear thread index / 32), fd_thread_id()
//     (linear thread index in the block), fd_block_threads()
//   fd_elect_one(mask): true in exactly one lane of mask (elect.sync on
//     CUDA 12+, lowest lane otherwise)
//   fd_grid_barrier {arrived, generation}, zeroed once by the host:
//     fd_grid_sync(b): every thread of every block of a cooperative launch
//     calls it; generation counting, so graph replays need no host reset.
//     fd_grid_sync_for(b, timeout_ns) -> bool: the same, false (in every
//     thread of the block) if the grid did not gather in time.
//   fd_v16 {x, y, z, w} (16-byte aligned): fd_ld16(p), fd_ld16_nc(p)
//     (read-only data, no L1 allocation), fd_st16(p, v), fd_st16_na(p, v)
//     (streaming store); p is 16-byte aligned, global memory for _nc/_na
//   fd_ld16_or_zero(p), fd_ld16_nc_or_zero(p): the same loads for a p that
//     may be null, which reads a zero vector; predicated, not branched, so
//     that a run of them issues back to back
//   FD_DYN_SHARED(T, name): declares `T *name` pointing at the block's
//     dynamic shared memory (16-byte aligned)
//   fd_bf16_to_f32, fd_f32_to_bf16, fd_f16_to_f32, fd_f32_to_f16,
//     fd_e4m3_to_f32, fd_f32_to_e4m3: bit operations, round to nearest
//     even, bit-equal to a2a's Go conversions (e4m3 is the "fn" variant:
//     no infinities, 0x7f/0xff NaN, out-of-range values saturate to
//     +-448 like cvt.rn.satfinite)
//   fd_mul_add_f32(acc, w, y) = acc + w*y rounded twice, never fused (a2a's
//     MulAdd)
//   FD_STATUS_OK = 1, FD_STATUS_TIMEOUT = 2: status words kernels write
//
// Memory-order rules the emulator checks (ThreadSanitizer build): publish
// with a release store or an acq_rel atomic and observe with an acquire
// load; fences are executed but not modelled by the race checker. Every
// spin loop calls fd_nanosleep or reads through fd_ld_*/fd_atomic_*: these
// are the emulator's yield points (a plain or volatile load in a spin loop
// starves the other threads of the block there).
#ifndef FERRY_DEVICE_H
#define FERRY_DEVICE_H

#define FD_API_VERSION 1
#define FD_STATUS_OK 1u
#define FD_STATUS_TIMEOUT 2u

#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
#define FD_DEVICE_BUILD 1

#if defined(__CUDACC_RTC__)
typedef unsigned char uint8_t;
typedef signed char int8_t;
typedef unsigned short uint16_t;
typedef short int16_t;
typedef unsigned int uint32_t;
typedef int int32_t;
typedef unsigned long uint64_t;
typedef long int64_t;
typedef unsigned long size_t;
typedef unsigned long uintptr_t;
#else
#include <stdint.h>
#include <stddef.h>
#endif

#define FD_DEV __device__ __forceinline__

// Loads and stores with a memory order and a scope. Generic addressing, so
// the pointer may be global or shared memory.
#define FD_LDST_(T, B, C)                                                                           \
	FD_DEV T fd_ld_acquire_cta(const T *p) { T v; asm volatile("ld.acquire.cta." B " %0, [%1];" : "=" C(v) : "l"(p) : "memory"); return v; } \
	FD_DEV T fd_ld_acquire_gpu(const T *p) { T v; asm volatile("ld.acquire.gpu." B " %0, [%1];" : "=" C(v) : "l"(p) : "memory"); return v; } \
	FD_DEV T fd_ld_acquire_sys(const T *p) { T v; asm volatile("ld.acquire.sys." B " %0, [%1];" : "=" C(v) : "l"(p) : "memory"); return v; } \
	FD_DEV T fd_ld_relaxed_gpu(const T *p) { T v; asm volatile("ld.relaxed.gpu." B " %0, [%1];" : "=" C(v) : "l"(p) : "memory"); return v; } \
	FD_DEV T fd_ld_relaxed_sys(const T *p) { T v; asm volatile("ld.relaxed.sys." B " %0, [%1];" : "=" C(v) : "l"(p) : "memory"); return v; } \
	FD_DEV void fd_st_release_cta(T *p, T v) { asm volatile("st.release.cta." B " [%0], %1;" ::"l"(p), C(v) : "memory"); } \
	FD_DEV void fd_st_release_gpu(T *p, T v) { asm volatile("st.release.gpu." B " [%0], %1;" ::"l"(p), C(v) : "memory"); } \
	FD_DEV void fd_st_release_sys(T *p, T v) { asm volatile("st.release.sys." B " [%0], %1;" ::"l"(p), C(v) : "memory"); } \
	FD_DEV void fd_st_relaxed_gpu(T *p, T v) { asm volatile("st.relaxed.gpu." B " [%0], %1;" ::"l"(p), C(v) : "memory"); } \
	FD_DEV void fd_st_relaxed_sys(T *p, T v) { asm volatile("st.relaxed.sys." B " [%0], %1;" ::"l"(p), C(v) : "memory"); }
FD_LDST_(unsigned int, "b32", "r")
FD_LDST_(int, "b32", "r")
FD_LDST_(unsigned long, "b64", "l")
FD_LDST_(long, "b64", "l")
FD_LDST_(unsigned long long, "b64", "l")
FD_LDST_(long long, "b64", "l")
#undef FD_LDST_

// Atomics: add/exch/cas relaxed (as atomicAdd & co.), add/cas also acq_rel.
#define FD_ATOM_(T, U, B, C)                                                                        \
	FD_DEV T fd_atomic_add_gpu(T *p, T v) { T o; asm volatile("atom.relaxed.gpu.add." U " %0, [%1], %2;" : "=" C(o) : "l"(p), C(v) : "memory"); return o; } \
	FD_DEV T fd_atomic_add_sys(T *p, T v) { T o; asm volatile("atom.relaxed.sys.add." U " %0, [%1], %2;" : "=" C(o) : "l"(p), C(v) : "memory"); return o; } \
	FD_DEV T fd_atomic_add_acq_rel_gpu(T *p, T v) { T o; asm volatile("atom.acq_rel.gpu.add." U " %0, [%1], %2;" : "=" C(o) : "l"(p), C(v) : "memory"); return o; } \
	FD_DEV T fd_atomic_add_acq_rel_sys(T *p, T v) { T o; asm volatile("atom.acq_rel.sys.add." U " %0, [%1], %2;" : "=" C(o) : "l"(p), C(v) : "memory"); return o; } \
	FD_DEV T fd_atomic_exch_gpu(T *p, T v) { T o; asm volatile("atom.relaxed.gpu.exch." B " %0, [%1], %2;" : "=" C(o) : "l"(p), C(v) : "memory"); return o; } \
	FD_DEV T fd_atomic_exch_sys(T *p, T v) { T o; asm volatile("atom.relaxed.sys.exch." B " %0, [%1], %2;" : "=" C(o) : "l"(p), C(v) : "memory"); return o; } \
	FD_DEV T fd_atomic_cas_gpu(T *p, T c, T v) { T o; asm volatile("atom.relaxed.gpu.cas." B " %0, [%1], %2, %3;" : "=" C(o) : "l"(p), C(c), C(v) : "memory"); return o; } \
	FD_DEV T fd_atomic_cas_sys(T *p, T c, T v) { T o; asm volatile("atom.relaxed.sys.cas." B " %0, [%1], %2, %3;" : "=" C(o) : "l"(p), C(c), C(v) : "memory"); return o; } \
	FD_DEV T fd_atomic_cas_acq_rel_gpu(T *p, T c, T v) { T o; asm volatile("atom.acq_rel.gpu.cas." B " %0, [%1], %2, %3;" : "=" C(o) : "l"(p), C(c), C(v) : "memory"); return o; } \
	FD_DEV T fd_atomic_cas_acq_rel_sys(T *p, T c, T v) { T o; asm volatile("atom.acq_rel.sys.cas." B " %0, [%1], %2, %3;" : "=" C(o) : "l"(p), C(c), C(v) : "memory"); return o; }
FD_ATOM_(unsigned int, "u32", "b32", "r")
FD_ATOM_(unsigned long, "u64", "b64", "l")
FD_ATOM_(unsigned long long, "u64", "b64", "l")
#undef FD_ATOM_
#define FD_MAX_(T, U, C) \
	FD_DEV T fd_atomic_max_gpu(T *p, T v) { T o; asm volatile("atom.relaxed.gpu.max." U " %0, [%1], %2;" : "=" C(o) : "l"(p), C(v) : "memory"); return o; }
FD_MAX_(unsigned int, "u32", "r")
FD_MAX_(int, "s32", "r")
FD_MAX_(unsigned long, "u64", "l")
FD_MAX_(unsigned long long, "u64", "l")
#undef FD_MAX_

FD_DEV void fd_fence_cta() { asm volatile("fence.sc.cta;" ::: "memory"); }
FD_DEV void fd_fence_gpu() { asm volatile("fence.sc.gpu;" ::: "memory"); }
FD_DEV void fd_fence_sys() { asm volatile("fence.sc.sys;" ::: "memory"); }

FD_DEV uint64_t fd_globaltimer_ns() {
	uint64_t t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	return t;
}
FD_DEV void fd_nanosleep(uint32_t ns) { asm volatile("nanosleep.u32 %0;" ::"r"(ns)); }

FD_DEV uint32_t fd_lane_id() {
	uint32_t l;
	asm("mov.u32 %0, %%laneid;" : "=r"(l));
	return l;
}
FD_DEV uint32_t fd_thread_id() { return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z); }
FD_DEV uint32_t fd_warp_id() { return fd_thread_id() >> 5; }
FD_DEV uint32_t fd_block_threads() { return blockDim.x * blockDim.y * blockDim.z; }

FD_DEV bool fd_elect_one(uint32_t mask) {
#if defined(__CUDACC_VER_MAJOR__) && __CUDACC_VER_MAJOR__ >= 12 && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
	uint32_t is;
	asm volatile("{\n\t.reg .pred p;\n\t.reg .b32 leader;\n\telect.sync leader|p, %1;\n\tselp.u32 %0, 1, 0, p;\n\t}"
	             : "=r"(is)
	             : "r"(mask));
	return is != 0;
#else
	return fd_lane_id() == (uint32_t)(__ffs(mask) - 1);
#endif
}

struct __align__(16) fd_v16 {
	uint32_t x, y, z, w;
};
FD_DEV fd_v16 fd_ld16(const void *p) {
	fd_v16 v;
	asm volatile("ld.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p) : "memory");
	return v;
}
FD_DEV fd_v16 fd_ld16_nc(const void *p) {
	fd_v16 v;
	asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
	    : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
	return v;
}
FD_DEV fd_v16 fd_ld16_or_zero(const void *p) {
	fd_v16 v;
	asm volatile("{\n\t.reg .pred q;\n\tsetp.ne.u64 q, %4, 0;\n\tmov.b32 %0, 0;\n\tmov.b32 %1, 0;\n\t"
	             "mov.b32 %2, 0;\n\tmov.b32 %3, 0;\n\t@q ld.v4.u32 {%0, %1, %2, %3}, [%4];\n\t}"
	             : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p) : "memory");
	return v;
}
FD_DEV fd_v16 fd_ld16_nc_or_zero(const void *p) {
	fd_v16 v;
	asm("{\n\t.reg .pred q;\n\tsetp.ne.u64 q, %4, 0;\n\tmov.b32 %0, 0;\n\tmov.b32 %1, 0;\n\t"
	    "mov.b32 %2, 0;\n\tmov.b32 %3, 0;\n\t@q ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\n\t}"
	    : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
	return v;
}
FD_DEV void fd_st16(void *p, fd_v16 v) {
	asm volatile("st.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
}
FD_DEV void fd_st16_na(void *p, fd_v16 v) {
	asm volatile("st.global.cs.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
}

#define FD_DYN_SHARED(T, name)                                      \
	extern __shared__ __align__(16) unsigned char fd_dyn_smem_[]; \
	T *name = reinterpret_cast<T *>(fd_dyn_smem_)

FD_DEV float fd_mul_add_f32(float acc, float w, float y) { return __fadd_rn(acc, __fmul_rn(w, y)); }

#else // host build: the CPU emulator
#include "fd_emu_device.h"
#endif

// ---- Shared by both builds: plain C++ on top of the primitives above ----

struct fd_grid_barrier {
	uint32_t arrived;
	uint32_t generation;
};

// fd_grid_sync_for: thread 0 of each block arrives (acq_rel, so the
// block's writes travel with the count), the last arrival resets the count
// and releases the next generation, the others wait for it.
__device__ __forceinline__ bool fd_grid_sync_for(fd_grid_barrier *b, uint64_t timeout_ns) {
	__syncthreads();
	int ok = 1;
	if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) {
		uint32_t blocks = gridDim.x * gridDim.y * gridDim.z;
		uint32_t gen = fd_ld_acquire_gpu(&b->generation);
		if (fd_atomic_add_acq_rel_gpu(&b->arrived, 1u) == blocks - 1) {
			fd_st_relaxed_gpu(&b->arrived, 0u);
			fd_st_release_gpu(&b->generation, gen + 1);
		} else {
			uint64_t start = fd_globaltimer_ns();
			while (fd_ld_acquire_gpu(&b->generation) == gen) {
				if (fd_globaltimer_ns() - start > timeout_ns) {
					ok = 0;
					break;
				}
				fd_nanosleep(32);
			}
		}
	}
	return __syncthreads_and(ok) != 0;
}

__device__ __forceinline__ void fd_grid_sync(fd_grid_barrier *b) { fd_grid_sync_for(b, ~0ull); }

// Conversions. The rules (ties to even, NaN payload kept with the quiet
// bit forced, subnormals, overflow) are a2a's half.go, line for line.

__device__ __forceinline__ float fd_bf16_to_f32(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }

__device__ __forceinline__ uint16_t fd_f32_to_bf16(float f) {
	uint32_t b = __float_as_uint(f);
	if ((b & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((b >> 16) | 0x0040u);
	b += 0x7fffu + ((b >> 16) & 1u);
	return (uint16_t)(b >> 16);
}

__device__ __forceinline__ uint16_t fd_f32_to_f16(float f) {
	uint32_t b = __float_as_uint(f);
	uint32_t sign = (b >> 16) & 0x8000u;
	int exp = (int)((b >> 23) & 0xffu);
	uint32_t man = b & 0x7fffffu;
	if (exp == 0xff) return (uint16_t)(man != 0 ? (sign | 0x7e00u | (man >> 13)) : (sign | 0x7c00u));
	int e = exp - 127 + 15;
	if (e >= 0x1f) return (uint16_t)(sign | 0x7c00u);
	if (e <= 0) {
		if (e < -10) return (uint16_t)sign;
		uint32_t m = man | 0x800000u;
		uint32_t shift = (uint32_t)(14 - e);
		uint32_t h = m >> shift;
		uint32_t rem = m & ((1u << shift) - 1u);
		uint32_t mid = 1u << (shift - 1u);
		if (rem > mid || (rem == mid && (h & 1u))) h++;
		return (uint16_t)(sign | h);
	}
	uint32_t h = ((uint32_t)e << 10) | (man >> 13);
	uint32_t rem = man & 0x1fffu;
	if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++;
	return (uint16_t)(sign | h);
}

__device__ __forceinline__ float fd_f16_to_f32(uint16_t h) {
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
	uint32_t exp = (h >> 10) & 0x1fu;
	uint32_t man = h & 0x3ffu;
	if (exp == 0x1f) return __uint_as_float(sign | 0x7f800000u | (man << 13));
	if (exp == 0) {
		float v = (float)man * (1.0f / 16777216.0f);
		return sign ? -v : v;
	}
	return __uint_as_float(sign | ((exp + 127u - 15u) << 23) | (man << 13));
}

// e4m3fn: bias 7, largest finite 448 (0x7e), NaN 0x7f, subnormal unit 2^-9.
__device__ __forceinline__ uint8_t fd_f32_to_e4m3(float f) {
	uint32_t b = __float_as_uint(f);
	uint32_t sign = (b >> 24) & 0x80u;
	uint32_t a = b & 0x7fffffffu;
	if (a > 0x7f800000u) return (uint8_t)(sign | 0x7fu);
	int exp = (int)(a >> 23) - 127;
	uint32_t man = a & 0x7fffffu;
	if (exp > 8) return (uint8_t)(sign | 0x7eu); // beyond 2^9 (and infinity): saturate
	if (exp >= -6) {
		uint32_t h = ((uint32_t)(exp + 7) << 3) | (man >> 20);
		uint32_t rem = man & 0xfffffu;
		if (rem > 0x80000u || (rem == 0x80000u && (h & 1u))) h++;
		return (uint8_t)(sign | (h > 0x7eu ? 0x7eu : h));
	}
	uint32_t shift = (uint32_t)(14 - exp); // to units of 2^-9; >= 21
	if (shift > 25) return (uint8_t)sign;  // below half the smallest subnormal
	uint32_t m = man | 0x800000u;
	uint32_t h = m >> shift;
	uint32_t rem = m & ((1u << shift) - 1u);
	uint32_t mid = 1u << (shift - 1u);
	if (rem > mid || (rem == mid && (h & 1u))) h++; // may carry into the smallest normal
	return (uint8_t)(sign | h);
}

__device__ __forceinline__ float fd_e4m3_to_f32(uint8_t x) {
	uint32_t sign = (uint32_t)(x & 0x80u) << 24;
	uint32_t e = (x >> 3) & 0xfu;
	uint32_t m = x & 7u;
	if (e == 0xf && m == 7) return __uint_as_float(sign | 0x7fc00000u);
	if (e == 0) {
		float v = (float)m * (1.0f / 512.0f);
		return sign ? -v : v;
	}
	return __uint_as_float(sign | ((e - 7u + 127u) << 23) | (m << 20));
}

#endif // FERRY_DEVICE_H
