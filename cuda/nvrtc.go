package cuda

import (
	"fmt"
	"slices"
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

// Compile compiles src to a cubin for arch ("sm_90a", see ArchFor) with
// NVRTC, without the cache. A failed compilation returns a *CompileError
// carrying NVRTC's log.
func Compile(src Source, arch string, options ...string) ([]byte, error) {
	if src.Code == "" || arch == "" {
		return nil, invalid("compile", "empty source or arch")
	}
	n, err := loadNVRTC()
	if err != nil {
		return nil, err
	}
	cubin, log, r := n.Compile(src.Code, src.Name, compileOptions(arch, options))
	if r != cudadrv.NVRTCSuccess {
		return nil, &CompileError{Name: src.Name, Arch: arch, Code: int(r), Msg: n.ErrorString(r), Log: log}
	}
	if len(cubin) == 0 {
		return nil, &CompileError{Name: src.Name, Arch: arch, Msg: "empty cubin", Log: log}
	}
	return cubin, nil
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
	cubin, ok := cache.get(st.Key)
	if ok {
		st.CacheHit = true
	} else {
		t0 := time.Now()
		if cubin, err = Compile(src, arch, opts...); err != nil {
			return nil, st, err
		}
		st.Compile = time.Since(t0)
		cache.put(st.Key, cubin) // best effort
	}
	t0 := time.Now()
	m, err := c.LoadModule(cubin)
	if err != nil && st.CacheHit {
		// A stale or damaged entry: compile afresh and replace it.
		cache.remove(st.Key)
		st.CacheHit = false
		t1 := time.Now()
		if cubin, err = Compile(src, arch, opts...); err != nil {
			return nil, st, err
		}
		st.Compile = time.Since(t1)
		cache.put(st.Key, cubin)
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
