package devicecode

import (
	"github.com/ferryrdma/ferry/cuda"
	"github.com/ferryrdma/ferry/fabric/gpu"
)

// All returns every build of ferry's device code.
func All() []cuda.KernelBuild {
	var all []cuda.KernelBuild
	for _, builds := range []func() []cuda.KernelBuild{
		cuda.KernelBuilds,
		gpu.KernelBuilds,
	} {
		all = append(all, builds()...)
	}
	return all
}
