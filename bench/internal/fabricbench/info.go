package fabricbench

import (
	"encoding/json"
	"fmt"
	"github.com/ferryrdma/ferry/cuda"
	"io"

	"github.com/ferryrdma/ferry/bench/internal/sysreport"
	"github.com/ferryrdma/ferry/efa"
	"github.com/ferryrdma/ferry/ipc"
	"github.com/ferryrdma/ferry/verbs"
)

// Info writes this machine's capability report (`fabric-debug info`): the
// linked libfabric and its transports, the verbs devices, the topology
// groups, the probes and what "auto" would choose. GPUs are reported as
// not linked: this build has no cuda package wired in.
func Info(w io.Writer, asJSON bool) error {
	r, err := sysreport.Collect(sysreport.Options{
		LibfabricVersion: efa.Version,
		LibfabricAPI:     efa.APIVersion,
		Transports:       efa.Transports,
		VerbsDevices:     verbsDevices,
		GPUs:             cudaGPUs,
		ProbeIPC:         ipc.Probe,
	})
	if err != nil {
		return fmt.Errorf("collect report: %w", err)
	}
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	return r.WriteText(w)
}

// verbsDevices adapts verbs.Devices to the report's plain types.
func verbsDevices() ([]sysreport.VerbsDevice, error) {
	devs, err := verbs.Devices()
	if err != nil {
		return nil, err
	}
	out := make([]sysreport.VerbsDevice, 0, len(devs))
	for _, d := range devs {
		vd := sysreport.VerbsDevice{Name: d.Name, PCIAddress: d.PCIAddress, VendorID: d.VendorID}
		for _, p := range d.Ports {
			vp := sysreport.VerbsPort{Number: p.Number, State: p.State, LinkSpeed: p.LinkSpeed, LinkLayer: p.LinkLayer}
			for _, g := range p.GIDs {
				vp.GIDs = append(vp.GIDs, fmt.Sprintf("%d:%s(%s)", g.Index, g.Addr, g.Type))
			}
			vd.Ports = append(vd.Ports, vp)
		}
		out = append(out, vd)
	}
	return out, nil
}

// cudaGPUs adapts the CUDA driver's devices to the report: each GPU's PCI
// address, name and whether it exports dma-bufs (the device attribute the
// registration path reads). Without a driver the report says why.
func cudaGPUs() ([]sysreport.GPU, error) {
	ds, err := cuda.Devices()
	if err != nil {
		return nil, err
	}
	out := make([]sysreport.GPU, 0, len(ds))
	for _, d := range ds {
		in, err := d.Info()
		if err != nil {
			return nil, err
		}
		out = append(out, sysreport.GPU{PCIAddress: in.PCIBusID, Name: in.Name, DmaBuf: in.DmaBuf})
	}
	return out, nil
}
