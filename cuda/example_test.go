package cuda_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ferryrdma/ferry/cuda"
)

// Every entry point reports a machine without CUDA the same way.
func ExampleInit() {
	if err := cuda.Init(); errors.Is(err, cuda.ErrNotSupported) {
		fmt.Println("no CUDA here:", err)
		return
	}
	n, _ := cuda.DeviceCount()
	fmt.Println("devices:", n)
}

// ArchFor picks NVRTC's target for a device: the exact, architecture
// specific variant from Hopper on.
func ExampleArchFor() {
	fmt.Println(cuda.ArchFor(9, 0), cuda.ArchFor(8, 9))
	// Output: sm_90a sm_89
}

// Registering GPU memory with a NIC: allocate, export a dma-buf, hand the
// fd to the provider (fabric.MemorySpan.DmabufFD), close it afterwards.
func ExampleDeviceMemory_DmabufFD() {
	dev, err := cuda.GetDevice(0)
	if err != nil {
		return
	}
	ctx, err := dev.PrimaryContext()
	if err != nil {
		return
	}
	defer ctx.Close()
	mem, err := ctx.AllocVMM(64<<20, cuda.VMMOptions{GPUDirectRDMA: true})
	if err != nil {
		return
	}
	defer mem.Close()
	fd, err := mem.DmabufFD()
	if err != nil {
		fmt.Println("no dma-buf:", err)
		return
	}
	fmt.Println("register", mem.Ptr(), mem.Size(), "with dma-buf fd", fd)
}

// A CPU thread releases a kernel that spins on a flag: the GPU-flag mode
// of the engine's immediate counters.
func ExampleFlag() {
	dev, err := cuda.GetDevice(0)
	if err != nil {
		return
	}
	c, err := dev.PrimaryContext()
	if err != nil {
		return
	}
	defer c.Close()
	src, _ := cuda.KernelSource("flags.cu")
	mod, _, err := c.CompileModule(src, cuda.CompileOptions{})
	if err != nil {
		return
	}
	defer mod.Close()
	wait, _ := mod.Function("ferry_flag_wait")
	flags, err := c.NewFlags(1, cuda.FlagAuto) // GDRCopy if present
	if err != nil {
		return
	}
	defer flags.Close()
	status, _ := c.AllocHost(64, cuda.HostPortable|cuda.HostMapped)
	defer status.Close()
	sp, _ := status.DevicePtr()
	f := flags.Flag(0)
	wait.Launch(cuda.LaunchConfig{Grid: cuda.Dim3{X: 1}, Block: cuda.Dim3{X: 32}},
		f.DevicePtr(), uint32(1), uint64(time.Second), sp)
	f.Set(1) // the worker's side
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	done, _ := c.NewEvent(false)
	defer done.Close()
	done.Record(nil)
	done.Wait(ctx)
	fmt.Println("kernel released, status", status.Uint32(0).Load(), "via", flags.Kind())
}

// The scalar watcher: a kernel bumps a u64 in mapped host memory and a CPU
// goroutine sees the change without any synchronisation call.
func ExampleHostMemory_Uint64() {
	dev, err := cuda.GetDevice(0)
	if err != nil {
		return
	}
	c, err := dev.PrimaryContext()
	if err != nil {
		return
	}
	defer c.Close()
	slots, err := c.AllocHost(4096, cuda.HostPortable|cuda.HostMapped)
	if err != nil {
		return
	}
	defer slots.Close()
	dp, _ := slots.DevicePtr()
	fmt.Println("kernel writes", dp.Add(8*3), "CPU watches", slots.Uint64(3).Load())
}
