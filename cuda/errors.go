package cuda

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/ferryrdma/ferry/internal/cudadrv"
	"github.com/ferryrdma/ferry/internal/errdefs"
)

// Sentinel errors: the categories every ferry package shares (the same
// values as fabric.ErrNotSupported, fabric.ErrTimeout, ...), so one
// errors.Is test works across the engine and this package.
var (
	// ErrNotSupported: no driver, no device, a build with CGO_ENABLED=0, or a
	// driver or device without the feature. Every entry point returns an
	// error wrapping it on a machine without CUDA.
	ErrNotSupported = errdefs.ErrNotSupported
	// ErrClosed: the object (or its context) was closed.
	ErrClosed = errdefs.ErrClosed
	// ErrInvalidArgument: bad input found before the driver was called.
	ErrInvalidArgument = errdefs.ErrInvalidArgument
	// ErrTimeout: a wait's context ended first.
	ErrTimeout = errdefs.ErrTimeout
	// ErrBusy: a context closed while objects made in it are still open,
	// or options changed after the driver was loaded.
	ErrBusy = errdefs.ErrBusy
	// ErrCompile is wrapped by every *CompileError.
	ErrCompile = errors.New("kernel compilation failed")
)

// Result is a CUresult. Its String works without a driver.
type Result int32

// String returns the CUresult name, e.g. "CUDA_ERROR_OUT_OF_MEMORY".
func (r Result) String() string {
	if s, ok := resultNames[r]; ok {
		return s
	}
	return "CUDA_ERROR_" + strconv.Itoa(int(r))
}

// notSupported lists results that mean "this machine cannot": they make
// errors.Is(err, ErrNotSupported) hold.
func (r Result) notSupported() bool {
	switch cudadrv.Result(r) {
	case cudadrv.ErrNotInitialized, cudadrv.ErrDeinitialized, cudadrv.ErrStubLibrary,
		cudadrv.ErrInsufficientDriver, cudadrv.ErrNoDevice, cudadrv.ErrNoBinaryForGPU,
		cudadrv.ErrPeerAccessUnsupported, cudadrv.ErrUnsupportedPTXVersion,
		cudadrv.ErrNotPermitted, cudadrv.ErrNotSupportedCode, cudadrv.ErrSystemNotReady,
		cudadrv.ErrStreamCaptureUnsupported:
		return true
	}
	return false
}

var resultNames = map[Result]string{
	0: "CUDA_SUCCESS", 1: "CUDA_ERROR_INVALID_VALUE", 2: "CUDA_ERROR_OUT_OF_MEMORY",
	3: "CUDA_ERROR_NOT_INITIALIZED", 4: "CUDA_ERROR_DEINITIALIZED", 34: "CUDA_ERROR_STUB_LIBRARY",
	35: "CUDA_ERROR_INSUFFICIENT_DRIVER", 46: "CUDA_ERROR_DEVICE_UNAVAILABLE",
	100: "CUDA_ERROR_NO_DEVICE", 101: "CUDA_ERROR_INVALID_DEVICE", 200: "CUDA_ERROR_INVALID_IMAGE",
	201: "CUDA_ERROR_INVALID_CONTEXT", 205: "CUDA_ERROR_MAP_FAILED", 209: "CUDA_ERROR_NO_BINARY_FOR_GPU",
	217: "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED", 218: "CUDA_ERROR_INVALID_PTX",
	222: "CUDA_ERROR_UNSUPPORTED_PTX_VERSION", 300: "CUDA_ERROR_INVALID_SOURCE",
	301: "CUDA_ERROR_FILE_NOT_FOUND", 304: "CUDA_ERROR_OPERATING_SYSTEM",
	400: "CUDA_ERROR_INVALID_HANDLE", 401: "CUDA_ERROR_ILLEGAL_STATE", 500: "CUDA_ERROR_NOT_FOUND",
	600: "CUDA_ERROR_NOT_READY", 700: "CUDA_ERROR_ILLEGAL_ADDRESS",
	701: "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", 702: "CUDA_ERROR_LAUNCH_TIMEOUT",
	704: "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED", 705: "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED",
	708: "CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE", 709: "CUDA_ERROR_CONTEXT_IS_DESTROYED",
	710: "CUDA_ERROR_ASSERT", 719: "CUDA_ERROR_LAUNCH_FAILED",
	720: "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE", 800: "CUDA_ERROR_NOT_PERMITTED",
	801: "CUDA_ERROR_NOT_SUPPORTED", 802: "CUDA_ERROR_SYSTEM_NOT_READY",
	900: "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", 901: "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED",
	902: "CUDA_ERROR_STREAM_CAPTURE_MERGE", 903: "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED",
	904: "CUDA_ERROR_STREAM_CAPTURE_UNJOINED", 905: "CUDA_ERROR_STREAM_CAPTURE_ISOLATION",
	906: "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT", 908: "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD",
	999: "CUDA_ERROR_UNKNOWN",
}

// Error is a failed driver call: the function, the CUresult and the
// driver's text for it. errors.Is(err, ErrNotSupported) holds for results
// that mean the machine lacks something (no device, old driver, ...), and
// errors.Is(err, ErrInvalidArgument) for CUDA_ERROR_INVALID_VALUE.
type Error struct {
	Op   string // "cuMemAlloc", ...
	Code Result
	Msg  string // cuGetErrorString text; empty when unknown
}

func (e *Error) Error() string {
	s := "cuda: " + e.Op + ": " + e.Code.String() + " (" + strconv.Itoa(int(e.Code)) + ")"
	if e.Msg != "" {
		s += ": " + e.Msg
	}
	return s
}

// Is matches the sentinels described on Error.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrNotSupported:
		return e.Code.notSupported()
	case ErrInvalidArgument:
		return cudadrv.Result(e.Code) == cudadrv.ErrInvalidValue
	}
	return false
}

// CompileError is a failed NVRTC compilation. Log is NVRTC's full log,
// which names the line and the problem. It wraps ErrCompile.
type CompileError struct {
	Name string // the source's name, e.g. "flags.cu"
	Arch string // e.g. "sm_90a"
	Code int    // nvrtcResult
	Msg  string // nvrtcGetErrorString text
	Log  string
}

func (e *CompileError) Error() string {
	s := fmt.Sprintf("cuda: compile %s for %s: %s (nvrtc %d)", e.Name, e.Arch, e.Msg, e.Code)
	if e.Log != "" {
		s += "\n" + e.Log
	}
	return s
}

// Unwrap returns ErrCompile.
func (e *CompileError) Unwrap() error { return ErrCompile }

func invalid(op, format string, args ...any) error {
	return fmt.Errorf("cuda: %s: %s: %w", op, fmt.Sprintf(format, args...), ErrInvalidArgument)
}

func closedErr(op string) error { return fmt.Errorf("cuda: %s: %w", op, ErrClosed) }
