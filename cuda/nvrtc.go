package cuda

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ferryrdma/ferry/internal/cudadrv"
)

// Source is CUDA C++ source for NVRTC. Kernels meant to be looked up by
// name are declared extern "C". Name appears in compile errors.
type Source struct {
	Name string
	Code string
}

// NVRTCVersion returns the version of the NVRTC library found.
func NVRTCVersion() (major, minor int, err error) {
	n, err := loadNVRTC()
	if err != nil {
		return 0, 0, err
	}
	major, minor, r := n.Version()
	if r != cudadrv.NVRTCSuccess {
		return 0, 0, fmt.Errorf("cuda: nvrtcVersion: %s: %w", n.ErrorString(r), ErrNotSupported)
	}
	return major, minor, nil
}

// compileOptions are always passed, before the caller's own.
func compileOptions(arch string, extra []string) []string {
	return append([]string{"--gpu-architecture=" + arch, "--std=c++17"}, extra...)
}

// withDeviceHeader is the text NVRTC compiles for src: the device header
// included first (it is handed to NVRTC as an in-memory header), then the
// source with its own name and line numbers.
func withDeviceHeader(src Source) string {
	return "#include \"" + DeviceHeaderName + "\"\n#line 1 \"" + src.Name + "\"\n" + src.Code
}

// CompileResult is one NVRTC compilation.
type CompileResult struct {
	Image []byte // the cubin
	// Arch is the architecture the cubin is for. It differs from the one
	// asked for when NVRTC does not know an architecture-specific target
	// ("sm_90a" on NVRTC 11.8): then the portable one ("sm_90") is used and
	// Note says so.
	Arch, Note string
	Log        string // NVRTC's log (with -Xptxas=-v: registers, spills, shared memory)
}

// Compile compiles src to a cubin for arch ("sm_90a", see ArchFor) with
// NVRTC, without the cache. A failed compilation returns a *CompileError
// carrying NVRTC's log. It needs NVRTC only, no driver.
func Compile(src Source, arch string, options ...string) ([]byte, error) {
	res, err := CompileSource(src, arch, options...)
	return res.Image, err
}

// CompileSource is Compile with the details: the architecture actually
// used (see CompileResult.Arch) and NVRTC's log. ferry_device.h is always
// included before the source.
func CompileSource(src Source, arch string, options ...string) (CompileResult, error) {
	return compileSource(src, deviceHeader, arch, options)
}

// CompileSourceWithHeader is CompileSource with header in place of
// ferry_device.h's text (same name, same position): for checks of what
// the compiler makes of a changed header, such as the compile gate's
// proof that a weakened memory-order primitive is caught in the SASS.
func CompileSourceWithHeader(src Source, header, arch string, options ...string) (CompileResult, error) {
	if header == "" {
		return CompileResult{Arch: arch}, invalid("compile", "empty header")
	}
	return compileSource(src, header, arch, options)
}

func compileSource(src Source, header, arch string, options []string) (CompileResult, error) {
	res := CompileResult{Arch: arch}
	if src.Code == "" || arch == "" {
		return res, invalid("compile", "empty source or arch")
	}
	n, err := loadNVRTC()
	if err != nil {
		return res, err
	}
	code := withDeviceHeader(src)
	headers := []cudadrv.NVRTCHeader{{Name: DeviceHeaderName, Code: header}}
	cubin, log, r := n.Compile(code, src.Name, headers, compileOptions(arch, options))
	if r == cudadrv.NVRTCInvalidOption && strings.HasSuffix(arch, "a") {
		// An older NVRTC lacks the architecture-specific target (sm_90a
		// came with CUDA 12.0): compile for the portable one instead.
		portable := strings.TrimSuffix(arch, "a")
		if cubin2, log2, r2 := n.Compile(code, src.Name, headers, compileOptions(portable, options)); r2 == cudadrv.NVRTCSuccess {
			maj, mnr, _ := n.Version()
			res.Arch = portable
			res.Note = fmt.Sprintf("NVRTC %d.%d has no %s target: compiled for %s", maj, mnr, arch, portable)
			cubin, log, r = cubin2, log2, r2
		}
	}
	res.Log = log
	if r != cudadrv.NVRTCSuccess {
		return res, &CompileError{Name: src.Name, Arch: arch, Code: int(r), Msg: n.ErrorString(r), Log: log}
	}
	if len(cubin) == 0 {
		return res, &CompileError{Name: src.Name, Arch: res.Arch, Msg: "empty cubin", Log: log}
	}
	res.Image = cubin
	return res, nil
}

// CompileOptions tune CompileModule.
type CompileOptions struct {
	// Options are extra NVRTC options ("-DNAME=1", "-lineinfo", ...).
	Options []string
	// Arch overrides the device's architecture (ArchFor).
	Arch string
	// CacheDir overrides Options.CacheDir / FERRY_CUDA_CACHE / the user
	// cache directory; "off" compiles every time.
	CacheDir string
}

// CompileStats says what CompileModule did.
type CompileStats struct {
	CacheHit bool
	Key      string        // cache key (hex)
	Compile  time.Duration // NVRTC time; 0 on a cache hit
	Load     time.Duration // cuModuleLoadData time
	// Arch is the architecture the code was compiled for, and ArchNote
	// why it differs from the device's (see CompileResult); on a cache hit
	// they are those of the compilation that filled the cache.
	Arch, ArchNote string
}

// CompileModule compiles src for this context's exact device and loads
// it. The cubin is cached on disk under a key made of the source, the
// architecture, the NVRTC version and the options, so the second load of
// the same kernel skips NVRTC. A cache that cannot be read or written is
// bypassed, never fatal.
func (c *Context) CompileModule(src Source, o CompileOptions) (*Module, CompileStats, error) {
	var st CompileStats
	if _, err := c.use("compile module"); err != nil {
		return nil, st, err
	}
	arch := o.Arch
	if arch == "" {
		major, minor, err := c.dev.ComputeCapability()
		if err != nil {
			return nil, st, err
		}
		arch = ArchFor(major, minor)
	}
	nmaj, nmin, err := NVRTCVersion()
	if err != nil {
		return nil, st, err
	}
	opts := slices.Clone(o.Options)
	st.Key = cacheKey(src, arch, nmaj, nmin, opts)
	cache := newKernelCache(o.CacheDir)
	st.Arch = arch
	cubin, ok := cache.get(st.Key)
	if ok {
		st.CacheHit = true
		st.Arch, st.ArchNote = cache.getNote(st.Key, arch)
	} else {
		t0 := time.Now()
		res, err := CompileSource(src, arch, opts...)
		if err != nil {
			return nil, st, err
		}
		cubin, st.Arch, st.ArchNote = res.Image, res.Arch, res.Note
		st.Compile = time.Since(t0)
		cache.put(st.Key, cubin) // best effort
		cache.putNote(st.Key, res.Arch, res.Note)
	}
	t0 := time.Now()
	m, err := c.LoadModule(cubin)
	if err != nil && st.CacheHit {
		// A stale or damaged entry: compile afresh and replace it.
		cache.remove(st.Key)
		st.CacheHit = false
		t1 := time.Now()
		res, cerr := CompileSource(src, arch, opts...)
		if cerr != nil {
			return nil, st, cerr
		}
		cubin, st.Arch, st.ArchNote = res.Image, res.Arch, res.Note
		st.Compile = time.Since(t1)
		cache.put(st.Key, cubin)
		cache.putNote(st.Key, res.Arch, res.Note)
		t0 = time.Now()
		m, err = c.LoadModule(cubin)
	}
	if err != nil {
		return nil, st, err
	}
	st.Load = time.Since(t0)
	m.fromCache = st.CacheHit
	return m, st, nil
}
