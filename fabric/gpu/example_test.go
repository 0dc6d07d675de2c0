package gpu_test

import (
	"fmt"

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
