"""ferry: the RDMA transfer engine from Python, over libferry's C ABI.

    import ferry

    with ferry.Engine("shm", nics=2) as target, ferry.Engine("shm", nics=2) as writer:
        dst = ferry.HostBuffer(1 << 20)
        src = ferry.HostBuffer(1 << 20)
        region = target.register(dst, remote_write=True)
        text = region.descriptor_hex()          # send to the writer out of band
        landed = target.imm_counter(42)
        source = writer.register(src)
        with ferry.Descriptor.from_hex(text) as remote, ferry.Transfer() as t:
            writer.write(source, remote, length=1 << 20, imm=42, transfer=t)
            t.wait()
        landed.wait(writer.nics())              # one immediate per NIC: the bytes are there

Every failing call raises FerryError (or a subclass per C error code) with
the library's message. Handles are released by close() or by leaving a
with block; engines close their regions and counters with them. The library
is found through FERRY_LIBRARY, else the linker's search for libferry.so.1
(make install puts it under PREFIX/lib).
"""

import ctypes as C

from . import _abi

__all__ = [
    "FerryError", "ClosedError", "TimeoutError_", "UnknownTransportError", "NotSupportedError",
    "OutOfBoundsError", "Engine", "HostBuffer", "Region", "Descriptor", "Transfer", "ImmCounter",
    "transports", "version",
]

_lib = None


def _library():
    global _lib
    if _lib is None:
        _lib = _abi.load()
    return _lib


class FerryError(Exception):
    """A libferry call failed: code is the FERRY_E_* value, name its name."""

    def __init__(self, func, code, message):
        self.func, self.code, self.message = func, code, message
        self.name = _library().ferry_strerror(code).decode()
        super().__init__("%s: %s: %s" % (func, self.name, message))


class ClosedError(FerryError):
    pass


class TimeoutError_(FerryError):
    pass


class UnknownTransportError(FerryError):
    pass


class NotSupportedError(FerryError):
    pass


class OutOfBoundsError(FerryError):
    pass


_by_code = {
    _abi.E_CLOSED: ClosedError,
    _abi.E_TIMEOUT: TimeoutError_,
    _abi.E_UNKNOWN_PROVIDER: UnknownTransportError,
    _abi.E_NOT_SUPPORTED: NotSupportedError,
    _abi.E_OUT_OF_BOUNDS: OutOfBoundsError,
}


def _check(func, *args):
    lib = _library()
    rc = getattr(lib, func)(*args)
    if rc != _abi.OK:
        buf = C.create_string_buffer(1024)
        lib.ferry_last_error(buf, len(buf))
        raise _by_code.get(rc, FerryError)(func, rc, buf.value.decode(errors="replace"))
    return rc


def _text(func, *args):
    """Calls a function that writes NUL-terminated text (buf, cap, *len)."""
    n = C.c_size_t(0)
    buf = C.create_string_buffer(4096)
    try:
        _check(func, *args, buf, len(buf), C.byref(n))
    except FerryError as e:
        if e.code != _abi.E_BUFFER_TOO_SMALL:
            raise
        buf = C.create_string_buffer(n.value + 1)
        _check(func, *args, buf, len(buf), C.byref(n))
    return buf.value.decode()


def version():
    """The library's version text, "1.1.0"."""
    return _library().ferry_version_string().decode()


def transports():
    """Every transport name the library knows, mapped to its provider."""
    out = {}
    for line in _text("ferry_transports").splitlines():
        name, provider = line.split("\t")
        out[name] = provider
    return out


class _Handle:
    _free = None

    def __init__(self, h):
        self._h = h

    @property
    def handle(self):
        if self._h is None:
            raise ValueError("%s is closed" % type(self).__name__)
        return self._h

    def close(self):
        if self._h is not None:
            h, self._h = self._h, None
            _check(self._free, h)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class HostBuffer:
    """Page-aligned host memory from ferry_host_alloc (never Python's heap:
    a NIC may write it). view() is a writable memoryview of it."""

    def __init__(self, size):
        self.size = size
        p = C.c_void_p()
        _check("ferry_host_alloc", size, C.byref(p))
        self.addr = p.value

    def view(self):
        return memoryview((C.c_char * self.size).from_address(self.addr)).cast("B")

    def close(self):
        if self.addr:
            a, self.addr = self.addr, None
            _check("ferry_host_free", C.c_void_p(a))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Descriptor(_Handle):
    """What a peer needs to write into a region; travels as hex text."""

    _free = "ferry_descriptor_free"

    @classmethod
    def from_hex(cls, text):
        h = C.c_uint64()
        _check("ferry_descriptor_from_hex", text.encode(), C.byref(h))
        return cls(h.value)

    def hex(self):
        return _text("ferry_descriptor_to_hex", self.handle)


class Region(_Handle):
    """Memory registered with an engine."""

    _free = "ferry_unregister"

    def descriptor(self):
        h = C.c_uint64()
        _check("ferry_region_descriptor", self.handle, C.byref(h))
        return Descriptor(h.value)

    def descriptor_hex(self):
        with self.descriptor() as d:
            return d.hex()


class Transfer(_Handle):
    """A reusable wait handle for one transfer at a time."""

    _free = "ferry_transfer_free"

    def __init__(self):
        h = C.c_uint64()
        _check("ferry_transfer_new", C.byref(h))
        super().__init__(h.value)

    def wait(self, timeout_ms=30000):
        _check("ferry_transfer_wait", self.handle, timeout_ms)


class ImmCounter(_Handle):
    """A credit counter of one immediate value: wait(n) takes n arrivals,
    including ones that came before the call."""

    _free = "ferry_imm_counter_free"

    def wait(self, n, timeout_ms=30000):
        _check("ferry_imm_counter_wait", self.handle, n, timeout_ms)

    def count(self):
        v = C.c_int64()
        _check("ferry_imm_counter_count", self.handle, C.byref(v))
        return v.value


class Engine(_Handle):
    """A TransferEngine over one transport ("mem", "shm", "tcp;ofi_rxm",
    "efa", "verbs" or "auto")."""

    _free = None

    def __init__(self, transport, nics=1, node=None, timeout_ms=30000, log_level=_abi.LOG_DEFAULT):
        cfg = _abi.Config()
        _library().ferry_config_init_size(C.byref(cfg), C.sizeof(cfg))
        cfg.transport = transport.encode()
        cfg.node = node.encode() if node else None
        cfg.nics = nics
        cfg.log_level = log_level
        h = C.c_uint64()
        _check("ferry_engine_open", C.byref(cfg), timeout_ms, C.byref(h))
        super().__init__(h.value)
        self._timeout_ms = timeout_ms

    def close(self, timeout_ms=None):
        if self._h is not None:
            h, self._h = self._h, None
            _check("ferry_engine_close", h, self._timeout_ms if timeout_ms is None else timeout_ms)

    def nics(self):
        n = C.c_int32()
        _check("ferry_engine_nics", self.handle, C.byref(n))
        return n.value

    def info(self):
        """The engine's JSON description as a dict."""
        import json
        return json.loads(_text("ferry_engine_info", self.handle))

    def stats(self):
        s = _abi.Stats()
        _check("ferry_engine_stats", self.handle, C.byref(s))
        return {name: getattr(s, name) for name, _ in _abi.Stats._fields_}

    def register(self, buf, remote_write=False):
        access = _abi.ACCESS_REMOTE_WRITE if remote_write else _abi.ACCESS_LOCAL
        h = C.c_uint64()
        _check("ferry_register", self.handle, C.c_void_p(buf.addr), buf.size, access, C.byref(h))
        return Region(h.value)

    def imm_counter(self, imm):
        h = C.c_uint64()
        _check("ferry_imm_counter_new", self.handle, imm, C.byref(h))
        return ImmCounter(h.value)

    def write(self, src, dst, length, src_offset=0, dst_offset=0, imm=None, transfer=None):
        """One write of length bytes; transfer (a Transfer) learns its end."""
        w = _abi.SingleWrite(src=src.handle, src_offset=src_offset, length=length, dst=dst.handle,
                             dst_offset=dst_offset, imm=imm or 0, has_imm=imm is not None)
        _check("ferry_submit_single", self.handle, C.byref(w), transfer.handle if transfer else 0)

    def write_pages(self, src, dst, src_pages, dst_pages, length, src_stride=None, dst_stride=None,
                    imm=None, transfer=None):
        """Independent page writes: page i from src_pages[i] to dst_pages[i]."""
        if len(src_pages) != len(dst_pages):
            raise ValueError("src_pages and dst_pages differ in length")
        n = len(src_pages)
        sp, dp = (C.c_uint32 * n)(*src_pages), (C.c_uint32 * n)(*dst_pages)
        w = _abi.PagedWrite(src=src.handle, src_pages=sp, src_stride=src_stride or length, dst=dst.handle,
                            dst_pages=dp, dst_stride=dst_stride or length, pages=n, length=length,
                            imm=imm or 0, has_imm=imm is not None)
        _check("ferry_submit_paged", self.handle, C.byref(w), transfer.handle if transfer else 0)
