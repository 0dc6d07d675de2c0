package cudabackend

import (
	"embed"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/ferryrdma/ferry/a2a"
	cu "github.com/ferryrdma/ferry/cuda"
)

// The kernels: two files sharing a2a_common.cuh, which the loader pastes
// in place of their #include (NVRTC here is given no include paths).
//
//go:embed kernels/*.cu kernels/*.cuh
var kernelFS embed.FS

// Kernel names, in phase order.
var kernelNames = [...]string{"a2a_dispatch_send", "a2a_dispatch_recv", "a2a_combine_send", "a2a_combine_recv"}

const probeKernel = "a2a_probe"

var includeRE = regexp.MustCompile(`(?m)^#include "([a-z0-9_]+\.cuh)"\s*$`)

// Sources returns the kernel sources, each a complete translation unit
// (its includes pasted in), for compilation as they are: by NVRTC, by
// the emulator, or by the compile gate.
func Sources() ([]Source, error) {
	ents, err := kernelFS.ReadDir("kernels")
	if err != nil {
		return nil, err
	}
	var out []Source
	for _, e := range ents {
		name := e.Name()
		if len(name) < 3 || name[len(name)-3:] != ".cu" {
			continue
		}
		b, err := kernelFS.ReadFile("kernels/" + name)
		if err != nil {
			return nil, err
		}
		var ferr error
		code := includeRE.ReplaceAllStringFunc(string(b), func(line string) string {
			inc := includeRE.FindStringSubmatch(line)[1]
			h, err := kernelFS.ReadFile("kernels/" + inc)
			if err != nil {
				ferr = fmt.Errorf("a2a cuda: %s includes %s: %w", name, inc, err)
			}
			return string(h)
		})
		if ferr != nil {
			return nil, ferr
		}
		out = append(out, Source{Name: "a2a/" + name, Code: code})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Shape is a set of compile-time values the kernels can be specialised
// for. A Layout matching one runs the specialised build; any other shape
// runs the generic one (every value read at run time).
//
// The NVLink domain size is not among them, deliberately: it only bounds
// a few per-block loops (the epoch waits and releases, one per node rank)
// and one division per copy, and making it a define would multiply the
// builds (and the compile gate's time) by four for no measurable gain.
type Shape struct {
	Hidden       int
	DispatchType a2a.DType
	Scales       int
	CombineType  a2a.DType
	TopK         int
}

// Shapes lists the specialised shapes: the hidden sizes common in
// practice (7168, 4096, 2048) with fp8 tokens and their block scales (56,
// 32, 8) or bf16 tokens without scales, bf16 combine, top-8.
func Shapes() []Shape {
	var out []Shape
	for _, hs := range [][2]int{{7168, 56}, {4096, 32}, {2048, 8}} {
		for _, in := range []a2a.DType{a2a.FP8, a2a.BF16} {
			scales := hs[1]
			if in != a2a.FP8 {
				scales = 0
			}
			out = append(out, Shape{Hidden: hs[0], DispatchType: in, Scales: scales, CombineType: a2a.BF16, TopK: 8})
		}
	}
	return out
}

// ShapeOf returns l's shape and whether the kernels are specialised for it.
func ShapeOf(l *a2a.Layout) (Shape, bool) {
	s := Shape{Hidden: l.Hidden, DispatchType: l.DispatchType, Scales: l.Scales, CombineType: l.CombineType,
		TopK: l.ExpertsPerToken}
	for _, c := range Shapes() {
		if c == s {
			return s, true
		}
	}
	return s, false
}

// Defines returns the compile-time defines of a build of source (as
// named by Sources) for blocks of threads threads, specialised for shape
// when special is true. Each source takes only the values it uses, so
// shapes that differ elsewhere share its build.
func Defines(source string, threads int, shape Shape, special bool) []string {
	d := []string{fmt.Sprintf("-DA2A_THREADS=%d", threads)}
	if !special {
		return d
	}
	d = append(d, fmt.Sprintf("-DA2A_TOPK=%d", shape.TopK))
	if strings.Contains(source, "dispatch") {
		return append(d, fmt.Sprintf("-DA2A_TOKEN_BYTES=%d", shape.Hidden*shape.DispatchType.Size()),
			fmt.Sprintf("-DA2A_SCALES=%d", shape.Scales))
	}
	return append(d, fmt.Sprintf("-DA2A_HIDDEN=%d", shape.Hidden), fmt.Sprintf("-DA2A_COMBINE_TYPE=%d", int(shape.CombineType)))
}

// GPUThreads is the block size of GPU builds (16 warps).
const GPUThreads = 512

// Variants lists, for source, every define set a GPU backend may build:
// the generic build and one per specialised shape (shapes that agree on
// the values the source uses share one), all for GPUThreads-thread
// blocks. The compile gate compiles each for every architecture.
func Variants(source string) [][]string {
	out := [][]string{Defines(source, GPUThreads, Shape{}, false)}
	seen := map[string]bool{}
	for _, s := range Shapes() {
		d := Defines(source, GPUThreads, s, true)
		key := strings.Join(d, " ")
		if !seen[key] {
			seen[key] = true
			out = append(out, d)
		}
	}
	return out
}

// KernelBuilds lists every build of the a2a kernels a GPU backend may
// perform (each source in each of its Variants), with the kernels it
// launches and their block size, for the compile gate
// (tests/kernelgate).
func KernelBuilds() []cu.KernelBuild {
	srcs, err := Sources()
	if err != nil {
		return nil // embedded: cannot fail
	}
	var out []cu.KernelBuild
	for _, src := range srcs {
		var launches []cu.KernelLaunch
		for _, k := range kernelNames {
			if declares(src.Code, k) {
				launches = append(launches, cu.KernelLaunch{Kernel: k, MaxBlock: GPUThreads})
			}
		}
		launches = append(launches, cu.KernelLaunch{Kernel: probeKernel, MaxBlock: 32})
		variants := Variants(src.Name)
		// The decode shape's build as sm_90 GPUs get it (ArchDefines): the
		// gate compiles it for every architecture like the others.
		variants = append(variants, append(append([]string(nil), Defines(src.Name, GPUThreads, Shapes()[0], true)...),
			ArchDefines(9, 0)...))
		for _, d := range variants {
			name := strings.TrimSuffix(strings.TrimPrefix(src.Name, "a2a/"), ".cu")
			for _, def := range d[1:] {
				name += " " + strings.TrimPrefix(def, "-DA2A_")
			}
			out = append(out, cu.KernelBuild{Name: name, Source: cu.Source{Name: src.Name, Code: src.Code},
				Options: d, Launches: launches})
		}
	}
	return out
}

// declares reports whether code defines the kernel called name.
func declares(code, name string) bool {
	return regexp.MustCompile(`__global__ void[^(]*(\([^)]*\))?\s*` + name + `\(`).MatchString(code)
}
