package gpu_test

import (
	"context"
	"fmt"
	"time"

	"github.com/ferryrdma/ferry/cuda"
	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/fabric/gpu"
)

// A watcher over host memory: a writer (here the example itself, in a GPU
// program a kernel writing Slot.DevicePtr) bumps a slot and the watcher
// goroutine reports each change. Returning false releases the slot.
func ExampleWatcher() {
	mem, err := gpu.NewHostSlots(8)
	if err != nil {
		fmt.Println(err)
		return
	}
	w, err := gpu.NewWatcher(mem, gpu.WatcherConfig{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer w.Close()

	seen := make(chan uint64)
	slot, err := w.Acquire(func(old, new uint64) bool {
		fmt.Printf("slot changed %d -> %d\n", old, new)
		seen <- new
		return new < 3 // done at 3: release the slot
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for v := uint64(1); v <= 3; v++ {
		slot.Word().Store(v) // what a kernel does through slot.DevicePtr()
		<-seen
	}
	// Output:
	// slot changed 0 -> 1
	// slot changed 1 -> 2
	// slot changed 2 -> 3
}

// Registering a tensor in GPU memory with an engine that has a group for
// its device. Compiled only: it needs a GPU and a provider with GPU
// support (EFA, or verbs with dma-buf or nvidia-peermem).
func ExampleRegisterReport() {
	ctx := context.Background()
	e, err := fabric.Open(ctx, fabric.Config{Transport: "auto", Groups: []fabric.GroupSpec{
		{Device: fabric.CUDADevice(0), NICs: 2}}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer e.Close(ctx)
	dev, err := cuda.GetDevice(0)
	if err != nil {
		fmt.Println(err)
		return
	}
	c, err := dev.PrimaryContext()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	mem, err := c.Alloc(64 << 20)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer mem.Close()
	reg, err := gpu.RegisterReport(e, uintptr(mem.Ptr()), mem.Size(), fabric.AccessRemoteWrite, gpu.RegisterOptions{})
	if err != nil {
		fmt.Println(err) // errors.Is(err, fabric.ErrNotSupported): no GPU support in the provider
		return
	}
	defer e.Unregister(reg.Region)
	fmt.Println("registered:", reg) // e.g. "cuda:0 dma-buf"
}

// A kernel waits, inside a CUDA graph, for the immediates of each step.
// Compiled only: it needs a GPU.
func ExampleNewFlagCounter() {
	const imm = 0x100
	ctx := context.Background()
	e, err := fabric.Open(ctx, fabric.Config{Transport: "auto"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer e.Close(ctx)
	dev, _ := cuda.GetDevice(0)
	c, err := dev.PrimaryContext()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	flags, err := c.NewFlags(1, cuda.FlagAuto) // GDRCopy where available
	if err != nil {
		fmt.Println(err)
		return
	}
	defer flags.Close()
	fc, err := gpu.NewFlagCounter(e, imm, flags.Flag(0))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer e.RemoveImmCount(imm)
	mod, err := gpu.LoadKernels(c)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer mod.Close()
	wait, _ := mod.Function(gpu.KernelWaitEpoch)
	words, _ := c.AllocHost(256, cuda.HostMapped|cuda.HostPortable) // epoch and status words
	defer words.Close()
	wp, _ := words.DevicePtr()
	st, _ := c.NewStream(true)
	defer st.Close()
	graph, err := st.Capture(cuda.CaptureGlobal, func(s *cuda.Stream) error {
		cfg := cuda.LaunchConfig{Grid: cuda.Dim3{X: 1}, Block: cuda.Dim3{X: 32}, Stream: s}
		// ...kernels that send, then the wait, then kernels that consume...
		return wait.Launch(cfg, fc.Flag().DevicePtr(), wp.Add(128), uint64(10*time.Second), wp)
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer graph.Close()
	exec, _ := graph.Instantiate()
	defer exec.Close()
	for step := 0; step < 10; step++ {
		if _, err := fc.Arm(8); err != nil { // eight peers write to us each step
			fmt.Println(err)
			return
		}
		_ = exec.Launch(st)
	}
	_ = st.Synchronize()
}
