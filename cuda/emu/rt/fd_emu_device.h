// fd_emu_device.h: the host (g++ -std=c++20) implementation of
// ferry_device.h, used by the CPU emulator. ferry_device.h includes it when
// neither __CUDACC__ nor __CUDACC_RTC__ is defined; never include it
// directly. The runtime it calls into (fibers, schedulers, launches) is
// fd_emu_runtime.h, compiled once per emulated module.
//
// Model: every block runs on its own OS thread, every CUDA thread of the
// block is a fiber of that OS thread. Memory-order operations are
// std::atomic_ref operations with the matching order, so ThreadSanitizer
// sees the real happens-before. Scopes (cta/gpu/sys) do not change what an
// operation does; they are checked instead (fd_emu_runtime.h, "scope
// checker"): every scoped operation runs under its address's shadow
// record, and a load that observes a store outside its scope, or a store
// whose scope leaves the loader out, fails the launch.
// Barriers, warp collectives and spin points (fd_nanosleep, repeated
// fd_ld_*/fd_atomic_* observations of an unchanged value, the timer) switch
// fibers; in chaos mode (FERRY_EMU_CHAOS) so does every scoped load.
#ifndef FD_EMU_DEVICE_H
#define FD_EMU_DEVICE_H

// Every standard header the runtime uses comes before the CUDA keyword
// macros below (libstdc++ spells attributes __noinline__ too).
#include <atomic>
#include <bit>
#include <cmath>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <source_location>
#include <thread>
#include <type_traits>
#include <utility>

#define FD_HOST_BUILD 1
#define __global__
#define __device__
#define __host__
#define __constant__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __align__(n) __attribute__((aligned(n)))
#define __launch_bounds__(...)
// One OS thread per block: a thread_local is a per-block variable, shared
// by the block's fibers, as __shared__ memory is.
#define __shared__ static thread_local

struct uint3 {
	unsigned int x, y, z;
};
struct dim3 {
	unsigned int x, y, z;
	constexpr dim3(unsigned int x_ = 1, unsigned int y_ = 1, unsigned int z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct __align__(8) uint2 {
	unsigned int x, y;
};
struct __align__(16) uint4 {
	unsigned int x, y, z, w;
};
struct __align__(8) int2 {
	int x, y;
};
struct __align__(16) int4 {
	int x, y, z, w;
};
struct __align__(8) float2 {
	float x, y;
};
struct __align__(16) float4 {
	float x, y, z, w;
};
inline uint2 make_uint2(unsigned x, unsigned y) { return {x, y}; }
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }
inline int2 make_int2(int x, int y) { return {x, y}; }
inline int4 make_int4(int x, int y, int z, int w) { return {x, y, z, w}; }
inline float2 make_float2(float x, float y) { return {x, y}; }
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }

inline constexpr int warpSize = 32;

namespace fd_emu {

// What a running CUDA thread sees of itself and its block. The runtime's
// fiber and block records start with these.
struct block_view {
	uint3 block_idx;
	dim3 block_dim;
	dim3 grid_dim;
	unsigned char *dyn_smem;
	uint32_t threads;
};
struct thread_view {
	uint3 thread_idx;
	uint32_t linear; // x + y*bx + z*bx*by
	uint32_t lane;
	const block_view *blk;
};

// The fiber running on this OS thread (the block's current CUDA thread).
extern thread_local thread_view *self;

enum warp_op_kind : int {
	warp_sync,
	warp_shfl_idx,
	warp_shfl_up,
	warp_shfl_down,
	warp_shfl_xor,
	warp_ballot,
	warp_any,
	warp_all,
	warp_red_add,
	warp_red_min_u,
	warp_red_min_s,
	warp_red_max_u,
	warp_red_max_s,
	warp_red_or,
	warp_red_and,
};
enum barrier_kind : int { barrier_plain, barrier_count, barrier_and, barrier_or };

// Runtime entry points (fd_emu_runtime.h).
// block_barrier: site is where the kernel calls __syncthreads (file and
// line), so that threads of one block waiting at different barriers are
// reported instead of matched with each other.
int block_barrier(barrier_kind kind, int pred, const char *file, unsigned line);
// chaos_point: a scoped load in chaos mode (FERRY_EMU_CHAOS) yields here.
void chaos_point();
uint64_t warp_collective(warp_op_kind op, uint32_t mask, uint64_t value, int arg, int width);
void spin_yield();
void observe(const void *addr, uint64_t value);
uint64_t timer_ns();
[[noreturn]] void trap(const char *what);

// The scope checker's view of an operation.
enum mem_scope : uint8_t { scope_cta, scope_gpu, scope_sys };
enum mem_op : uint8_t { op_ld_relaxed, op_ld_acquire, op_st_relaxed, op_st_release, op_rmw_relaxed, op_rmw_acq_rel };

// scoped holds the shadow record of one address for the length of one
// memory operation, so that the value and its record change together;
// saw and wrote tell the checker what the operation read and stored. It
// does nothing outside a kernel (host code calling a device helper), when
// the launch runs unchecked, and under ThreadSanitizer, whose happens-
// before the record's lock would otherwise create.
struct scoped {
	const void *addr;
	void *slot; // the locked stripe, or null: not checked
	explicit scoped(const void *p);
	~scoped();
	scoped(const scoped &) = delete;
	scoped &operator=(const scoped &) = delete;
	void saw(uint64_t v, mem_op op, mem_scope sc);
	void wrote(uint64_t v, mem_op op, mem_scope sc);
};

template <class T>
concept word = std::is_integral_v<T> && (sizeof(T) == 4 || sizeof(T) == 8);

template <class T>
inline uint64_t to_bits(T v) {
	static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>, "warp collectives move at most 8 bytes");
	uint64_t b = 0;
	std::memcpy(&b, &v, sizeof(T));
	return b;
}
template <class T>
inline T from_bits(uint64_t b) {
	T v;
	std::memcpy(&v, &b, sizeof(T));
	return v;
}
template <class T>
inline std::atomic_ref<T> ref(const T *p) {
	return std::atomic_ref<T>(*const_cast<T *>(p));
}

} // namespace fd_emu

#define threadIdx (::fd_emu::self->thread_idx)
#define blockIdx (::fd_emu::self->blk->block_idx)
#define blockDim (::fd_emu::self->blk->block_dim)
#define gridDim (::fd_emu::self->blk->grid_dim)

// The barriers take their call site as a default argument: a __syncthreads
// in an inline helper is one site for all of the helper's callers.
#define FD_EMU_SITE_ std::source_location at = std::source_location::current()
inline void __syncthreads(FD_EMU_SITE_) { fd_emu::block_barrier(fd_emu::barrier_plain, 1, at.file_name(), at.line()); }
inline int __syncthreads_count(int p, FD_EMU_SITE_) {
	return fd_emu::block_barrier(fd_emu::barrier_count, p != 0, at.file_name(), at.line());
}
inline int __syncthreads_and(int p, FD_EMU_SITE_) {
	return fd_emu::block_barrier(fd_emu::barrier_and, p != 0, at.file_name(), at.line());
}
inline int __syncthreads_or(int p, FD_EMU_SITE_) {
	return fd_emu::block_barrier(fd_emu::barrier_or, p != 0, at.file_name(), at.line());
}
#undef FD_EMU_SITE_

inline void __syncwarp(unsigned mask = 0xffffffffu) { fd_emu::warp_collective(fd_emu::warp_sync, mask, 0, 0, 32); }
template <class T>
inline T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
	return fd_emu::from_bits<T>(fd_emu::warp_collective(fd_emu::warp_shfl_idx, mask, fd_emu::to_bits(v), src, width));
}
template <class T>
inline T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32) {
	return fd_emu::from_bits<T>(fd_emu::warp_collective(fd_emu::warp_shfl_up, mask, fd_emu::to_bits(v), (int)delta, width));
}
template <class T>
inline T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
	return fd_emu::from_bits<T>(fd_emu::warp_collective(fd_emu::warp_shfl_down, mask, fd_emu::to_bits(v), (int)delta, width));
}
template <class T>
inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
	return fd_emu::from_bits<T>(fd_emu::warp_collective(fd_emu::warp_shfl_xor, mask, fd_emu::to_bits(v), lane_mask, width));
}
inline unsigned __ballot_sync(unsigned mask, int p) {
	return (unsigned)fd_emu::warp_collective(fd_emu::warp_ballot, mask, p != 0, 0, 32);
}
inline int __any_sync(unsigned mask, int p) { return (int)fd_emu::warp_collective(fd_emu::warp_any, mask, p != 0, 0, 32); }
inline int __all_sync(unsigned mask, int p) { return (int)fd_emu::warp_collective(fd_emu::warp_all, mask, p != 0, 0, 32); }
inline unsigned __reduce_add_sync(unsigned mask, unsigned v) { return (unsigned)fd_emu::warp_collective(fd_emu::warp_red_add, mask, v, 0, 32); }
inline int __reduce_add_sync(unsigned mask, int v) { return (int)fd_emu::warp_collective(fd_emu::warp_red_add, mask, (uint32_t)v, 0, 32); }
inline unsigned __reduce_min_sync(unsigned mask, unsigned v) { return (unsigned)fd_emu::warp_collective(fd_emu::warp_red_min_u, mask, v, 0, 32); }
inline int __reduce_min_sync(unsigned mask, int v) { return (int)fd_emu::warp_collective(fd_emu::warp_red_min_s, mask, (uint32_t)v, 0, 32); }
inline unsigned __reduce_max_sync(unsigned mask, unsigned v) { return (unsigned)fd_emu::warp_collective(fd_emu::warp_red_max_u, mask, v, 0, 32); }
inline int __reduce_max_sync(unsigned mask, int v) { return (int)fd_emu::warp_collective(fd_emu::warp_red_max_s, mask, (uint32_t)v, 0, 32); }
inline unsigned __reduce_or_sync(unsigned mask, unsigned v) { return (unsigned)fd_emu::warp_collective(fd_emu::warp_red_or, mask, v, 0, 32); }
inline unsigned __reduce_and_sync(unsigned mask, unsigned v) { return (unsigned)fd_emu::warp_collective(fd_emu::warp_red_and, mask, v, 0, 32); }

inline int __popc(unsigned v) { return std::popcount(v); }
inline int __popcll(unsigned long long v) { return std::popcount(v); }
inline int __ffs(int v) { return v == 0 ? 0 : std::countr_zero((unsigned)v) + 1; }
inline int __ffsll(long long v) { return v == 0 ? 0 : std::countr_zero((unsigned long long)v) + 1; }
inline int __clz(int v) { return std::countl_zero((unsigned)v); }
inline int __clzll(long long v) { return std::countl_zero((unsigned long long)v); }
inline unsigned __brev(unsigned v) {
	unsigned r = 0;
	for (int i = 0; i < 32; i++) r |= ((v >> i) & 1u) << (31 - i);
	return r;
}
#define FD_MINMAX_(T) \
	inline T min(T a, T b) { return b < a ? b : a; } \
	inline T max(T a, T b) { return a < b ? b : a; }
FD_MINMAX_(int)
FD_MINMAX_(unsigned int)
FD_MINMAX_(long)
FD_MINMAX_(unsigned long)
FD_MINMAX_(long long)
FD_MINMAX_(unsigned long long)
FD_MINMAX_(float)
FD_MINMAX_(double)
#undef FD_MINMAX_
inline unsigned __float_as_uint(float f) { return std::bit_cast<unsigned>(f); }
inline float __uint_as_float(unsigned u) { return std::bit_cast<float>(u); }
inline int __float_as_int(float f) { return std::bit_cast<int>(f); }
inline float __int_as_float(int i) { return std::bit_cast<float>(i); }
// Built with -ffp-contract=off: each operation is rounded on its own.
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float fd_mul_add_f32(float acc, float w, float y) { return __fadd_rn(acc, __fmul_rn(w, y)); }
[[noreturn]] inline void __trap() { fd_emu::trap("__trap()"); }
inline void __nanosleep(unsigned) { fd_emu::spin_yield(); }
inline void __threadfence_block() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline void __threadfence_system() { std::atomic_thread_fence(std::memory_order_seq_cst); }

// Memory-order loads and stores. The value parameter does not take part in
// deduction, as with the device overloads (uint64_t *p, 1u) is fine.
#define FD_EMU_LD_(name, order, op, sc)                                    \
	template <fd_emu::word T>                                            \
	inline T name(const T *p) {                                          \
		T v;                                                             \
		{                                                                \
			fd_emu::scoped g(p);                                         \
			v = fd_emu::ref(p).load(order);                              \
			g.saw((uint64_t)v, fd_emu::op, fd_emu::sc);                  \
		}                                                                \
		fd_emu::observe(p, (uint64_t)v);                                 \
		fd_emu::chaos_point();                                           \
		return v;                                                        \
	}
#define FD_EMU_ST_(name, order, op, sc)                                    \
	template <fd_emu::word T>                                            \
	inline void name(T *p, std::type_identity_t<T> v) {                 \
		fd_emu::scoped g(p);                                             \
		fd_emu::ref(p).store(v, order);                                  \
		g.wrote((uint64_t)v, fd_emu::op, fd_emu::sc);                    \
	}
FD_EMU_LD_(fd_ld_acquire_cta, std::memory_order_acquire, op_ld_acquire, scope_cta)
FD_EMU_LD_(fd_ld_acquire_gpu, std::memory_order_acquire, op_ld_acquire, scope_gpu)
FD_EMU_LD_(fd_ld_acquire_sys, std::memory_order_acquire, op_ld_acquire, scope_sys)
FD_EMU_LD_(fd_ld_relaxed_gpu, std::memory_order_relaxed, op_ld_relaxed, scope_gpu)
FD_EMU_LD_(fd_ld_relaxed_sys, std::memory_order_relaxed, op_ld_relaxed, scope_sys)
FD_EMU_ST_(fd_st_release_cta, std::memory_order_release, op_st_release, scope_cta)
FD_EMU_ST_(fd_st_release_gpu, std::memory_order_release, op_st_release, scope_gpu)
FD_EMU_ST_(fd_st_release_sys, std::memory_order_release, op_st_release, scope_sys)
FD_EMU_ST_(fd_st_relaxed_gpu, std::memory_order_relaxed, op_st_relaxed, scope_gpu)
FD_EMU_ST_(fd_st_relaxed_sys, std::memory_order_relaxed, op_st_relaxed, scope_sys)
#undef FD_EMU_LD_
#undef FD_EMU_ST_
// Read-modify-writes observe the old value and store the new one, as one
// operation under the record's lock.
#define FD_EMU_RMW_(name, rmw, order, op, sc)                              \
	template <fd_emu::word T>                                            \
	inline T name(T *p, std::type_identity_t<T> v) {                     \
		T o;                                                             \
		{                                                                \
			fd_emu::scoped g(p);                                         \
			o = fd_emu::ref(p).rmw(v, order);                            \
			g.saw((uint64_t)o, fd_emu::op, fd_emu::sc);                  \
			g.wrote((uint64_t)fd_emu::ref(p).load(std::memory_order_relaxed), fd_emu::op, fd_emu::sc); \
		}                                                                \
		fd_emu::observe(p, (uint64_t)o);                                 \
		fd_emu::chaos_point();                                           \
		return o;                                                        \
	}
#define FD_EMU_CAS_(name, order, op, sc)                                   \
	template <fd_emu::word T>                                            \
	inline T name(T *p, std::type_identity_t<T> c, std::type_identity_t<T> v) { \
		T o = c;                                                         \
		bool swapped;                                                    \
		{                                                                \
			fd_emu::scoped g(p);                                         \
			swapped = fd_emu::ref(p).compare_exchange_strong(o, v, order, std::memory_order_relaxed); \
			g.saw((uint64_t)o, fd_emu::op, fd_emu::sc);                  \
			if (swapped) g.wrote((uint64_t)v, fd_emu::op, fd_emu::sc);   \
		}                                                                \
		fd_emu::observe(p, (uint64_t)o);                                 \
		fd_emu::chaos_point();                                           \
		return o;                                                        \
	}
FD_EMU_RMW_(fd_atomic_add_gpu, fetch_add, std::memory_order_relaxed, op_rmw_relaxed, scope_gpu)
FD_EMU_RMW_(fd_atomic_add_sys, fetch_add, std::memory_order_relaxed, op_rmw_relaxed, scope_sys)
FD_EMU_RMW_(fd_atomic_add_acq_rel_gpu, fetch_add, std::memory_order_acq_rel, op_rmw_acq_rel, scope_gpu)
FD_EMU_RMW_(fd_atomic_add_acq_rel_sys, fetch_add, std::memory_order_acq_rel, op_rmw_acq_rel, scope_sys)
FD_EMU_RMW_(fd_atomic_exch_gpu, exchange, std::memory_order_relaxed, op_rmw_relaxed, scope_gpu)
FD_EMU_RMW_(fd_atomic_exch_sys, exchange, std::memory_order_relaxed, op_rmw_relaxed, scope_sys)
FD_EMU_CAS_(fd_atomic_cas_gpu, std::memory_order_relaxed, op_rmw_relaxed, scope_gpu)
FD_EMU_CAS_(fd_atomic_cas_sys, std::memory_order_relaxed, op_rmw_relaxed, scope_sys)
FD_EMU_CAS_(fd_atomic_cas_acq_rel_gpu, std::memory_order_acq_rel, op_rmw_acq_rel, scope_gpu)
FD_EMU_CAS_(fd_atomic_cas_acq_rel_sys, std::memory_order_acq_rel, op_rmw_acq_rel, scope_sys)
#undef FD_EMU_RMW_
#undef FD_EMU_CAS_
template <fd_emu::word T>
inline T fd_atomic_max_gpu(T *p, std::type_identity_t<T> v) {
	T o;
	{
		fd_emu::scoped g(p);
		auto r = fd_emu::ref(p);
		o = r.load(std::memory_order_relaxed);
		while (o < v && !r.compare_exchange_weak(o, v, std::memory_order_relaxed)) {
		}
		g.saw((uint64_t)o, fd_emu::op_rmw_relaxed, fd_emu::scope_gpu);
		if (o < v) g.wrote((uint64_t)v, fd_emu::op_rmw_relaxed, fd_emu::scope_gpu);
	}
	fd_emu::observe(p, (uint64_t)o);
	return o;
}
// CUDA's own spellings, relaxed, for code that uses them.
template <fd_emu::word T>
inline T atomicAdd(T *p, std::type_identity_t<T> v) { return fd_atomic_add_gpu(p, v); }
template <fd_emu::word T>
inline T atomicExch(T *p, std::type_identity_t<T> v) { return fd_atomic_exch_gpu(p, v); }
template <fd_emu::word T>
inline T atomicCAS(T *p, std::type_identity_t<T> c, std::type_identity_t<T> v) { return fd_atomic_cas_gpu(p, c, v); }
template <fd_emu::word T>
inline T atomicMax(T *p, std::type_identity_t<T> v) { return fd_atomic_max_gpu(p, v); }

inline void fd_fence_cta() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline void fd_fence_gpu() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline void fd_fence_sys() { std::atomic_thread_fence(std::memory_order_seq_cst); }

inline uint64_t fd_globaltimer_ns() { return fd_emu::timer_ns(); }
inline void fd_nanosleep(uint32_t) { fd_emu::spin_yield(); }

inline uint32_t fd_lane_id() { return fd_emu::self->lane; }
inline uint32_t fd_thread_id() { return fd_emu::self->linear; }
inline uint32_t fd_warp_id() { return fd_emu::self->linear >> 5; }
inline uint32_t fd_block_threads() { return fd_emu::self->blk->threads; }
inline bool fd_elect_one(uint32_t mask) { return fd_lane_id() == (uint32_t)(__ffs((int)mask) - 1); }

struct __align__(16) fd_v16 {
	uint32_t x, y, z, w;
};
inline fd_v16 fd_ld16(const void *p) {
	fd_v16 v;
	std::memcpy(&v, __builtin_assume_aligned(p, 16), 16);
	return v;
}
inline fd_v16 fd_ld16_nc(const void *p) { return fd_ld16(p); }
inline fd_v16 fd_ld16_or_zero(const void *p) { return p != nullptr ? fd_ld16(p) : fd_v16{0u, 0u, 0u, 0u}; }
inline fd_v16 fd_ld16_nc_or_zero(const void *p) { return fd_ld16_or_zero(p); }
inline void fd_st16(void *p, fd_v16 v) { std::memcpy(__builtin_assume_aligned(p, 16), &v, 16); }
inline void fd_st16_na(void *p, fd_v16 v) { fd_st16(p, v); }

#define FD_DYN_SHARED(T, name) T *name = reinterpret_cast<T *>(::fd_emu::self->blk->dyn_smem)

#endif // FD_EMU_DEVICE_H
