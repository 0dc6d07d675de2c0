package cuda

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/ferryrdma/ferry/internal/cudadrv"
)

// Options say where the libraries and the kernel cache are. Empty fields
// take the environment (FERRY_CUDA_DRIVER, FERRY_NVRTC, FERRY_GDRCOPY,
// FERRY_CUDA_CACHE) and then the built-in search (CUDA_HOME, CUDA_PATH,
// LD_LIBRARY_PATH and the standard directories).
type Options struct {
	DriverPath  string // libcuda.so.1
	NVRTCPath   string // libnvrtc.so.13 (or .12, or Debian's .11.2)
	GDRCopyPath string // libgdrapi.so.2
	CacheDir    string // compiled kernels; "off" disables the disk cache
}

var lib struct {
	mu   sync.Mutex
	opts Options
	used bool // a load was attempted: options are frozen

	drv    atomic.Pointer[driverState]
	drvErr error // conclusive failure, cached
	nvrtc  cudadrv.NVRTC
	nvErr  error
	gdr    cudadrv.GDR
	gdrErr error
}

// driverState is the loaded driver. Its fields never change.
type driverState struct {
	d       cudadrv.Driver
	version int
}

// Configure sets Options. It fails with ErrBusy once any entry point has
// tried to load the driver: symbols resolved from one library must never
// be mixed with another.
func Configure(o Options) error {
	lib.mu.Lock()
	defer lib.mu.Unlock()
	if lib.used {
		return fmt.Errorf("cuda: configure: driver already loaded: %w", ErrBusy)
	}
	lib.opts = o
	return nil
}

func osEnv() searchEnv { return searchEnv{getenv: os.Getenv, glob: filepath.Glob} }

func (o Options) withEnv() Options {
	pick := func(v, env string) string {
		if v != "" {
			return v
		}
		return os.Getenv(env)
	}
	o.DriverPath = pick(o.DriverPath, "FERRY_CUDA_DRIVER")
	o.NVRTCPath = pick(o.NVRTCPath, "FERRY_NVRTC")
	o.GDRCopyPath = pick(o.GDRCopyPath, "FERRY_GDRCOPY")
	o.CacheDir = pick(o.CacheDir, "FERRY_CUDA_CACHE")
	return o
}

// Init loads the driver and initialises it (cuInit). Every entry point
// calls it; calling it first only moves the cost. It returns nil when CUDA
// is usable, and an error wrapping ErrNotSupported when there is no
// driver or no device. Such conclusive answers are cached; any other
// failure is returned and retried on the next call.
func Init() error {
	_, err := driver()
	return err
}

func driver() (*driverState, error) {
	if s := lib.drv.Load(); s != nil {
		return s, nil
	}
	lib.mu.Lock()
	defer lib.mu.Unlock()
	if s := lib.drv.Load(); s != nil {
		return s, nil
	}
	if lib.drvErr != nil {
		return nil, lib.drvErr
	}
	lib.used = true
	opts := lib.opts.withEnv()
	d, err := cudadrv.LoadDriver(driverCandidates(osEnv(), opts.DriverPath))
	if err != nil {
		lib.drvErr = fmt.Errorf("cuda: load driver: %w", err)
		return nil, lib.drvErr
	}
	s := &driverState{d: d}
	if r := d.Init(0); r != cudadrv.Success {
		err := s.check("cuInit", r)
		if Result(r).notSupported() {
			lib.drvErr = err
		}
		return nil, err
	}
	v, r := d.DriverGetVersion()
	if r != cudadrv.Success {
		return nil, s.check("cuDriverGetVersion", r)
	}
	s.version = v
	lib.drv.Store(s)
	return s, nil
}

// check turns a CUresult into nil or an *Error with the driver's text.
func (s *driverState) check(op string, r cudadrv.Result) error {
	if r == cudadrv.Success {
		return nil
	}
	e := &Error{Op: op, Code: Result(r)}
	if s != nil && s.d != nil {
		if msg, ok := s.d.GetErrorString(r); ok {
			e.Msg = msg
		}
	}
	return e
}

// DriverVersion returns the CUDA version the driver supports, e.g. 13000
// for 13.0.
func DriverVersion() (int, error) {
	s, err := driver()
	if err != nil {
		return 0, err
	}
	return s.version, nil
}

// DriverPath returns the driver library that was loaded, or "".
func DriverPath() string {
	if s := lib.drv.Load(); s != nil {
		return s.d.Path()
	}
	return ""
}

// loadNVRTC loads NVRTC on its own: compiling needs no driver and no
// device (CI machines compile every kernel with NVRTC alone).
func loadNVRTC() (cudadrv.NVRTC, error) {
	lib.mu.Lock()
	defer lib.mu.Unlock()
	if lib.nvrtc != nil || lib.nvErr != nil {
		return lib.nvrtc, lib.nvErr
	}
	lib.used = true
	opts := lib.opts.withEnv()
	env := osEnv()
	cands := nvrtcCandidates(env, opts.NVRTCPath)
	var pre []string
	for _, c := range cands {
		if _, err := os.Stat(c); err == nil {
			pre = builtinsCandidates(env, c)
			break
		}
	}
	n, err := cudadrv.LoadNVRTC(cands, pre)
	if err != nil {
		lib.nvErr = fmt.Errorf("cuda: load nvrtc: %w", err)
		return nil, lib.nvErr
	}
	lib.nvrtc = n
	return n, nil
}

func loadGDR() (cudadrv.GDR, error) {
	lib.mu.Lock()
	defer lib.mu.Unlock()
	if lib.gdr != nil || lib.gdrErr != nil {
		return lib.gdr, lib.gdrErr
	}
	opts := lib.opts.withEnv()
	g, err := cudadrv.LoadGDR(gdrCandidates(osEnv(), opts.GDRCopyPath))
	if err != nil {
		lib.gdrErr = fmt.Errorf("cuda: load gdrcopy: %w", err)
		return nil, lib.gdrErr
	}
	lib.gdr = g
	return g, nil
}

func cacheDirOption() string {
	lib.mu.Lock()
	defer lib.mu.Unlock()
	return lib.opts.withEnv().CacheDir
}
