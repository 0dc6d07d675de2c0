// Uses every name of ferry_device.h once, so that a compilation of it
// (NVRTC for sm_80 and sm_90, and g++ against the emulator's host side)
// checks the whole header, inline PTX included.
extern "C" __global__ void __launch_bounds__(256) header_api(uint32_t *u32, uint64_t *u64, int *i32, unsigned long long *ull, fd_grid_barrier *gb, fd_v16 *v, uint16_t *h, uint8_t *q, float *f) {
  __shared__ uint32_t sm[256];
  FD_DYN_SHARED(uint64_t, dyn);
  uint32_t t = fd_thread_id();
  sm[t] = fd_ld_acquire_cta(u32) + fd_ld_acquire_gpu(u32) + fd_ld_acquire_sys(u32) + fd_ld_relaxed_gpu(u32) + fd_ld_relaxed_sys(u32);
  dyn[t] = fd_ld_acquire_sys(u64) + fd_ld_relaxed_gpu(ull) + fd_ld_acquire_gpu(i32);
  fd_st_release_cta(u32, 1u); fd_st_release_gpu(u64, 1u); fd_st_release_sys(i32, 2); fd_st_relaxed_gpu(ull, 3ull); fd_st_relaxed_sys(u64, 4);
  __syncthreads();
  uint64_t a = fd_atomic_add_gpu(u64, 1) + fd_atomic_add_sys(u32, 1u) + fd_atomic_add_acq_rel_gpu(u32, 2u) + fd_atomic_add_acq_rel_sys(ull, 2ull);
  a += fd_atomic_cas_gpu(u32, 0u, 1u) + fd_atomic_cas_sys(u64, 0, 1) + fd_atomic_cas_acq_rel_gpu(u32, 1u, 2u) + fd_atomic_exch_gpu(u32, 5u) + fd_atomic_exch_sys(u64, 6) + fd_atomic_max_gpu(u32, 7u) + fd_atomic_max_gpu(u64, 8) + fd_atomic_max_gpu(i32, -1);
  fd_fence_cta(); fd_fence_gpu(); fd_fence_sys();
  uint64_t t0 = fd_globaltimer_ns(); fd_nanosleep(100);
  uint32_t l = fd_lane_id(), w = fd_warp_id();
  uint32_t x = __shfl_sync(0xffffffffu, t, 0) + __shfl_up_sync(0xffffffffu, t, 1) + __shfl_down_sync(0xffffffffu, t, 2, 16) + __shfl_xor_sync(0xffffffffu, t, 4);
  float fx = __shfl_xor_sync(0xffffffffu, f[t], 1);
  x += __ballot_sync(0xffffffffu, t & 1) + __any_sync(0xffffffffu, t == 3) + __all_sync(0xffffffffu, t < 1000) + __reduce_add_sync(0xffffffffu, t) + __reduce_max_sync(0xffffffffu, t);
  __syncwarp();
  if (fd_elect_one(0xffffffffu)) x++;
  x += __syncthreads_count(t & 1) + __syncthreads_and(1) + __syncthreads_or(0) + __popc(x) + __popcll(a) + __ffs(x) + __clz(x) + min(x, 5u) + max(l, w);
  fd_grid_sync(gb);
  bool ok = fd_grid_sync_for(gb, 1000000);
  fd_v16 vv = fd_ld16(v + t); fd_v16 vn = fd_ld16_nc(v + t + 256); vv.x += vn.y; fd_st16(v + t, vv); fd_st16_na(v + 512 + t, vn);
  float g = fd_bf16_to_f32(h[t]) + fd_f16_to_f32(h[t + 1]) + fd_e4m3_to_f32(q[t]);
  h[t] = fd_f32_to_bf16(g); h[t + 256] = fd_f32_to_f16(g + fx); q[t] = fd_f32_to_e4m3(fd_mul_add_f32(g, 2.0f, fx));
  u64[t + 1] = a + x + sm[(t + 1) & 255] + t0 + ok + (uint64_t)__float_as_uint(g) + FD_STATUS_OK + FD_STATUS_TIMEOUT;
}
