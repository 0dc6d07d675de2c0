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
// before every source; the CPU emulator (cuda/emu) compiles the
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

// KernelBuild is one compilation of device code that ferry performs: a
// source, the NVRTC options of one specialisation (its -D defines), and
// the kernels the code launches from the result. Every package with
// device code lists its builds (cuda.KernelBuilds, gpu.KernelBuilds, ...);
// tests/kernelgate gathers them, and the compile gate compiles each for
// sm_80 and sm_90 and checks it against its launches.
type KernelBuild struct {
	Name     string // what it is, e.g. "cuda flags"
	Source   Source
	Options  []string
	Launches []KernelLaunch
}

// KernelLaunch is a kernel of a build and the largest block (threads)
// any launch of it uses; it must fit the kernel's __launch_bounds__.
type KernelLaunch struct {
	Kernel   string
	MaxBlock int
}

// KernelBuilds lists the builds of this package's device code: flags.cu,
// whose kernels are launched with one warp.
func KernelBuilds() []KernelBuild {
	code, _ := kernelFS.ReadFile("kernels/flags.cu") // embedded: cannot fail
	src := Source{Name: "flags.cu", Code: string(code)}
	var l []KernelLaunch
	for _, k := range []string{"ferry_flag_wait", "ferry_flag_echo", "ferry_flag_set", "ferry_u64_add"} {
		l = append(l, KernelLaunch{Kernel: k, MaxBlock: 32})
	}
	return []KernelBuild{{Name: "cuda flags", Source: src, Launches: l}}
}
