package gpu

import (
	_ "embed"

	"github.com/ferryrdma/ferry/cuda"
)

//go:embed kernels/gpu.cu
var kernelCode string

// Kernel names in KernelSource.
const (
	// KernelWaitEpoch (flag *u32, epoch *u32, timeout_ns u64, status *u32)
	// waits for the next epoch of a Flag; graph-capturable.
	KernelWaitEpoch = "ferry_gpu_wait_epoch"
	// KernelWaitValue (flag *u32, want u32, timeout_ns u64, status *u32)
	// waits for a given epoch (one returned by FlagCounter.Arm).
	KernelWaitValue = "ferry_gpu_wait_value"
	// KernelSlotAdd (slot *u64, delta u64) adds to a watcher slot.
	KernelSlotAdd = "ferry_gpu_slot_add"
	// KernelSlotStore (slot *u64, v u64) stores to a watcher slot.
	KernelSlotStore = "ferry_gpu_slot_store"
)

// Wait kernels write one of these to their status word (FD_STATUS_OK and
// FD_STATUS_TIMEOUT of ferry_device.h).
const (
	StatusOK      uint32 = 1
	StatusTimeout uint32 = 2
)

// KernelSource returns the device code of this package, for
// (*cuda.Context).CompileModule, or to copy its __device__ helpers into
// other kernels.
func KernelSource() cuda.Source { return cuda.Source{Name: "fabric_gpu.cu", Code: kernelCode} }

// KernelBuilds lists this package's device code for the compile gate
// (see cuda.KernelBuild): KernelSource, every kernel launched with one
// warp.
func KernelBuilds() []cuda.KernelBuild {
	var l []cuda.KernelLaunch
	for _, k := range []string{KernelWaitEpoch, KernelWaitValue, KernelSlotAdd, KernelSlotStore} {
		l = append(l, cuda.KernelLaunch{Kernel: k, MaxBlock: 32})
	}
	return []cuda.KernelBuild{{Name: "fabric/gpu", Source: KernelSource(), Launches: l}}
}

// LoadKernels compiles (or takes from the cubin cache) KernelSource for
// c's device and loads it. Close the module when done.
func LoadKernels(c *cuda.Context) (*cuda.Module, error) {
	if c == nil {
		return nil, invalid("load kernels: nil context")
	}
	m, _, err := c.CompileModule(KernelSource(), cuda.CompileOptions{})
	return m, err
}
