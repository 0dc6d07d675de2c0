package gpu_test

import (
	"errors"
	"regexp"
	"testing"

	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/fabric/gpu"
)

// The kernel names exported as constants are the extern "C" kernels of
// the embedded source (checked here, where NVRTC cannot run).
func TestKernelSourceNames(t *testing.T) {
	src := gpu.KernelSource()
	if src.Name == "" || src.Code == "" {
		t.Fatal("empty kernel source")
	}
	for _, name := range []string{gpu.KernelWaitEpoch, gpu.KernelWaitValue, gpu.KernelSlotAdd, gpu.KernelSlotStore} {
		if !regexp.MustCompile(`extern "C" __global__ void (__launch_bounds__\(\d+\) )?` + name + `\(`).MatchString(src.Code) {
			t.Errorf("kernel %s not in %s", name, src.Name)
		}
	}
}

func TestNilContexts(t *testing.T) {
	if _, err := gpu.LoadKernels(nil); !errors.Is(err, fabric.ErrInvalidArgument) {
		t.Fatalf("LoadKernels(nil): %v", err)
	}
	if _, err := gpu.NewCUDASlots(nil, 8); !errors.Is(err, fabric.ErrInvalidArgument) {
		t.Fatalf("NewCUDASlots(nil): %v", err)
	}
	if _, err := gpu.NewCUDAWatcher(nil, gpu.WatcherConfig{}); !errors.Is(err, fabric.ErrInvalidArgument) {
		t.Fatalf("NewCUDAWatcher(nil): %v", err)
	}
}
