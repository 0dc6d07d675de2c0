"""Memory the engine can register, from whatever the caller holds.

A registration needs one contiguous byte range and something that keeps
it alive and in place while the NIC may touch it. as_memory finds both,
without copying, in this order:

  HostBuffer / RawMemory       ferry's own memory, or a raw pointer the caller vouches for
  __cuda_array_interface__     CUDA tensors and arrays (torch, CuPy, Numba): device memory
  __dlpack__                   torch tensors, numpy >= 1.22 arrays, JAX, ...: CPU or CUDA
  the buffer protocol          bytearray, memoryview, numpy arrays, array.array, mmap, ...

The range must be C-contiguous (a strided view would leave holes the
writes do not skip). What the NIC reads may be read-only; a region other
engines write into must be writable.
"""

from __future__ import annotations

import ctypes as C
import mmap
import weakref
from typing import Any, Optional, Sequence

from . import _abi
from ._lib_handle import check, has, lib
from .errors import NotSupportedError

CPU = "cpu"
CUDA = "cuda"

# DLPack device types (dlpack.h).
_DL_CPU, _DL_CUDA, _DL_CUDA_HOST = 1, 2, 3


class _DLDevice(C.Structure):
    _fields_ = [("device_type", C.c_int32), ("device_id", C.c_int32)]


class _DLDataType(C.Structure):
    _fields_ = [("code", C.c_uint8), ("bits", C.c_uint8), ("lanes", C.c_uint16)]


class _DLTensor(C.Structure):
    _fields_ = [
        ("data", C.c_void_p),
        ("device", _DLDevice),
        ("ndim", C.c_int32),
        ("dtype", _DLDataType),
        ("shape", C.POINTER(C.c_int64)),
        ("strides", C.POINTER(C.c_int64)),
        ("byte_offset", C.c_uint64),
    ]


class _PyBuffer(C.Structure):
    _fields_ = [
        ("buf", C.c_void_p),
        ("obj", C.c_void_p),
        ("len", C.c_ssize_t),
        ("itemsize", C.c_ssize_t),
        ("readonly", C.c_int),
        ("ndim", C.c_int),
        ("format", C.c_char_p),
        ("shape", C.POINTER(C.c_ssize_t)),
        ("strides", C.POINTER(C.c_ssize_t)),
        ("suboffsets", C.POINTER(C.c_ssize_t)),
        ("internal", C.c_void_p),
    ]


_PyBUF_WRITABLE = 0x0001
_PyBUF_C_CONTIGUOUS = 0x0038  # PyBUF_STRIDES | 0x20

_api = C.pythonapi
_api.PyObject_GetBuffer.restype = C.c_int
_api.PyObject_GetBuffer.argtypes = [C.py_object, C.POINTER(_PyBuffer), C.c_int]
_api.PyBuffer_Release.restype = None
_api.PyBuffer_Release.argtypes = [C.POINTER(_PyBuffer)]
_api.PyCapsule_GetPointer.restype = C.c_void_p
_api.PyCapsule_GetPointer.argtypes = [C.py_object, C.c_char_p]


class Memory:
    """One contiguous range: addr, nbytes, device ("cpu" or "cuda") and
    device_id, and whatever keeps the caller's object exported while ferry
    uses it (released by release())."""

    __slots__ = ("addr", "nbytes", "device", "device_id", "readonly", "_keep", "_pybuf", "__weakref__")

    def __init__(self, addr: int, nbytes: int, device: str = CPU, device_id: int = 0,
                 readonly: bool = False, keep: Any = None, pybuf: Optional[_PyBuffer] = None) -> None:
        self.addr, self.nbytes, self.device, self.device_id = addr, nbytes, device, device_id
        self.readonly, self._keep, self._pybuf = readonly, keep, pybuf

    def release(self) -> None:
        """Ends the export of the caller's object (a bytearray may resize
        again). Idempotent."""
        if self._pybuf is not None:
            b, self._pybuf = self._pybuf, None
            _api.PyBuffer_Release(C.byref(b))
        self._keep = None

    def __del__(self) -> None:
        self.release()


class RawMemory:
    """A raw address range the caller guarantees stays valid and in place
    while registered: memory from a C library, an mmap ferry did not make.
    Prefer passing the array or tensor itself, which ferry keeps alive."""

    def __init__(self, addr: int, nbytes: int, device: str = CPU, device_id: int = 0) -> None:
        if device not in (CPU, CUDA):
            raise ValueError("device must be %r or %r, got %r" % (CPU, CUDA, device))
        self.addr, self.nbytes, self.device, self.device_id = int(addr), int(nbytes), device, device_id


def _free_host(addr: int) -> None:
    try:
        lib().ferry_host_free(C.c_void_p(addr))
    except Exception:  # interpreter shutdown: nothing useful to do
        pass


_HUGE_PAGES = {"auto": _abi.HUGE_PAGES_AUTO, "never": _abi.HUGE_PAGES_NEVER,
               "required": _abi.HUGE_PAGES_REQUIRED}


class HostBuffer:
    """Page-aligned, zeroed host memory from ferry_host_alloc, outside any
    garbage-collected heap. The memory that "ipc" peers map: over ipc, a
    region written by peers must be a HostBuffer. view(), numpy() and
    torch() are zero-copy views that keep the buffer alive; close() (or
    the garbage collector, or interpreter exit) frees it, which the
    library refuses while a region still covers it.

    huge_pages (library 1.6) picks the pages backing it: "auto" (huge
    pages when the system has enough free and the buffer is at least one,
    else base pages), "never", or "required" (huge pages or an error:
    NotSupportedError without hugetlbfs, NoMemoryError when too few are
    free). Huge pages make a large registration cheaper. page_size says
    which it got. The default, None, is base pages, as before 1.6."""

    def __init__(self, nbytes: int, huge_pages: Optional[str] = None) -> None:
        if nbytes <= 0:
            raise ValueError("HostBuffer size must be positive, got %r" % (nbytes,))
        p = C.c_void_p()
        self.page_size: int = mmap.PAGESIZE
        if huge_pages is None:
            check("ferry_host_alloc", nbytes, C.byref(p))
        else:
            if huge_pages not in _HUGE_PAGES:
                raise ValueError("huge_pages must be one of %s, got %r" % (sorted(_HUGE_PAGES), huge_pages))
            if not has("ferry_host_alloc_with"):
                raise NotSupportedError("ferry_host_alloc_with", _abi.E_NOT_SUPPORTED, "FERRY_E_NOT_SUPPORTED",
                                        "libferry %s has no huge-page allocation (1.6 or later needed)" %
                                        lib().ferry_version_string().decode())
            ps = C.c_size_t(0)
            check("ferry_host_alloc_with", nbytes, _HUGE_PAGES[huge_pages], C.byref(p), C.byref(ps))
            self.page_size = ps.value
        assert p.value is not None
        self.addr: int = p.value
        self.nbytes: int = nbytes
        self._finalizer = weakref.finalize(self, _free_host, self.addr)

    @property
    def size(self) -> int:
        return self.nbytes

    @property
    def closed(self) -> bool:
        return not self._finalizer.alive

    def _array(self) -> Any:
        if self.closed:
            raise ValueError("HostBuffer is closed")
        arr = (C.c_uint8 * self.nbytes).from_address(self.addr)
        setattr(arr, "_owner", self)  # views keep the buffer alive
        return arr

    def view(self) -> memoryview:
        """A writable memoryview of the bytes."""
        return memoryview(self._array()).cast("B")

    def numpy(self, dtype: Any = "uint8", shape: Optional[Sequence[int]] = None) -> Any:
        import numpy as np
        a = np.frombuffer(self._array(), dtype=np.uint8).view(dtype)
        return a.reshape(shape) if shape is not None else a

    def torch(self, dtype: Any = None, shape: Optional[Sequence[int]] = None) -> Any:
        """A CPU tensor over the buffer (dtype defaults to torch.uint8)."""
        import torch
        t = torch.frombuffer(self._array(), dtype=torch.uint8)
        if dtype is not None:
            t = t.view(dtype)
        return t.view(*shape) if shape is not None else t

    def close(self) -> None:
        if self._finalizer.alive:
            self._finalizer.detach()
            check("ferry_host_free", C.c_void_p(self.addr))

    def __enter__(self) -> "HostBuffer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _contiguous(shape: Sequence[int], strides: Optional[Sequence[int]]) -> bool:
    """Whether element strides describe a C-contiguous layout (dimensions
    of size 1 may have any stride)."""
    if strides is None:
        return True
    want = 1
    for n, s in zip(reversed(list(shape)), reversed(list(strides))):
        if n != 1 and s != want:
            return False
        want *= n
    return True


def _count(shape: Sequence[int]) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


def _from_cuda_interface(obj: Any, iface: dict) -> Memory:
    shape = tuple(iface["shape"])
    itemsize = int(iface["typestr"][2:])
    strides = iface.get("strides")
    if strides is not None:
        strides = [s // itemsize for s in strides]
    if not _contiguous(shape, strides):
        raise ValueError("ferry registers contiguous memory: call .contiguous() first")
    ptr, readonly = iface["data"]
    dev = getattr(getattr(obj, "device", None), "index", None)
    return Memory(int(ptr or 0), _count(shape) * itemsize, CUDA, int(dev or 0), bool(readonly), keep=obj)


def _from_dlpack(obj: Any) -> Memory:
    if getattr(obj, "requires_grad", False):
        obj = obj.detach()  # same storage; dlpack refuses tensors that need grad
    capsule = obj.__dlpack__()
    p = _api.PyCapsule_GetPointer(capsule, b"dltensor")
    t = _DLTensor.from_address(p)  # DLManagedTensor starts with its DLTensor
    shape = [t.shape[i] for i in range(t.ndim)]
    strides = [t.strides[i] for i in range(t.ndim)] if t.strides else None
    if not _contiguous(shape, strides):
        raise ValueError("ferry registers contiguous memory: call .contiguous() first")
    itemsize = (t.dtype.bits * t.dtype.lanes + 7) // 8
    kind = t.device.device_type
    if kind in (_DL_CPU, _DL_CUDA_HOST):
        device = CPU
    elif kind == _DL_CUDA:
        device = CUDA
    else:
        raise ValueError("ferry registers CPU or CUDA memory; this object lives on DLPack device %d" % kind)
    # The capsule owns the export: its destructor runs the producer's
    # deleter once ferry lets go of it.
    return Memory((t.data or 0) + t.byte_offset, _count(shape) * itemsize, device, t.device.device_id,
                  False, keep=(obj, capsule))


def _from_buffer(obj: Any, writable: bool) -> Memory:
    b = _PyBuffer()
    flags = _PyBUF_C_CONTIGUOUS | (_PyBUF_WRITABLE if writable else 0)
    try:
        _api.PyObject_GetBuffer(obj, C.byref(b), flags)
    except BufferError as e:
        raise ValueError("ferry needs a C-contiguous%s buffer: %s" % (" writable" if writable else "", e)) from e
    return Memory(b.buf or 0, b.len, CPU, 0, bool(b.readonly), keep=obj, pybuf=b)


def as_memory(obj: Any, writable: bool = False) -> Memory:
    """The contiguous range behind obj, exported for as long as the
    returned Memory lives (see the module doc for what obj may be). A
    TypeError names what was given when it is none of those."""
    if isinstance(obj, HostBuffer):
        if obj.closed:
            raise ValueError("HostBuffer is closed")
        return Memory(obj.addr, obj.nbytes, CPU, 0, False, keep=obj)
    if isinstance(obj, RawMemory):
        return Memory(obj.addr, obj.nbytes, obj.device, obj.device_id, False, keep=obj)
    iface = None
    try:
        iface = obj.__cuda_array_interface__
    except (AttributeError, RuntimeError):
        iface = None
    if iface is not None:
        return _from_cuda_interface(obj, iface)
    if hasattr(obj, "__dlpack__") and not isinstance(obj, (bytes, bytearray, memoryview)):
        try:
            return _from_dlpack(obj)
        except BufferError:
            pass  # e.g. a read-only numpy array: the buffer protocol serves it
    try:
        memoryview(obj)
    except TypeError:
        raise TypeError(
            "ferry cannot register %s: pass an object with the buffer protocol, __dlpack__ or "
            "__cuda_array_interface__ (bytearray, numpy array, torch tensor), a ferry.HostBuffer, "
            "or a ferry.RawMemory(addr, nbytes) for a raw pointer" % type(obj).__name__) from None
    return _from_buffer(obj, writable)
