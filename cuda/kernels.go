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
