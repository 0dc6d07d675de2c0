package cudadrv

import (
	"unsafe"

	"github.com/ferryrdma/ferry/internal/errdefs"
)

// ErrNotSupported is the shared category (fabric.ErrNotSupported).
var ErrNotSupported = errdefs.ErrNotSupported

// Result is a CUresult. Success is 0.
type Result int32

// CUresult values the callers act on.
const (
	Success                      Result = 0
	ErrInvalidValue              Result = 1
	ErrOutOfMemory               Result = 2
	ErrNotInitialized            Result = 3
	ErrDeinitialized             Result = 4
	ErrStubLibrary               Result = 34
	ErrInsufficientDriver        Result = 35
	ErrNoDevice                  Result = 100
	ErrInvalidDevice             Result = 101
	ErrInvalidImage              Result = 200
	ErrInvalidContext            Result = 201
	ErrNoBinaryForGPU            Result = 209
	ErrPeerAccessUnsupported     Result = 217
	ErrInvalidPTX                Result = 218
	ErrUnsupportedPTXVersion     Result = 222
	ErrNotFound                  Result = 500
	ErrNotReady                  Result = 600
	ErrIllegalAddress            Result = 700
	ErrLaunchOutOfResources      Result = 701
	ErrLaunchTimeout             Result = 702
	ErrPeerAccessAlreadyEnabled  Result = 704
	ErrPeerAccessNotEnabled      Result = 705
	ErrLaunchFailed              Result = 719
	ErrCooperativeLaunchTooLarge Result = 720
	ErrNotPermitted              Result = 800
	ErrNotSupportedCode          Result = 801
	ErrSystemNotReady            Result = 802
	ErrStreamCaptureUnsupported  Result = 900
	ErrStreamCaptureInvalidated  Result = 901
	ErrUnknown                   Result = 999
)

// Handles. Driver objects are opaque C pointers (never Go pointers, so
// they can be stored anywhere); device addresses are integers.
type (
	Device    int32          // CUdevice
	Context   unsafe.Pointer // CUcontext
	Stream    unsafe.Pointer // CUstream; nil is the legacy default stream
	Event     unsafe.Pointer // CUevent
	Module    unsafe.Pointer // CUmodule
	Function  unsafe.Pointer // CUfunction
	Graph     unsafe.Pointer // CUgraph
	GraphExec unsafe.Pointer // CUgraphExec
	DevicePtr uint64         // CUdeviceptr
	MemHandle uint64         // CUmemGenericAllocationHandle
)

// Attribute is a CUdevice_attribute.
type Attribute int32

// Device attributes ferry reads (values from cuda.h).
const (
	AttrMaxThreadsPerBlock      Attribute = 1
	AttrMultiprocessorCount     Attribute = 16
	AttrCanMapHostMemory        Attribute = 19
	AttrPCIBusID                Attribute = 33
	AttrPCIDeviceID             Attribute = 34
	AttrUnifiedAddressing       Attribute = 41
	AttrPCIDomainID             Attribute = 50
	AttrComputeCapabilityMajor  Attribute = 75
	AttrComputeCapabilityMinor  Attribute = 76
	AttrCooperativeLaunch       Attribute = 95
	AttrVirtualMemoryManagement Attribute = 102
	AttrHandleTypePosixFD       Attribute = 103
	AttrGPUDirectRDMAWithVMM    Attribute = 110
	AttrGPUDirectRDMA           Attribute = 116
	AttrDmaBufSupported         Attribute = 124
	// AttrHostNativeAtomicSupported is 1 where the link to the CPU is
	// coherent (NVLink-C2C, Grace Hopper).
	AttrHostNativeAtomicSupported Attribute = 86
	// AttrGPUDirectRDMAFlushWritesOptions: bit 0, the host may flush
	// GPUDirect RDMA writes (cuFlushGPUDirectRDMAWrites).
	AttrGPUDirectRDMAFlushWritesOptions Attribute = 117
)

// Flags and enum values passed through unchanged.
const (
	MemHostAllocPortable      = 0x01 // CU_MEMHOSTALLOC_PORTABLE
	MemHostAllocDeviceMap     = 0x02 // CU_MEMHOSTALLOC_DEVICEMAP
	MemHostAllocWriteCombined = 0x04 // CU_MEMHOSTALLOC_WRITECOMBINED

	StreamNonBlocking = 0x1 // CU_STREAM_NON_BLOCKING

	EventDefault       = 0x0 // CU_EVENT_DEFAULT
	EventBlockingSync  = 0x1 // CU_EVENT_BLOCKING_SYNC
	EventDisableTiming = 0x2 // CU_EVENT_DISABLE_TIMING

	CaptureModeGlobal      = 0 // CU_STREAM_CAPTURE_MODE_GLOBAL
	CaptureModeThreadLocal = 1
	CaptureModeRelaxed     = 2

	MemHandleTypePosixFD = 0x1 // CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
	MemHandleTypeFabric  = 0x8 // CU_MEM_HANDLE_TYPE_FABRIC

	GranularityMinimum     = 0 // CU_MEM_ALLOC_GRANULARITY_MINIMUM
	GranularityRecommended = 1

	MemRangeHandleTypeDmaBufFD = 0x1 // CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD

	PointerAttrContext       = 1 // CU_POINTER_ATTRIBUTE_CONTEXT
	PointerAttrMemoryType    = 2 // CU_POINTER_ATTRIBUTE_MEMORY_TYPE
	PointerAttrSyncMemops    = 6 // CU_POINTER_ATTRIBUTE_SYNC_MEMOPS
	PointerAttrDeviceOrdinal = 9 // CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL

	MemoryTypeHost    = 1 // CU_MEMORYTYPE_HOST
	MemoryTypeDevice  = 2
	MemoryTypeArray   = 3
	MemoryTypeUnified = 4

	FuncAttrMaxThreadsPerBlock = 0 // CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK
	FuncAttrNumRegs            = 4 // CU_FUNC_ATTRIBUTE_NUM_REGS
)

// AllocProp is the part of CUmemAllocationProp ferry sets: pinned device
// memory on one device, exportable as HandleTypes, optionally GPUDirect
// RDMA capable.
type AllocProp struct {
	Device        Device
	HandleTypes   uint32
	GPUDirectRDMA bool
}

// Dim3 is a grid or block size.
type Dim3 struct{ X, Y, Z uint32 }

// LaunchParams is one kernel launch. Args holds the argument values
// back to back; Offsets[i] is where argument i starts in Args.
type LaunchParams struct {
	Func        Function
	Grid, Block Dim3
	SharedMem   uint32
	Stream      Stream
	Args        []byte
	Offsets     []uint32
	Cooperative bool
}

// MaxKernelArgs bounds the arguments of one launch (the trampoline builds
// the pointer array on its stack).
const MaxKernelArgs = 64
