package cudadrv

import "unsafe"

// Driver is the CUDA driver API as ferry uses it. Methods map 1:1 to the
// cu* functions named in their comments; a method whose first argument is
// a Context makes that context current on the calling thread first (a zero
// Context leaves the thread's current context alone). Results are returned
// raw: turning them into errors is package cuda's job.
type Driver interface {
	Init(flags uint32) Result               // cuInit
	DriverGetVersion() (int, Result)        // cuDriverGetVersion
	GetErrorName(r Result) (string, bool)   // cuGetErrorName; false if unknown
	GetErrorString(r Result) (string, bool) // cuGetErrorString

	DeviceGetCount() (int, Result)                                         // cuDeviceGetCount
	DeviceGet(ordinal int) (Device, Result)                                // cuDeviceGet
	DeviceGetName(d Device) (string, Result)                               // cuDeviceGetName
	DeviceGetAttribute(a Attribute, d Device) (int, Result)                // cuDeviceGetAttribute
	DeviceGetPCIBusID(d Device) (string, Result)                           // cuDeviceGetPCIBusId
	DeviceTotalMem(d Device) (uint64, Result)                              // cuDeviceTotalMem_v2
	DeviceCanAccessPeer(d, peer Device) (bool, Result)                     // cuDeviceCanAccessPeer
	DevicePrimaryCtxRetain(d Device) (Context, Result)                     // cuDevicePrimaryCtxRetain
	DevicePrimaryCtxRelease(d Device) Result                               // cuDevicePrimaryCtxRelease_v2
	CtxSynchronize(c Context) Result                                       // cuCtxSynchronize
	CtxEnablePeerAccess(c, peer Context) Result                            // cuCtxEnablePeerAccess
	CtxDisablePeerAccess(c, peer Context) Result                           // cuCtxDisablePeerAccess
	PointerGetAttribute(attr int, p DevicePtr) (uint64, Result)            // cuPointerGetAttribute (integer attributes)
	PointerSetAttribute(c Context, attr int, v uint32, p DevicePtr) Result // cuPointerSetAttribute

	MemAlloc(c Context, size uint64) (DevicePtr, Result)                        // cuMemAlloc_v2
	MemFree(c Context, p DevicePtr) Result                                      // cuMemFree_v2
	MemHostAlloc(c Context, size uint64, flags uint32) (unsafe.Pointer, Result) // cuMemHostAlloc
	MemFreeHost(c Context, p unsafe.Pointer) Result                             // cuMemFreeHost
	MemHostGetDevicePointer(c Context, p unsafe.Pointer) (DevicePtr, Result)    // cuMemHostGetDevicePointer_v2
	// Memcpy copies between any two addresses the driver knows (unified
	// addressing). Go memory may be passed for the duration of the call.
	Memcpy(c Context, dst, src unsafe.Pointer, n uint64) Result               // cuMemcpy
	MemcpyHtoD(c Context, dst DevicePtr, src unsafe.Pointer, n uint64) Result // cuMemcpyHtoD_v2
	MemcpyDtoH(c Context, dst unsafe.Pointer, src DevicePtr, n uint64) Result // cuMemcpyDtoH_v2
	MemcpyDtoD(c Context, dst, src DevicePtr, n uint64) Result                // cuMemcpyDtoD_v2
	// MemcpyAsync takes addresses of device or pinned memory only: the
	// copy runs after the call returns.
	MemcpyAsync(c Context, dst, src DevicePtr, n uint64, s Stream) Result                                     // cuMemcpyAsync
	MemsetD8(c Context, dst DevicePtr, v byte, n uint64) Result                                               // cuMemsetD8_v2
	MemsetD8Async(c Context, dst DevicePtr, v byte, n uint64, s Stream) Result                                // cuMemsetD8Async
	MemGetHandleForAddressRange(c Context, p DevicePtr, n uint64, handleType int, flags uint64) (int, Result) // cuMemGetHandleForAddressRange (fd)

	MemGetAllocationGranularity(c Context, prop AllocProp, option int) (uint64, Result)  // cuMemGetAllocationGranularity
	MemCreate(c Context, size uint64, prop AllocProp) (MemHandle, Result)                // cuMemCreate
	MemRelease(c Context, h MemHandle) Result                                            // cuMemRelease
	MemAddressReserve(c Context, size, align uint64, addr DevicePtr) (DevicePtr, Result) // cuMemAddressReserve
	MemAddressFree(c Context, p DevicePtr, size uint64) Result                           // cuMemAddressFree
	MemMap(c Context, p DevicePtr, size, offset uint64, h MemHandle) Result              // cuMemMap
	MemUnmap(c Context, p DevicePtr, size uint64) Result                                 // cuMemUnmap
	MemSetAccess(c Context, p DevicePtr, size uint64, devices []Device) Result           // cuMemSetAccess (read/write)
	MemExportToShareableHandle(c Context, h MemHandle, handleType int) (int, Result)     // cuMemExportToShareableHandle (fd)
	MemImportFromShareableHandle(c Context, fd int, handleType int) (MemHandle, Result)  // cuMemImportFromShareableHandle (fd)

	StreamCreate(c Context, flags uint32) (Stream, Result)          // cuStreamCreate
	StreamDestroy(c Context, s Stream) Result                       // cuStreamDestroy_v2
	StreamSynchronize(c Context, s Stream) Result                   // cuStreamSynchronize
	StreamQuery(c Context, s Stream) Result                         // cuStreamQuery
	StreamBeginCapture(c Context, s Stream, mode int) Result        // cuStreamBeginCapture_v2
	StreamEndCapture(c Context, s Stream) (Graph, Result)           // cuStreamEndCapture
	EventCreate(c Context, flags uint32) (Event, Result)            // cuEventCreate
	EventDestroy(c Context, e Event) Result                         // cuEventDestroy_v2
	EventRecord(c Context, e Event, s Stream) Result                // cuEventRecord
	EventQuery(c Context, e Event) Result                           // cuEventQuery
	EventSynchronize(c Context, e Event) Result                     // cuEventSynchronize
	EventElapsedTime(c Context, start, end Event) (float32, Result) // cuEventElapsedTime(_v2)

	ModuleLoadData(c Context, image []byte) (Module, Result)               // cuModuleLoadData
	ModuleUnload(c Context, m Module) Result                               // cuModuleUnload
	ModuleGetFunction(c Context, m Module, name string) (Function, Result) // cuModuleGetFunction
	FuncGetAttribute(c Context, f Function, attr int) (int, Result)        // cuFuncGetAttribute
	OccupancyMaxActiveBlocksPerMultiprocessor(c Context, f Function, blockSize int, smem uint64) (int, Result)
	// LaunchKernel is cuLaunchKernel, or cuLaunchCooperativeKernel when
	// p.Cooperative is set.
	LaunchKernel(c Context, p *LaunchParams) Result
	GraphInstantiate(c Context, g Graph) (GraphExec, Result) // cuGraphInstantiateWithFlags(flags 0)
	GraphLaunch(c Context, g GraphExec, s Stream) Result     // cuGraphLaunch
	GraphExecDestroy(c Context, g GraphExec) Result          // cuGraphExecDestroy
	GraphDestroy(c Context, g Graph) Result                  // cuGraphDestroy
	// FlushGPUDirectRDMAWrites is cuFlushGPUDirectRDMAWrites (CUDA 11.3+):
	// the NIC writes into this context's memory that completed before the
	// call are visible to the device's kernels after it.
	FlushGPUDirectRDMAWrites(c Context, target, scope int) Result

	// Missing lists the optional entry points the loaded driver lacks.
	Missing() []string
	// Path is the library that was loaded.
	Path() string
}

// NVRTCResult is an nvrtcResult. Success is 0.
type NVRTCResult int32

// NVRTC results the callers act on.
const (
	NVRTCSuccess       NVRTCResult = 0
	NVRTCInvalidOption NVRTCResult = 5
	NVRTCCompilation   NVRTCResult = 6
)

// NVRTCHeader is an in-memory header a source may #include by Name.
type NVRTCHeader struct{ Name, Code string }

// NVRTC is the runtime compiler. Compile runs the whole sequence
// (nvrtcCreateProgram with the headers, nvrtcCompileProgram,
// nvrtcGetProgramLog, nvrtcGetCUBIN, nvrtcDestroyProgram) in one call so
// that no program handle outlives it; the log is returned whether or not
// compilation succeeded.
type NVRTC interface {
	Version() (major, minor int, r NVRTCResult)
	Compile(src, name string, headers []NVRTCHeader, options []string) (cubin []byte, log string, r NVRTCResult)
	ErrorString(r NVRTCResult) string
	Path() string
}

// GDRHandle is a gdr_t; GDRMemHandle is a gdr_mh_t.
type (
	GDRHandle    unsafe.Pointer
	GDRMemHandle uint64
)

// GDR is GDRCopy's user library. Integer results are gdrapi's: 0 on
// success, else an errno value.
type GDR interface {
	Open() (GDRHandle, bool)                                                // gdr_open
	Close(g GDRHandle) int                                                  // gdr_close
	PinBuffer(g GDRHandle, addr, size uint64) (GDRMemHandle, int)           // gdr_pin_buffer
	UnpinBuffer(g GDRHandle, mh GDRMemHandle) int                           // gdr_unpin_buffer
	Map(g GDRHandle, mh GDRMemHandle, size uint64) (unsafe.Pointer, int)    // gdr_map
	Unmap(g GDRHandle, mh GDRMemHandle, va unsafe.Pointer, size uint64) int // gdr_unmap
	RuntimeVersion() (major, minor int)                                     // gdr_runtime_get_version
	// Store32 and Load32 access a word of a BAR mapping: a volatile access
	// followed (for stores) by a store fence, because the mapping is
	// write-combined and locked instructions are not allowed on it.
	Store32(p unsafe.Pointer, v uint32)
	Load32(p unsafe.Pointer) uint32
	Path() string
}
