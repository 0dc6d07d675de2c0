package emu_test

import (
	"context"
	"fmt"
	"time"

	"github.com/ferryrdma/ferry/cuda"
	"github.com/ferryrdma/ferry/cuda/emu"
)

// A kernel written against ferry_device.h, run on the CPU: two blocks of
// 64 threads sum their block with a warp reduction and a shared array.
func Example() {
	src := cuda.Source{Name: "sum.cu", Code: `
extern "C" __global__ void __launch_bounds__(64) block_sum(const uint32_t *in, uint32_t *out) {
	__shared__ uint32_t warp_total[2];
	uint32_t v = __reduce_add_sync(0xffffffffu, in[blockIdx.x * 64 + threadIdx.x]);
	if (fd_lane_id() == 0) warp_total[fd_warp_id()] = v;
	__syncthreads();
	if (threadIdx.x == 0) fd_st_release_gpu(&out[blockIdx.x], warp_total[0] + warp_total[1]);
}`}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	m, err := emu.Build(ctx, emu.BuildSpec{Sources: []cuda.Source{src}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()
	k, _ := m.Kernel("block_sum")
	mem, _ := emu.Alloc(4096)
	defer mem.Free()
	for i := 0; i < 128; i++ {
		mem.Uint32(i).Store(uint32(i))
	}
	s := emu.NewStream()
	defer s.Close()
	if err := s.Launch(k, cuda.Dim3{X: 2}, cuda.Dim3{X: 64}, 0, mem.Ptr(0), mem.Ptr(1024)); err != nil {
		fmt.Println(err)
		return
	}
	if err := s.Sync(ctx); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(mem.Uint32(256).Load(), mem.Uint32(257).Load())
	// Output: 2016 6112
}
