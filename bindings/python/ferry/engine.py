"""The TransferEngine: memory registration, descriptors, writes, immediate
counters, completions, the send/receive side channel and peer watching."""

from __future__ import annotations

import ctypes as C
import json
import sys
import threading
import traceback
import weakref
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Union

from . import _abi
from ._handles import Handle
from ._lib_handle import binary, check, has, lib, ms, raise_for, text
from ._memory import CUDA, Memory, as_memory
from .errors import NotSupportedError, closed

# Callback trampolines that a library may still call after their handle
# was freed (ferry.h: transfers already submitted still call them) are
# kept for the life of the process: a few small objects per program.
_immortal: List[Any] = []
_immortal_lock = threading.Lock()


def _report(where: str) -> None:
    # An exception in a callback cannot reach the code that registered it:
    # print it, as threading does for a thread's uncaught exception.
    print("ferry: exception in %s callback:" % where, file=sys.stderr)
    traceback.print_exc()


class Descriptor(Handle):
    """What a peer needs to write into a region: bytes() or hex() travel
    between processes; from_bytes / from_hex turn them back into a handle.
    Belongs to no engine; immutable."""

    _free_ = "ferry_descriptor_free"

    @classmethod
    def from_hex(cls, hex_text: str) -> "Descriptor":
        h = C.c_uint64()
        check("ferry_descriptor_from_hex", hex_text.encode(), C.byref(h))
        return cls(h.value)

    @classmethod
    def from_bytes(cls, data: bytes) -> "Descriptor":
        buf = (C.c_uint8 * max(len(data), 1)).from_buffer_copy(data or b"\0")
        h = C.c_uint64()
        check("ferry_descriptor_from_bytes", buf, len(data), C.byref(h))
        return cls(h.value)

    def hex(self) -> str:
        return text("ferry_descriptor_to_hex", self.handle)

    def bytes(self) -> bytes:
        return binary("ferry_descriptor_to_bytes", self.handle)

    def info(self) -> Tuple[int, int, int]:
        """(base address in its owner, length, NIC count)."""
        base, length, nics = C.c_uint64(), C.c_uint64(), C.c_int32()
        check("ferry_descriptor_info", self.handle, C.byref(base), C.byref(length), C.byref(nics))
        return base.value, length.value, nics.value

    @property
    def nbytes(self) -> int:
        return self.info()[1]


def _unregister(func: str, h: int, mem: Memory) -> None:
    try:
        lib().ferry_unregister(h)
    except Exception:
        pass
    mem.release()


class Region(Handle):
    """Memory registered with an engine. The object it came from stays
    exported (a bytearray cannot resize, a tensor's storage stays alive)
    until close(), or until its engine closes."""

    _free_ = "ferry_unregister"

    def __init__(self, h: int, mem: Memory, remote_write: bool, remote_read: bool = False) -> None:
        super().__init__(h, mem, release=_unregister)
        self.memory = mem
        self.remote_write = remote_write
        self.remote_read = remote_read

    @property
    def addr(self) -> int:
        return self.memory.addr

    @property
    def nbytes(self) -> int:
        return self.memory.nbytes

    def descriptor(self) -> Descriptor:
        """A new descriptor of this region (remote_write or remote_read
        regions only)."""
        h = C.c_uint64()
        check("ferry_region_descriptor", self.handle, C.byref(h))
        return Descriptor(h.value)

    def descriptor_hex(self) -> str:
        with self.descriptor() as d:
            return d.hex()

    def descriptor_bytes(self) -> bytes:
        with self.descriptor() as d:
            return d.bytes()

    def close(self) -> None:
        if self._h is not None:
            h, self._h = self._h, None
            self._finalizer.detach()
            try:
                check(self._free_, h)
            finally:
                self.memory.release()


class Transfer(Handle):
    """A reusable wait handle for one transfer at a time."""

    _free_ = "ferry_transfer_free"

    def __init__(self) -> None:
        h = C.c_uint64()
        check("ferry_transfer_new", C.byref(h))
        super().__init__(h.value)

    def wait(self, timeout: float = 30.0) -> None:
        """Returns when the transfer ended well; raises its error, or
        FerryTimeoutError (the transfer still runs; wait again)."""
        check("ferry_transfer_wait", self.handle, ms(timeout))


class Counter(Handle):
    """A callback-free count of finished transfers, shared by any number
    of them: done counts every end, errors the failed ones."""

    _free_ = "ferry_counter_free"

    def __init__(self) -> None:
        h = C.c_uint64()
        check("ferry_counter_new", C.byref(h))
        super().__init__(h.value)

    def read(self) -> Tuple[int, int]:
        """(done, errors) now; never blocks."""
        d, e = C.c_int64(), C.c_int64()
        check("ferry_counter_read", self.handle, C.byref(d), C.byref(e))
        return d.value, e.value

    def wait(self, n: int, timeout: float = 30.0) -> None:
        """Waits until done >= n."""
        check("ferry_counter_wait", self.handle, n, ms(timeout))


class Callback(Handle):
    """fn(code) called on the engine's dispatcher thread when each transfer
    submitted with this completion ends (code 0, or a FERRY_E_* value;
    errors.error_for(code) is its exception class). Keep fn quick."""

    _free_ = "ferry_callback_free"

    def __init__(self, fn: Callable[[int], Any]) -> None:
        def call(_ud: Any, code: int) -> None:
            try:
                fn(code)
            except Exception:
                _report("completion")
        tramp = _abi.DONE_FN(call)
        with _immortal_lock:
            _immortal.append(tramp)
        h = C.c_uint64()
        check("ferry_callback_new", tramp, None, C.byref(h))
        super().__init__(h.value)


Completion = Union[Transfer, Counter, Callback, None]

# A notification to attach to a request: (mailbox bytes from the target's
# Lease.mailbox(), payload: bytes or any buffer, at most MAX_NOTIFY_PAYLOAD).
Notify = Tuple[bytes, Any]


def _completion(c: Completion) -> int:
    return 0 if c is None else c.handle


class ImmCounter(Handle):
    """A credit counter of one immediate value: wait(n) takes n arrivals,
    including ones that came before the call."""

    _free_ = "ferry_imm_counter_free"

    def wait(self, n: int, timeout: float = 30.0) -> None:
        check("ferry_imm_counter_wait", self.handle, n, ms(timeout))

    def count(self) -> int:
        """Arrivals minus credits taken."""
        v = C.c_int64()
        check("ferry_imm_counter_count", self.handle, C.byref(v))
        return v.value


class Lease(Handle):
    """A run of immediate values leased for one request (Engine.lease_imms),
    with a mailbox for its notification. close() (or retire()) retires it:
    its counters are removed and immediates or notifications that arrive
    for it later are dropped and counted (Engine.drops), never credited to
    a later lease."""

    _free_ = "ferry_lease_retire"

    def __init__(self, h: int, first: int, n: int) -> None:
        super().__init__(h)
        self.first = first
        self.n = n

    def value(self, i: int) -> int:
        """The i-th value (0 <= i < n): writes carry it as their imm."""
        if not 0 <= i < self.n:
            raise IndexError("lease value %d of %d" % (i, self.n))
        return self.first + i

    def retire(self) -> None:
        self.close()

    def mailbox(self) -> bytes:
        """The lease's mailbox (allocated at the first call), for the
        initiator's Engine.notify."""
        return binary("ferry_lease_mailbox", self.handle)

    def wait_notification(self, timeout: float = 30.0) -> Tuple[bytes, int]:
        """The next notification's payload and its arrival number at this
        engine; FerryTimeoutError when none came within timeout. The
        mailbox queues MAILBOX_DEPTH notifications (library 1.6), returned
        in the order they were sent; notifications that were lost (a
        second engine sending to the same mailbox) raise
        NotificationsLostError once, in their place."""
        buf = (C.c_uint8 * _abi.MAX_NOTIFY_PAYLOAD)()
        n, seq = C.c_size_t(0), C.c_uint64(0)
        check("ferry_lease_wait_notification", self.handle, ms(timeout), buf, len(buf), C.byref(n), C.byref(seq))
        return bytes(buf[: n.value]), seq.value


_POLL = {"adaptive": _abi.POLL_ADAPTIVE, "spin": _abi.POLL_SPIN}
_LOG = {"default": _abi.LOG_DEFAULT, "debug": _abi.LOG_DEBUG, "info": _abi.LOG_INFO, "warn": _abi.LOG_WARN,
        "error": _abi.LOG_ERROR, "none": _abi.LOG_NONE}


def _route(route: Optional[Tuple[str, int]]) -> Any:
    """("sharded", n) | ("pinned", nic) | ("shard_bytes", 0) | None."""
    if route is None:
        return None
    kinds = {"sharded": _abi.ROUTE_SHARDED, "pinned": _abi.ROUTE_PINNED, "shard_bytes": _abi.ROUTE_SHARD_BYTES}
    kind, value = route
    if kind not in kinds:
        raise ValueError("route kind must be one of %s, got %r" % (sorted(kinds), kind))
    return _abi.Route(kinds[kind], value)


def _opt_ms(seconds: Optional[float]) -> int:
    """None: the library default (0); negative: none (-1); else ms >= 1."""
    if seconds is None:
        return 0
    if seconds < 0:
        return -1
    return max(1, int(round(seconds * 1000)))


def _close_engine(func: str, h: int, timeout_ms: int, keep: List[Any]) -> None:
    try:
        lib().ferry_engine_close(h, timeout_ms)
    except Exception:
        pass


class Engine(Handle):
    """A TransferEngine over one transport: "mem" (in-process), "shm",
    "tcp;ofi_rxm" (pin node="127.0.0.1" on loopback), "ipc", "efa",
    "verbs", or "auto" (EFA, then verbs, never a silent fallback).

    Durations are seconds. None keeps the library default; a negative
    request_timeout, liveness_interval or stuck_timeout turns that check
    off. close() (or leaving a with block, or the finaliser of a forgotten
    engine) closes its regions, counters and receives with it; no callback
    of the engine runs after close returns. Safe to share between threads.
    """

    _free_ = "ferry_engine_close"

    def __init__(self, transport: str = "auto", nics: int = 1, node: Optional[str] = None, *,
                 poll: str = "adaptive", queue_depth: int = 0, send_buffers: int = 0,
                 send_buffer_size: int = 0, handshake_timeout: Optional[float] = None,
                 log_level: str = "default", max_pending: int = 0,
                 request_timeout: Optional[float] = None, liveness_interval: Optional[float] = None,
                 stuck_timeout: Optional[float] = None, gpus: Sequence[int] = (), timeout: float = 30.0) -> None:
        if poll not in _POLL:
            raise ValueError("poll must be one of %s, got %r" % (sorted(_POLL), poll))
        if isinstance(log_level, str) and log_level not in _LOG:
            raise ValueError("log_level must be one of %s, got %r" % (sorted(_LOG), log_level))
        cfg = _abi.Config()
        lib().ferry_config_init_size(C.byref(cfg), C.sizeof(cfg))
        cfg.transport = transport.encode()
        cfg.node = node.encode() if node else None
        cfg.nics = nics
        cfg.poll = _POLL[poll]
        cfg.queue_depth = queue_depth
        cfg.send_buffers = send_buffers
        cfg.send_buffer_size = send_buffer_size
        cfg.handshake_timeout_ms = _opt_ms(handshake_timeout)
        cfg.log_level = _LOG[log_level] if isinstance(log_level, str) else int(log_level)
        cfg.max_pending = max_pending
        cfg.request_timeout_ms = _opt_ms(request_timeout)
        cfg.liveness_interval_ms = _opt_ms(liveness_interval)
        cfg.stuck_timeout_ms = _opt_ms(stuck_timeout)
        gpu_arr = (C.c_int32 * max(len(gpus), 1))(*gpus)
        if gpus:
            cfg.gpus = C.cast(gpu_arr, C.POINTER(C.c_int32))
            cfg.gpu_count = len(gpus)
        h = C.c_uint64()
        check("ferry_engine_open", C.byref(cfg), ms(timeout), C.byref(h))
        self._timeout_ms = ms(timeout)
        self.transport = transport
        # Trampolines the engine's dispatcher may call: alive until close
        # returned (the finaliser holds the list too).
        self._callbacks: List[Any] = []
        self._children: "weakref.WeakSet[Handle]" = weakref.WeakSet()
        self._lock = threading.Lock()
        super().__init__(h.value, self._timeout_ms, self._callbacks, release=_close_engine)

    def close(self, timeout: Optional[float] = None) -> None:
        """Closes the engine: work not yet posted fails, in-flight work
        drains for up to timeout seconds, every region is unregistered.
        Raises the drain's error (FerryTimeoutError, AbandonedError); the
        engine is closed either way."""
        with self._lock:
            if self._h is None:
                return
            h, self._h = self._h, None
            self._finalizer.detach()
            children = list(self._children)
        try:
            check(self._free_, h, self._timeout_ms if timeout is None else ms(timeout))
        finally:
            for c in children:
                c._forget()

    def _adopt(self, child: Handle) -> Any:
        self._children.add(child)
        return child

    # ------------------------------------------------------------ about

    def address(self) -> bytes:
        """The main address, binary: what peers send to and watch."""
        return binary("ferry_engine_address", self.handle)

    def address_hex(self) -> str:
        return text("ferry_engine_address_hex", self.handle)

    def nics(self) -> int:
        n = C.c_int32()
        check("ferry_engine_nics", self.handle, C.byref(n))
        return n.value

    def info(self) -> Dict[str, Any]:
        """The engine's JSON description (provider, transport, groups)."""
        return dict(json.loads(text("ferry_engine_info", self.handle)))

    def stats(self) -> Dict[str, int]:
        s = _abi.Stats()
        check("ferry_engine_stats", self.handle, C.byref(s))
        return {name: int(getattr(s, name)) for name, _ in _abi.Stats._fields_}

    # ----------------------------------------------------------- memory

    def register(self, obj: Any, remote_write: bool = False, remote_read: bool = False) -> Region:
        """Registers obj's memory without copying it: a HostBuffer, anything
        with the buffer protocol, __dlpack__ or __cuda_array_interface__
        (numpy arrays, torch tensors; CUDA memory needs a library with GPU
        registration). remote_write=True lets peers write it, remote_read=True
        (library 1.5) lets them read it with Engine.read (either gives it a
        descriptor; remote write does not imply remote read). The object
        stays exported until the region closes."""
        mem = as_memory(obj, writable=remote_write)
        try:
            if remote_write and mem.readonly:
                raise ValueError("a remote_write region needs writable memory")
            if remote_read:
                _need_reads("remote_read registration")
            h = C.c_uint64()
            access = _abi.ACCESS_REMOTE_WRITE if remote_write else _abi.ACCESS_LOCAL
            if remote_read:
                access |= _abi.ACCESS_REMOTE_READ
            if mem.device == CUDA:
                self._register_gpu(mem, access, h)
            else:
                check("ferry_register", self.handle, C.c_void_p(mem.addr), mem.nbytes, access, C.byref(h))
        except BaseException:
            mem.release()
            raise
        return self._adopt(Region(h.value, mem, remote_write, remote_read))

    def _register_gpu(self, mem: Memory, access: int, out: Any) -> None:
        if not has("ferry_register_gpu"):
            raise NotSupportedError("ferry_register_gpu", _abi.E_NOT_SUPPORTED, "FERRY_E_NOT_SUPPORTED",
                                    "this libferry (%s) cannot register CUDA memory" %
                                    lib().ferry_version_string().decode())
        path = C.c_int32()
        check("ferry_register_gpu", self.handle, mem.addr, mem.nbytes, access, C.byref(out), C.byref(path))

    # ------------------------------------------------------- reads (1.5)

    def read(self, dst: Region, src: Descriptor, length: Optional[int] = None, *, dst_offset: int = 0,
             src_offset: int = 0, route: Optional[Tuple[str, int]] = None, done: Completion = None) -> None:
        """RDMA READ: length bytes (default: the rest of dst) from the peer's
        region src (registered there with remote_read=True) at src_offset
        into the local region dst at dst_offset. No immediate travels: the
        peer sees nothing, and done says the bytes are in dst. A region not
        registered readable fails it with NotReadableError where the
        transport checks (mem, ipc, verbs)."""
        _need_reads("read")
        if length is None:
            length = dst.nbytes - dst_offset
        r = _route(route)
        req = _abi.SingleRead(dst=dst.handle, dst_offset=dst_offset, length=length, src=src.handle,
                              src_offset=src_offset, route=r if r is not None else _abi.Route())
        check("ferry_submit_read", self.handle, C.byref(req), _completion(done))

    def read_pages(self, dst: Region, src: Descriptor, dst_pages: Sequence[int], src_pages: Sequence[int],
                   length: int, *, dst_stride: Optional[int] = None, src_stride: Optional[int] = None,
                   dst_offset: int = 0, src_offset: int = 0, done: Completion = None) -> None:
        """Independent page reads: page i from src_offset + src_stride *
        src_pages[i] of src into dst_offset + dst_stride * dst_pages[i] of
        dst, length bytes each (strides default to length)."""
        _need_reads("read_pages")
        if len(src_pages) != len(dst_pages):
            raise ValueError("src_pages and dst_pages differ in length: %d != %d" % (len(src_pages), len(dst_pages)))
        n = len(src_pages)
        sp, dp = (C.c_uint32 * max(n, 1))(*src_pages), (C.c_uint32 * max(n, 1))(*dst_pages)
        req = _abi.PagedRead(dst=dst.handle, dst_pages=dp, dst_stride=length if dst_stride is None else dst_stride,
                             dst_offset=dst_offset, src=src.handle, src_pages=sp,
                             src_stride=length if src_stride is None else src_stride, src_offset=src_offset,
                             pages=n, length=length)
        check("ferry_submit_paged_read", self.handle, C.byref(req), _completion(done))

    def scatter_read(self, dst: Region, sources: Iterable[Tuple[Descriptor, int, int, int]], *,
                     route: Optional[Tuple[str, int]] = None, done: Completion = None) -> None:
        """Ranges of one or more peers' regions into dst: sources are (src,
        length, src_offset, dst_offset). route spreads them over the NICs
        as scatter does (("sharded", 0), ("shard_bytes", 0), ("pinned", nic))."""
        _need_reads("scatter_read")
        ss = list(sources)
        arr = (_abi.ScatterSource * max(len(ss), 1))()
        for i, (d, length, so, do) in enumerate(ss):
            arr[i] = _abi.ScatterSource(d.handle, length, so, do)
        r = _route(route)
        req = _abi.ScatterRead(dst=dst.handle, sources=arr, count=len(ss), route=r if r is not None else _abi.Route())
        check("ferry_submit_scatter_read", self.handle, C.byref(req), _completion(done))

    # ------------------------------------------------------------ writes

    def write(self, src: Region, dst: Descriptor, length: Optional[int] = None, *, src_offset: int = 0,
              dst_offset: int = 0, imm: Optional[int] = None, route: Optional[Tuple[str, int]] = None,
              notify: Optional[Notify] = None, done: Completion = None) -> None:
        """One write of length bytes (default: the rest of src) from src at
        src_offset to dst at dst_offset. Sharded over n NICs the receiver
        sees n immediates (one per shard); route=("pinned", nic) posts one.
        notify=(mailbox, payload) attaches a notification (library 1.6):
        the target's Lease.wait_notification hands it over once every byte
        of the write is in place there, over every transport and NIC."""
        if length is None:
            length = src.nbytes - src_offset
        r = _route(route)
        w = _abi.SingleWrite(src=src.handle, src_offset=src_offset, length=length, dst=dst.handle,
                             dst_offset=dst_offset, imm=imm or 0, has_imm=imm is not None,
                             route=r if r is not None else _abi.Route())
        if notify is not None:
            self._submit_notified(_abi.SHAPE_SINGLE, w, [notify], done)
            return
        check("ferry_submit_single", self.handle, C.byref(w), _completion(done))

    def _submit_notified(self, shape: int, req: Any, notes: Sequence[Notify], done: Completion) -> None:
        """ferry_submit_notified: req with notes, (mailbox, payload) pairs
        (the library copies both before it returns)."""
        if not has("ferry_submit_notified"):
            raise NotSupportedError("ferry_submit_notified", _abi.E_NOT_SUPPORTED, "FERRY_E_NOT_SUPPORTED",
                                    "libferry %s cannot attach notifications (1.6 or later needed)" %
                                    lib().ferry_version_string().decode())
        arr = (_abi.Notification * max(len(notes), 1))()
        keep: List[Any] = []
        try:
            for i, (box, payload) in enumerate(notes):
                b = (C.c_uint8 * max(len(box), 1)).from_buffer_copy(bytes(box) or b"\0")
                mem = as_memory(payload)
                keep.append(mem)
                arr[i] = _abi.Notification(C.cast(b, C.POINTER(C.c_uint8)), len(box), C.c_void_p(mem.addr),
                                           mem.nbytes)
                keep.append(b)
            check("ferry_submit_notified", self.handle, shape, C.byref(req), arr, len(notes), _completion(done))
        finally:
            for k in keep:
                if isinstance(k, Memory):
                    k.release()

    def write_pages(self, src: Region, dst: Descriptor, src_pages: Sequence[int], dst_pages: Sequence[int],
                    length: int, *, src_stride: Optional[int] = None, dst_stride: Optional[int] = None,
                    src_offset: int = 0, dst_offset: int = 0, imm: Optional[int] = None,
                    notify: Optional[Notify] = None, done: Completion = None) -> None:
        """Independent page writes: page i from src_offset + src_stride *
        src_pages[i] to dst_offset + dst_stride * dst_pages[i], length bytes
        each (strides default to length); one immediate per page.
        notify=(mailbox, payload) as for write."""
        if len(src_pages) != len(dst_pages):
            raise ValueError("src_pages and dst_pages differ in length: %d != %d" % (len(src_pages), len(dst_pages)))
        n = len(src_pages)
        sp, dp = (C.c_uint32 * max(n, 1))(*src_pages), (C.c_uint32 * max(n, 1))(*dst_pages)
        w = _abi.PagedWrite(src=src.handle, src_pages=sp, src_stride=length if src_stride is None else src_stride,
                            src_offset=src_offset, dst=dst.handle, dst_pages=dp,
                            dst_stride=length if dst_stride is None else dst_stride, dst_offset=dst_offset,
                            pages=n, length=length, imm=imm or 0, has_imm=imm is not None)
        if notify is not None:
            self._submit_notified(_abi.SHAPE_PAGED, w, [notify], done)
            return
        check("ferry_submit_paged", self.handle, C.byref(w), _completion(done))

    def scatter(self, src: Region, targets: Iterable[Tuple[Descriptor, int, int, int]], *,
                imm: Optional[int] = None, route: Optional[Tuple[str, int]] = None,
                notify: Optional[Sequence[Notify]] = None, done: Completion = None) -> None:
        """Ranges of src to many peers: targets are (dst, length, src_offset,
        dst_offset). Each receiver sees one immediate per target naming it
        (times the NICs with route=("shard_bytes", 0)). notify, a list of
        (mailbox, payload) pairs (library 1.6), typically one per target
        peer: each is sent once every write of the scatter completed, so
        its peer finds all of its ranges in place when it arrives."""
        ts = list(targets)
        arr = (_abi.ScatterTarget * max(len(ts), 1))()
        for i, (d, length, so, do) in enumerate(ts):
            arr[i] = _abi.ScatterTarget(d.handle, length, so, do)
        r = _route(route)
        w = _abi.ScatterWrite(src=src.handle, targets=arr, count=len(ts), imm=imm or 0, has_imm=imm is not None,
                              route=r if r is not None else _abi.Route())
        if notify is not None:
            self._submit_notified(_abi.SHAPE_SCATTER, w, list(notify), done)
            return
        check("ferry_submit_scatter", self.handle, C.byref(w), _completion(done))

    def write_imm(self, imm: int, dst: Descriptor, *, route: Optional[Tuple[str, int]] = None,
                  done: Completion = None) -> None:
        """A zero-byte write carrying only imm: dst's engine sees one immediate."""
        r = _route(route)
        check("ferry_submit_imm", self.handle, imm, dst.handle, C.byref(r) if r is not None else None,
              _completion(done))

    def barrier(self, imm: int, dsts: Sequence[Descriptor], *, route: Optional[Tuple[str, int]] = None,
                done: Completion = None) -> None:
        """One zero-byte write with imm to each destination."""
        arr = (C.c_uint64 * max(len(dsts), 1))(*[d.handle for d in dsts])
        r = _route(route)
        check("ferry_submit_barrier", self.handle, imm, arr, len(dsts), C.byref(r) if r is not None else None,
              _completion(done))

    # -------------------------------------------------------- immediates

    def imm_counter(self, imm: int) -> ImmCounter:
        """Makes imm a credit counter (replacing any counter of imm)."""
        h = C.c_uint64()
        check("ferry_imm_counter_new", self.handle, imm, C.byref(h))
        return self._adopt(ImmCounter(h.value))

    def expect_imm(self, imm: int, expected: int, fn: Callable[[int], bool]) -> int:
        """Calls fn(imm) on the dispatcher thread each time `expected`
        immediates of imm arrived; fn returns True to keep counting. Returns
        what a replaced counter of imm had counted."""
        def call(_ud: Any, value: int) -> int:
            try:
                return 1 if fn(value) else 0
            except Exception:
                _report("expect_imm")
                return 0
        tramp = _abi.EXPECT_FN(call)
        prev = C.c_int64()
        with self._lock:
            check("ferry_expect_imm", self.handle, imm, expected, tramp, None, C.byref(prev))
            self._callbacks.append(tramp)
        return prev.value

    def remove_imm(self, imm: int) -> int:
        """Removes the counter of imm; returns what it had counted."""
        prev = C.c_int64()
        check("ferry_remove_imm", self.handle, imm, C.byref(prev))
        return prev.value

    def on_imm(self, fn: Callable[[int], Any]) -> None:
        """fn(imm) for every immediate no counter claims, until close."""
        def call(_ud: Any, value: int) -> None:
            try:
                fn(value)
            except Exception:
                _report("on_imm")
        tramp = _abi.IMM_FN(call)
        with self._lock:
            check("ferry_on_imm", self.handle, tramp, None)
            self._callbacks.append(tramp)

    # ------------------------------------------------------------- peers

    def on_peer_lost(self, fn: Callable[[bytes], Any]) -> None:
        """fn(address) each time a peer is declared lost, until close."""
        def call(_ud: Any, addr: Any, n: int) -> None:
            try:
                fn(C.string_at(addr, n))
            except Exception:
                _report("on_peer_lost")
        tramp = _abi.PEER_LOST_FN(call)
        with self._lock:
            check("ferry_on_peer_lost", self.handle, tramp, None)
            self._callbacks.append(tramp)

    def watch_peer(self, address: bytes) -> None:
        """Checks the liveness of the peer at address even when nothing is
        sent to it, so waits on its immediates learn that it died."""
        a = (C.c_uint8 * len(address)).from_buffer_copy(address)
        check("ferry_watch_peer", self.handle, a, len(address))

    def connect(self, *addresses: bytes, timeout: float = 30.0) -> None:
        """Warms peers up before the first transfer: resolves each address
        (a main address or a descriptor's NIC address) on every NIC and
        completes the provider's connection setup. Raises PeerLostError (a
        ConnectionError) for a peer that is not there, FerryTimeoutError
        when timeout passed first. Connecting again changes nothing."""
        if not has("ferry_connect"):
            raise NotSupportedError("ferry_connect", _abi.E_NOT_SUPPORTED, "FERRY_E_NOT_SUPPORTED",
                                    "libferry %s has no connect (1.4 or later needed)" %
                                    lib().ferry_version_string().decode())
        bufs = [(C.c_uint8 * len(a)).from_buffer_copy(a) for a in addresses]
        ptrs = (C.POINTER(C.c_uint8) * len(bufs))(*[C.cast(b, C.POINTER(C.c_uint8)) for b in bufs])
        lens = (C.c_size_t * len(bufs))(*[len(a) for a in addresses])
        check("ferry_connect", self.handle, ptrs, lens, len(bufs), ms(timeout))

    def peer_status(self, address: bytes) -> None:
        """Returns while the peer is not known to be lost; raises
        PeerLostError (a ConnectionError) with the reason once it is."""
        a = (C.c_uint8 * len(address)).from_buffer_copy(address)
        check("ferry_peer_status", self.handle, a, len(address))

    # ------------------------------------------------------ send / recv

    # ------------------------------------------ leases and notifications

    def lease_imms(self, n: int = 1) -> Lease:
        """Leases n consecutive immediate values (from LEASE_BASE up) for
        one request; see Lease."""
        h, first = C.c_uint64(), C.c_uint32()
        check("ferry_lease_imms", self.handle, n, C.byref(h), C.byref(first))
        return self._adopt(Lease(h.value, first.value, n))

    def notify(self, mailbox: bytes, payload: Any = b"", *, done: Completion = None) -> None:
        """Sends payload (at most MAX_NOTIFY_PAYLOAD bytes, else
        NotifyTooLargeError) to a lease's mailbox at its target, which hands
        it over only after every write this engine reported complete before
        the call is visible there."""
        box = (C.c_uint8 * len(mailbox)).from_buffer_copy(mailbox)
        mem = as_memory(payload)
        try:
            check("ferry_notify", self.handle, box, len(mailbox), C.c_void_p(mem.addr), mem.nbytes,
                  _completion(done))
        finally:
            mem.release()

    def registration_stats(self) -> Dict[str, Any]:
        """The engine's registrations (library 1.6): live region handles,
        the provider registrations behind them (fewer when handles share
        one), the range cache's hits and misses, and where each group
        registers ("on_worker", "nics_in_parallel" or "beside")."""
        if not has("ferry_engine_registration_stats"):
            raise NotSupportedError("ferry_engine_registration_stats", _abi.E_NOT_SUPPORTED,
                                    "FERRY_E_NOT_SUPPORTED", "libferry %s has no registration stats (1.6 or later "
                                    "needed)" % lib().ferry_version_string().decode())
        s = _abi.RegistrationStats(struct_size=C.sizeof(_abi.RegistrationStats))
        check("ferry_engine_registration_stats", self.handle, C.byref(s))
        names = {_abi.REGISTER_ON_WORKER: "on_worker", _abi.REGISTER_NICS_IN_PARALLEL: "nics_in_parallel",
                 _abi.REGISTER_BESIDE: "beside"}
        modes = [names.get(s.modes[i], str(s.modes[i])) for i in range(min(s.groups, len(s.modes)))]
        return {"handles": s.handles, "registrations": s.registrations, "hits": s.hits, "misses": s.misses,
                "modes": modes}

    def drops(self) -> Dict[str, int]:
        """Immediates dropped for values not leased (a retired request's
        late writes) and notifications lost at this engine (each is also
        raised by Lease.wait_notification as NotificationsLostError)."""
        imms, notes = C.c_uint64(), C.c_uint64()
        check("ferry_engine_drops", self.handle, C.byref(imms), C.byref(notes))
        return {"imms_dropped": imms.value, "notifications_dropped": notes.value}

    def send(self, address: bytes, data: Any, *, done: Completion = None, timeout: float = 30.0) -> None:
        """Sends a small message (at most the send buffer size) to the
        engine at address; waits up to timeout for a free send buffer."""
        a = (C.c_uint8 * len(address)).from_buffer_copy(address)
        mem = as_memory(data)
        try:
            check("ferry_send", self.handle, a, len(address), C.c_void_p(mem.addr), mem.nbytes,
                  _completion(done), ms(timeout))
        finally:
            mem.release()

    def recv_bouncing(self, count: int, size: int, on_data: Callable[[bytes], Any],
                      on_error: Optional[Callable[[int, str], Any]] = None) -> None:
        """Posts count receives of size bytes into engine-owned buffers;
        on_data(message) runs on the dispatcher thread for each message,
        on_error(code, text) for failures (FERRY_E_CLOSED at close)."""
        def data_cb(_ud: Any, p: Any, n: int) -> None:
            try:
                on_data(C.string_at(p, n))
            except Exception:
                _report("recv")

        def err_cb(_ud: Any, code: int, msg: Optional[bytes]) -> None:
            if on_error is None:
                return
            try:
                on_error(code, (msg or b"").decode(errors="replace"))
            except Exception:
                _report("recv error")
        t1, t2 = _abi.RECV_FN(data_cb), _abi.ERROR_FN(err_cb)
        with self._lock:
            check("ferry_recv_bouncing", self.handle, count, size, t1, t2, None)
            self._callbacks.extend([t1, t2])


def live_handles() -> int:
    """Live library handles of every kind in this process (a leak check:
    back to its starting value once everything made was closed)."""
    n = C.c_uint64()
    check("ferry_live_handles", C.byref(n))
    return n.value


def version() -> str:
    """The library's version text ("1.2.0")."""
    return str(lib().ferry_version_string().decode())


def abi_version() -> Tuple[int, int, int]:
    """The library's ABI version (major, minor, patch): 1.2 has the
    all-to-all and GPU registration, 1.3 the directory, 1.4 connect, 1.5
    reads and expected_imms, 1.6 notifications attached to writes and
    scatters, queued mailboxes, registration stats and huge-page host
    buffers."""
    v = int(lib().ferry_version())
    return v >> 16, (v >> 8) & 0xFF, v & 0xFF


def transports() -> Dict[str, str]:
    """Every transport name the library knows, mapped to its provider."""
    out = {}
    for line in text("ferry_transports").splitlines():
        name, provider = line.split("\t")
        out[name] = provider
    return out


def gpu_dmabuf_supported(ordinal: int = 0) -> bool:
    """Whether memory of CUDA device ordinal registers through dma-buf
    here; False on a library without GPU support or no driver."""
    if not has("ferry_gpu_dmabuf_supported"):
        return False
    return bool(lib().ferry_gpu_dmabuf_supported(ordinal) == _abi.OK)


def _need_reads(what: str) -> None:
    """Refuses reads on a library older than 1.5."""
    if not has("ferry_submit_read"):
        raise NotSupportedError("ferry_submit_read", _abi.E_NOT_SUPPORTED, "FERRY_E_NOT_SUPPORTED",
                                "libferry %s has no %s (1.5 or later needed)" %
                                (lib().ferry_version_string().decode(), what))


_SHAPES = {"single": _abi.SHAPE_SINGLE, "paged": _abi.SHAPE_PAGED, "scatter": _abi.SHAPE_SCATTER,
           "imm": _abi.SHAPE_IMM, "barrier": _abi.SHAPE_BARRIER}


def expected_imms(shape: str, writer_nics: int, target_nics: int, *, count: int = 0,
                  route: Optional[Tuple[str, int]] = None) -> int:
    """How many immediates a request delivers to its receiver when the
    writer's engine has writer_nics NICs and the receiving region's
    descriptor lists target_nics (Descriptor.info()[2]); they need not be
    equal. shape is "single" (routed by route, default sharded over every
    NIC), "paged" (count pages), "scatter" (routed by route, count of its
    targets naming the receiver), "imm" or "barrier" (count destinations
    naming the receiver). A request without an immediate delivers none; 0
    for one the submit would refuse. Library 1.5 or later."""
    if shape not in _SHAPES:
        raise ValueError("shape must be one of %s, got %r" % (sorted(_SHAPES), shape))
    if not has("ferry_expected_imms"):
        raise NotSupportedError("ferry_expected_imms", _abi.E_NOT_SUPPORTED, "FERRY_E_NOT_SUPPORTED",
                                "libferry %s has no expected_imms (1.5 or later needed)" %
                                lib().ferry_version_string().decode())
    r = _route(route)
    n = C.c_int64()
    check("ferry_expected_imms", _SHAPES[shape], C.byref(r) if r is not None else None, count, writer_nics,
          target_nics, C.byref(n))
    return n.value


def library_path() -> str:
    """Where the loaded libferry came from."""
    return str(getattr(lib(), "_ferry_path", ""))


__all__ = ["Engine", "Region", "Descriptor", "Transfer", "Counter", "Callback", "ImmCounter", "Completion",
           "live_handles", "version", "transports", "library_path", "gpu_dmabuf_supported", "abi_version", "raise_for", "closed",
           "expected_imms"]
