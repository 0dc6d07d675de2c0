package fabricbench

import (
	"errors"
	"fmt"

	"github.com/ferryrdma/ferry/cuda"
	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/fabric/gpu"
)

// GPU placements (Spec.GPUPlacement).
const (
	// PlaceTopology gives each GPU's group its nearest NICs, read from
	// the machine (the PCI tree, with the CUDA driver's GPU list).
	PlaceTopology = "topology"
	// PlaceFirstNICs gives each GPU's group the transport's first NICs,
	// beside a host group: for machines whose PCI topology is hidden, and
	// for tests over the in-process transports.
	PlaceFirstNICs = "first"
)

// gpuBuffer is a side's buffer in GPU memory. The side's host buffer of
// the same size mirrors it: verified cases write their pattern there and
// copy it in, and copy the result out to check it there, so the checks
// are the host memory ones.
type gpuBuffer struct {
	cctx *cuda.Context
	mem  *cuda.DeviceMemory
}

// engineConfig is the engine of a side: a host group, or with s.GPUs one
// group per GPU, placed as s.GPUPlacement says.
func engineConfig(s Spec) (fabric.Config, error) {
	c := fabric.Config{Transport: s.Provider, Node: s.Node, NICs: s.NICs, Poll: s.Poll, Logger: s.Logger, LogLevel: s.LogLevel}
	if len(s.GPUs) == 0 {
		return c, nil
	}
	switch s.GPUPlacement {
	case "", PlaceTopology:
		t, err := gpu.Topology()
		if err != nil {
			return c, fmt.Errorf("gpu memory: %w", err)
		}
		c.GPUs, c.Topology = s.GPUs, t
	case PlaceFirstNICs:
		n, err := cuda.DeviceCount()
		if err != nil {
			return c, fmt.Errorf("gpu memory: %w", err)
		}
		c.Groups = []fabric.GroupSpec{{Device: fabric.HostDevice, NICs: s.NICs}}
		for _, g := range s.GPUs {
			if g >= n {
				return c, fmt.Errorf("gpu memory: GPU %d, the CUDA driver sees %d: %w", g, n, fabric.ErrNotSupported)
			}
			c.Groups = append(c.Groups, fabric.GroupSpec{Device: fabric.CUDADevice(g), NICs: s.NICs})
		}
	}
	return c, nil
}

// newGPUBuffer allocates n bytes on GPU ordinal and registers them with
// e through fabric/gpu (dma-buf when the machine allows, else by address).
func newGPUBuffer(e *fabric.Engine, ordinal int, n uint64, access fabric.Access) (*gpuBuffer, *fabric.MemoryRegion, error) {
	d, err := cuda.GetDevice(ordinal)
	if err != nil {
		return nil, nil, fmt.Errorf("gpu memory: %w", err)
	}
	cctx, err := d.PrimaryContext()
	if err != nil {
		return nil, nil, fmt.Errorf("gpu memory: %w", err)
	}
	mem, err := cctx.Alloc(n)
	if err != nil {
		return nil, nil, errors.Join(fmt.Errorf("gpu memory: %w", err), cctx.Close())
	}
	g := &gpuBuffer{cctx: cctx, mem: mem}
	r, err := gpu.RegisterDeviceMemory(e, mem, access)
	if err != nil {
		return nil, nil, errors.Join(err, g.close())
	}
	return g, r, nil
}

// toDevice copies the host mirror in; toHost copies the device memory
// out into it.
func (g *gpuBuffer) toDevice(host []byte) error { return g.mem.CopyFromHost(0, host) }
func (g *gpuBuffer) toHost(host []byte) error   { return g.mem.CopyToHost(host, 0) }

// close frees the memory (its registration must be gone: the engine
// closed) and releases the context.
func (g *gpuBuffer) close() error {
	if g == nil {
		return nil
	}
	return errors.Join(g.mem.Close(), g.cctx.Close())
}
