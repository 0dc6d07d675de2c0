package kernelgate

import (
	"github.com/ferryrdma/ferry/a2a/cudabackend"
	"github.com/ferryrdma/ferry/cuda"
	"github.com/ferryrdma/ferry/fabric/gpu"
)

// All returns every build of ferry's device code.
func All() []cuda.KernelBuild {
	var all []cuda.KernelBuild
	for _, builds := range []func() []cuda.KernelBuild{
		cuda.KernelBuilds,
		gpu.KernelBuilds,
		cudabackend.KernelBuilds,
	} {
		all = append(all, builds()...)
	}
	return all
}
