package cuda

import (
	"embed"
	"io/fs"
	"path"
	"sort"
	"strings"
)

// Device code shipped with ferry, compiled at run time by NVRTC for the
// device at hand (CompileModule).
//
//go:embed kernels/*.cu
var kernelFS embed.FS

// DeviceHeaderName is the device header every kernel source is compiled
// with (see DeviceHeader).
const DeviceHeaderName = "ferry_device.h"

//go:embed kernels/ferry_device.h
var deviceHeader string

// DeviceHeader returns ferry_device.h: the one header through which
// ferry's kernels reach everything that is not plain C++ (indices,
// barriers, warp operations, memory-order loads and stores, atomics, the
// timer, vector loads, conversions). Compile and CompileModule include it
// before every source; the CPU emulator (internal/cudaemu) compiles the
// same sources against its host implementation. The API is documented at
// the top of the file.
func DeviceHeader() Source { return Source{Name: DeviceHeaderName, Code: deviceHeader} }

// KernelNames lists the embedded sources ("flags.cu", ...).
func KernelNames() []string {
	ents, _ := fs.ReadDir(kernelFS, "kernels")
	var names []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".cu") {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	return names
}

// KernelSource returns an embedded source by file name.
func KernelSource(name string) (Source, error) {
	b, err := kernelFS.ReadFile(path.Join("kernels", name))
	if err != nil {
		return Source{}, invalid("kernel source", "no embedded kernel %q", name)
	}
	return Source{Name: name, Code: string(b)}, nil
}
