package kernelgate

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/ferryrdma/ferry/cuda"
)

// Archs are the architectures the gate compiles for.
var Archs = []string{"sm_80", "sm_90"}

// KernelStats is what ptxas (-Xptxas=-v) and the cubin say about one
// kernel of one build for one architecture.
type KernelStats struct {
	Build, Kernel, Arch string
	Registers           int
	SpillStores         int // bytes
	SpillLoads          int // bytes
	StackFrame          int // bytes of local memory per thread
	SharedBytes         int // static shared memory
	// MaxThreads is the kernel's __launch_bounds__ thread count (0: the
	// kernel has none), MaxRegisters the per-thread register budget
	// ptxas derived from the bounds (255 without them).
	MaxThreads, MaxRegisters int
}

// FunctionSpill is a spill ptxas reported in a function that is not a
// kernel (a __noinline__ __device__ function).
type FunctionSpill struct {
	Function        string
	Stores, Loads   int
	StackFrameBytes int
	Build, Arch     string
}

// Report is one compiled build.
type Report struct {
	Build   cuda.KernelBuild
	Arch    string
	Kernels []KernelStats
	Spills  []FunctionSpill // in non-kernel functions
	Log     string
	Cubin   []byte
}

// Compile compiles b for arch with -Xptxas=-v (and extra options, such
// as -lineinfo, which leaves the SASS as it is) and gathers the figures
// of every kernel in the cubin.
func Compile(b cuda.KernelBuild, arch string, extra ...string) (Report, error) {
	return compileWith(b, cuda.DeviceHeader().Code, arch, extra)
}

// CompileWithHeader is Compile against header in place of
// ferry_device.h (see cuda.CompileSourceWithHeader).
func CompileWithHeader(b cuda.KernelBuild, header, arch string, extra ...string) (Report, error) {
	return compileWith(b, header, arch, extra)
}

func compileWith(b cuda.KernelBuild, header, arch string, extra []string) (Report, error) {
	r := Report{Build: b, Arch: arch}
	opts := append(append(slices.Clone(b.Options), "-Xptxas=-v"), extra...)
	res, err := compileCached(b.Source, header, arch, opts)
	r.Log = res.Log
	if err != nil {
		return r, err
	}
	r.Cubin = res.Image
	if res.Arch != arch {
		return r, fmt.Errorf("%s: compiled for %s, not %s (%s)", b.Name, res.Arch, arch, res.Note)
	}
	attrs, err := cubinKernelAttrs(res.Image)
	if err != nil {
		return r, fmt.Errorf("%s %s: read cubin: %w", b.Name, arch, err)
	}
	entries, logStats, spills := parsePtxasLog(res.Log)
	if len(entries) == 0 {
		return r, fmt.Errorf("%s %s: no kernel in ptxas's report:\n%s", b.Name, arch, res.Log)
	}
	for _, name := range entries {
		st := logStats[name]
		st.Build, st.Kernel, st.Arch = b.Name, name, arch
		st.MaxThreads, st.MaxRegisters = attrs[name].maxThreads, attrs[name].maxRegisters
		r.Kernels = append(r.Kernels, st)
	}
	sort.Slice(r.Kernels, func(i, j int) bool { return r.Kernels[i].Kernel < r.Kernels[j].Kernel })
	for _, s := range spills {
		if !slices.Contains(entries, s.Function) {
			s.Build, s.Arch = b.Name, arch
			r.Spills = append(r.Spills, s)
		}
	}
	return r, nil
}

// Problems lists what the gate refuses in r: spills, kernels without
// launch bounds or over their register budget, launches larger than the
// bounds, launched kernels missing from the cubin, and kernels in the
// cubin that the build does not list as launched.
func (r Report) Problems() []string {
	var p []string
	where := func(k string) string { return fmt.Sprintf("%s: %s (%s)", r.Build.Name, k, r.Arch) }
	launched := map[string]int{}
	for _, l := range r.Build.Launches {
		launched[l.Kernel] = l.MaxBlock
	}
	have := map[string]bool{}
	for _, k := range r.Kernels {
		have[k.Kernel] = true
		if k.SpillStores > 0 || k.SpillLoads > 0 {
			p = append(p, fmt.Sprintf("%s spills: %d bytes stored, %d loaded", where(k.Kernel), k.SpillStores, k.SpillLoads))
		}
		if k.MaxThreads == 0 {
			p = append(p, where(k.Kernel)+" has no __launch_bounds__")
		}
		if k.MaxRegisters > 0 && k.Registers > k.MaxRegisters {
			p = append(p, fmt.Sprintf("%s uses %d registers, its launch bounds allow %d", where(k.Kernel), k.Registers, k.MaxRegisters))
		}
		mb, ok := launched[k.Kernel]
		if !ok {
			p = append(p, where(k.Kernel)+" is not listed in the build's launches (KernelBuild.Launches)")
			continue
		}
		if k.MaxThreads > 0 && mb > k.MaxThreads {
			p = append(p, fmt.Sprintf("%s is launched with %d threads, its launch bounds allow %d", where(k.Kernel), mb, k.MaxThreads))
		}
		if mb <= 0 {
			p = append(p, fmt.Sprintf("%s: launch block %d", where(k.Kernel), mb))
		}
	}
	for _, l := range r.Build.Launches {
		if !have[l.Kernel] {
			p = append(p, where(l.Kernel)+" is launched but not in the compiled code")
		}
	}
	for _, s := range r.Spills {
		p = append(p, fmt.Sprintf("%s spills: %d bytes stored, %d loaded", where(s.Function), s.Stores, s.Loads))
	}
	return p
}

var (
	reEntry = regexp.MustCompile(`Compiling entry function '([^']+)'`)
	reProps = regexp.MustCompile(`Function properties for (\S+)`)
	reFrame = regexp.MustCompile(`(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads`)
	reUsed  = regexp.MustCompile(`Used (\d+) registers(?:, (\d+) bytes smem)?`)
)

// parsePtxasLog reads ptxas -v's report: the entry functions (kernels),
// per function its frame, spills, registers and shared memory, and the
// spills of every function.
func parsePtxasLog(log string) (entries []string, stats map[string]KernelStats, spills []FunctionSpill) {
	stats = map[string]KernelStats{}
	entry, props := "", ""
	atoi := func(s string) int { n, _ := strconv.Atoi(s); return n }
	for _, line := range strings.Split(log, "\n") {
		if m := reEntry.FindStringSubmatch(line); m != nil {
			entry = m[1]
			if !slices.Contains(entries, entry) {
				entries = append(entries, entry)
			}
			continue
		}
		if m := reProps.FindStringSubmatch(line); m != nil {
			props = m[1]
			continue
		}
		if m := reFrame.FindStringSubmatch(line); m != nil && props != "" {
			st := stats[props]
			st.StackFrame, st.SpillStores, st.SpillLoads = atoi(m[1]), atoi(m[2]), atoi(m[3])
			stats[props] = st
			if st.SpillStores > 0 || st.SpillLoads > 0 {
				spills = append(spills, FunctionSpill{Function: props, Stores: st.SpillStores, Loads: st.SpillLoads, StackFrameBytes: st.StackFrame})
			}
			continue
		}
		if m := reUsed.FindStringSubmatch(line); m != nil && entry != "" {
			st := stats[entry]
			st.Registers = atoi(m[1])
			if m[2] != "" {
				st.SharedBytes = atoi(m[2])
			}
			stats[entry] = st
		}
	}
	return entries, stats, spills
}

type kernelAttrs struct{ maxThreads, maxRegisters int }

// Attributes of a kernel's .nv.info.<name> section in a cubin: a list of
// (format, attribute, value) entries.
const (
	eifmtSVal        = 4 // a u16 size, then that many bytes
	eiattrMaxThreads = 0x05
	eiattrMaxRegs    = 0x1b
)

// cubinKernelAttrs reads each kernel's launch-bound figures from a cubin.
func cubinKernelAttrs(cubin []byte) (map[string]kernelAttrs, error) {
	secs, err := elfSections(cubin)
	if err != nil {
		return nil, err
	}
	out := map[string]kernelAttrs{}
	for name, d := range secs {
		name, ok := strings.CutPrefix(name, ".nv.info.")
		if !ok {
			continue
		}
		var a kernelAttrs
		for p := 0; p+4 <= len(d); {
			format, attr := d[p], d[p+1]
			val := binary.LittleEndian.Uint16(d[p+2:])
			if format != eifmtSVal {
				if attr == eiattrMaxRegs {
					a.maxRegisters = int(val)
				}
				p += 4
				continue
			}
			body := d[p+4 : min(len(d), p+4+int(val))]
			if attr == eiattrMaxThreads && len(body) >= 12 {
				a.maxThreads = int(binary.LittleEndian.Uint32(body)) * int(binary.LittleEndian.Uint32(body[4:])) *
					int(binary.LittleEndian.Uint32(body[8:]))
			}
			p += 4 + int(val)
		}
		out[name] = a
	}
	return out, nil
}

// elfSections returns the named sections of a little-endian ELF64 image.
// (debug/elf refuses cubins: NVIDIA puts its ABI version where the ELF
// version byte is.)
func elfSections(img []byte) (map[string][]byte, error) {
	if len(img) < 64 || !bytes.HasPrefix(img, []byte("\x7fELF")) || img[4] != 2 || img[5] != 1 {
		return nil, errors.New("not a little-endian ELF64 image")
	}
	le := binary.LittleEndian
	shoff, shentsize, shnum, shstrndx := le.Uint64(img[0x28:]), int(le.Uint16(img[0x3a:])), int(le.Uint16(img[0x3c:])), int(le.Uint16(img[0x3e:]))
	if shentsize < 64 || shstrndx >= shnum || shoff+uint64(shnum*shentsize) > uint64(len(img)) {
		return nil, errors.New("bad section header table")
	}
	type sec struct{ name, off, size uint64 }
	secs := make([]sec, shnum)
	for i := range secs {
		h := img[shoff+uint64(i*shentsize):]
		secs[i] = sec{uint64(le.Uint32(h)), le.Uint64(h[0x18:]), le.Uint64(h[0x20:])}
		if le.Uint32(h[4:]) != 8 && secs[i].off+secs[i].size > uint64(len(img)) { // 8: SHT_NOBITS
			return nil, fmt.Errorf("section %d out of bounds", i)
		}
	}
	strtab := img[secs[shstrndx].off : secs[shstrndx].off+secs[shstrndx].size]
	out := map[string][]byte{}
	for _, s := range secs {
		if s.name >= uint64(len(strtab)) || s.off+s.size > uint64(len(img)) {
			continue
		}
		name := strtab[s.name:]
		if n := bytes.IndexByte(name, 0); n >= 0 {
			name = name[:n]
		}
		out[string(name)] = img[s.off : s.off+s.size]
	}
	return out, nil
}
