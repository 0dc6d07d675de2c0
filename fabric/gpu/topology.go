package gpu

import (
	"fmt"

	"github.com/ferryrdma/ferry/cuda"
	"github.com/ferryrdma/ferry/fabric/topology"
)

// Topology returns a topology spec that lists the GPUs as the CUDA driver
// numbers them (CUDA_VISIBLE_DEVICES applied by the driver itself), each
// with its PCI address, so fabric.Config.GPUs names the same GPUs as
// every CUDA call of the process. Without a driver it returns the
// driver's error (errors.Is fabric.ErrNotSupported), which says what is
// missing.
func Topology() (*topology.Spec, error) {
	ds, err := cuda.Devices()
	if err != nil {
		return nil, fmt.Errorf("gpu: topology: %w", err)
	}
	gpus := make([]topology.GPU, len(ds))
	for i, d := range ds {
		if gpus[i].PCIAddress, err = d.PCIBusID(); err != nil {
			return nil, fmt.Errorf("gpu: topology: %s: %w", d, err)
		}
		gpus[i].Name, _ = d.Name()
	}
	return &topology.Spec{GPUs: func() ([]topology.GPU, error) { return gpus, nil }}, nil
}
