"""ctypes declarations of ferry.h: constants, structs and prototypes.

Every struct here mirrors one of ferry.h; tests/test_abi.py compiles a C
program against the header and checks each size and field offset, and
checks every constant against its #define. Nothing here raises Python
errors or owns handles: that is the business of the modules above it.
"""

from __future__ import annotations

import ctypes as C
import ctypes.util
import os
from typing import Any, Dict, List, Optional, Tuple

VERSION_MAJOR = 1

OK = 0
E_INVALID = -1
E_CLOSED = -2
E_UNKNOWN_REGION = -3
E_OUT_OF_BOUNDS = -4
E_NOT_SUPPORTED = -5
E_TIMEOUT = -6
E_PROVIDER = -7
E_NIC_MISMATCH = -8
E_BAD_ENCODING = -9
E_NO_TRANSPORT = -10
E_UNKNOWN_PROVIDER = -11
E_BUSY = -12
E_TOO_LARGE = -13
E_REMOVED = -14
E_BAD_HANDLE = -15
E_BUFFER_TOO_SMALL = -16
E_RENDEZVOUS = -17
E_PEER_LOST = -18
E_QUEUE_FULL = -19
E_ABANDONED = -20
E_NO_MEMORY = -21
E_INTERNAL = -99

POLL_ADAPTIVE = 0
POLL_SPIN = 1
LOG_DEFAULT, LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR, LOG_NONE = range(6)
ACCESS_LOCAL = 0
ACCESS_REMOTE_WRITE = 1
ROUTE_SHARDED = 0
ROUTE_PINNED = 1
ROUTE_SHARD_BYTES = 2

# Handles are opaque 64-bit integers.
handle = C.c_uint64


class Config(C.Structure):
    """ferry_config; fill it with ferry_config_init_size(cfg, sizeof(cfg))."""

    _c_name_ = "ferry_config"
    _fields_ = [
        ("struct_size", C.c_uint32),
        ("nics", C.c_int32),
        ("transport", C.c_char_p),
        ("node", C.c_char_p),
        ("poll", C.c_int32),
        ("queue_depth", C.c_int32),
        ("send_buffers", C.c_int32),
        ("send_buffer_size", C.c_int32),
        ("handshake_timeout_ms", C.c_int32),
        ("log_level", C.c_int32),
        ("max_pending", C.c_int32),
        ("request_timeout_ms", C.c_int64),
        ("liveness_interval_ms", C.c_int64),
        ("stuck_timeout_ms", C.c_int64),
    ]


class Stats(C.Structure):
    _c_name_ = "ferry_stats"
    _fields_ = [
        ("completed", C.c_uint64),
        ("failed", C.c_uint64),
        ("unclaimed", C.c_uint64),
        ("posted", C.c_uint64),
        ("bytes", C.c_uint64),
        ("imms", C.c_uint64),
    ]


class Route(C.Structure):
    _c_name_ = "ferry_route"
    _fields_ = [("kind", C.c_int32), ("value", C.c_int32)]


class SingleWrite(C.Structure):
    _c_name_ = "ferry_single_write"
    _fields_ = [
        ("src", handle),
        ("src_offset", C.c_uint64),
        ("length", C.c_uint64),
        ("dst", handle),
        ("dst_offset", C.c_uint64),
        ("imm", C.c_uint32),
        ("has_imm", C.c_int32),
        ("route", Route),
    ]


class PagedWrite(C.Structure):
    _c_name_ = "ferry_paged_write"
    _fields_ = [
        ("src", handle),
        ("src_pages", C.POINTER(C.c_uint32)),
        ("src_stride", C.c_uint64),
        ("src_offset", C.c_uint64),
        ("dst", handle),
        ("dst_pages", C.POINTER(C.c_uint32)),
        ("dst_stride", C.c_uint64),
        ("dst_offset", C.c_uint64),
        ("pages", C.c_size_t),
        ("length", C.c_uint64),
        ("imm", C.c_uint32),
        ("has_imm", C.c_int32),
    ]


class ScatterTarget(C.Structure):
    _c_name_ = "ferry_scatter_target"
    _fields_ = [
        ("dst", handle),
        ("length", C.c_uint64),
        ("src_offset", C.c_uint64),
        ("dst_offset", C.c_uint64),
    ]


class ScatterWrite(C.Structure):
    _c_name_ = "ferry_scatter_write"
    _fields_ = [
        ("src", handle),
        ("targets", C.POINTER(ScatterTarget)),
        ("count", C.c_size_t),
        ("imm", C.c_uint32),
        ("has_imm", C.c_int32),
        ("route", Route),
    ]


STRUCTS: List[Any] = [Config, Stats, Route, SingleWrite, PagedWrite, ScatterTarget, ScatterWrite]

# Callback types (ferry.h typedefs). ctypes takes the GIL when the library
# calls them on an engine's dispatcher thread.
DONE_FN = C.CFUNCTYPE(None, C.c_void_p, C.c_int)
EXPECT_FN = C.CFUNCTYPE(C.c_int, C.c_void_p, C.c_uint32)
IMM_FN = C.CFUNCTYPE(None, C.c_void_p, C.c_uint32)
PEER_LOST_FN = C.CFUNCTYPE(None, C.c_void_p, C.POINTER(C.c_uint8), C.c_size_t)
RECV_FN = C.CFUNCTYPE(None, C.c_void_p, C.POINTER(C.c_uint8), C.c_size_t)
ERROR_FN = C.CFUNCTYPE(None, C.c_void_p, C.c_int, C.c_char_p)

_u64 = C.c_uint64
_pu64 = C.POINTER(C.c_uint64)
_psz = C.POINTER(C.c_size_t)
_pi64 = C.POINTER(C.c_int64)
_pi32 = C.POINTER(C.c_int32)
_pu8 = C.POINTER(C.c_uint8)

# name: (result type, argument types). Every function of ferry.h 1.1.
PROTOTYPES: Dict[str, Tuple[Any, List[Any]]] = {
    "ferry_strerror": (C.c_char_p, [C.c_int]),
    "ferry_last_error": (C.c_size_t, [C.c_char_p, C.c_size_t]),
    "ferry_version": (C.c_uint32, []),
    "ferry_version_string": (C.c_char_p, []),
    "ferry_live_handles": (C.c_int, [_pu64]),
    "ferry_transports": (C.c_int, [C.c_char_p, C.c_size_t, _psz]),
    "ferry_config_init": (None, [C.c_void_p]),
    "ferry_config_init_size": (None, [C.POINTER(Config), C.c_size_t]),
    "ferry_engine_open": (C.c_int, [C.POINTER(Config), C.c_int64, _pu64]),
    "ferry_engine_close": (C.c_int, [_u64, C.c_int64]),
    "ferry_engine_address": (C.c_int, [_u64, _pu8, C.c_size_t, _psz]),
    "ferry_engine_address_hex": (C.c_int, [_u64, C.c_char_p, C.c_size_t, _psz]),
    "ferry_engine_nics": (C.c_int, [_u64, _pi32]),
    "ferry_engine_info": (C.c_int, [_u64, C.c_char_p, C.c_size_t, _psz]),
    "ferry_engine_stats": (C.c_int, [_u64, C.POINTER(Stats)]),
    "ferry_host_alloc": (C.c_int, [C.c_size_t, C.POINTER(C.c_void_p)]),
    "ferry_host_free": (C.c_int, [C.c_void_p]),
    "ferry_register": (C.c_int, [_u64, C.c_void_p, _u64, C.c_int32, _pu64]),
    "ferry_unregister": (C.c_int, [_u64]),
    "ferry_region_descriptor": (C.c_int, [_u64, _pu64]),
    "ferry_descriptor_to_bytes": (C.c_int, [_u64, _pu8, C.c_size_t, _psz]),
    "ferry_descriptor_from_bytes": (C.c_int, [_pu8, C.c_size_t, _pu64]),
    "ferry_descriptor_to_hex": (C.c_int, [_u64, C.c_char_p, C.c_size_t, _psz]),
    "ferry_descriptor_from_hex": (C.c_int, [C.c_char_p, _pu64]),
    "ferry_descriptor_info": (C.c_int, [_u64, _pu64, _pu64, _pi32]),
    "ferry_descriptor_free": (C.c_int, [_u64]),
    "ferry_transfer_new": (C.c_int, [_pu64]),
    "ferry_transfer_wait": (C.c_int, [_u64, C.c_int64]),
    "ferry_transfer_free": (C.c_int, [_u64]),
    "ferry_counter_new": (C.c_int, [_pu64]),
    "ferry_counter_read": (C.c_int, [_u64, _pi64, _pi64]),
    "ferry_counter_wait": (C.c_int, [_u64, C.c_int64, C.c_int64]),
    "ferry_counter_free": (C.c_int, [_u64]),
    "ferry_callback_new": (C.c_int, [DONE_FN, C.c_void_p, _pu64]),
    "ferry_callback_free": (C.c_int, [_u64]),
    "ferry_submit_single": (C.c_int, [_u64, C.POINTER(SingleWrite), _u64]),
    "ferry_submit_paged": (C.c_int, [_u64, C.POINTER(PagedWrite), _u64]),
    "ferry_submit_scatter": (C.c_int, [_u64, C.POINTER(ScatterWrite), _u64]),
    "ferry_submit_imm": (C.c_int, [_u64, C.c_uint32, _u64, C.POINTER(Route), _u64]),
    "ferry_submit_barrier": (C.c_int, [_u64, C.c_uint32, _pu64, C.c_size_t, C.POINTER(Route), _u64]),
    "ferry_imm_counter_new": (C.c_int, [_u64, C.c_uint32, _pu64]),
    "ferry_imm_counter_wait": (C.c_int, [_u64, C.c_int64, C.c_int64]),
    "ferry_imm_counter_count": (C.c_int, [_u64, _pi64]),
    "ferry_imm_counter_free": (C.c_int, [_u64]),
    "ferry_expect_imm": (C.c_int, [_u64, C.c_uint32, C.c_uint32, EXPECT_FN, C.c_void_p, _pi64]),
    "ferry_remove_imm": (C.c_int, [_u64, C.c_uint32, _pi64]),
    "ferry_on_imm": (C.c_int, [_u64, IMM_FN, C.c_void_p]),
    "ferry_on_peer_lost": (C.c_int, [_u64, PEER_LOST_FN, C.c_void_p]),
    "ferry_watch_peer": (C.c_int, [_u64, _pu8, C.c_size_t]),
    "ferry_peer_status": (C.c_int, [_u64, _pu8, C.c_size_t]),
    "ferry_send": (C.c_int, [_u64, _pu8, C.c_size_t, C.c_void_p, C.c_size_t, _u64, C.c_int64]),
    "ferry_recv_bouncing": (C.c_int, [_u64, C.c_int32, C.c_int32, RECV_FN, ERROR_FN, C.c_void_p]),
    "ferry_group_join": (C.c_int, [C.c_int64, _pu64]),
    "ferry_group_rank": (C.c_int, [_u64, _pi32, _pi32]),
    "ferry_group_all_gather": (C.c_int, [_u64, C.c_void_p, C.c_size_t, C.c_void_p, C.c_size_t, _psz, C.c_int64]),
    "ferry_group_broadcast": (C.c_int, [_u64, C.c_int32, C.c_void_p, C.c_size_t, _psz, C.c_int64]),
    "ferry_group_barrier": (C.c_int, [_u64, C.c_int64]),
    "ferry_group_close": (C.c_int, [_u64]),
}


def bundled_library() -> Optional[str]:
    """The libferry.so.1 a wheel carries beside this file, if any."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_lib", "libferry.so.%d" % VERSION_MAJOR)
    return path if os.path.exists(path) else None


def find_library() -> str:
    """FERRY_LIBRARY when set (an explicit choice wins), else the library
    the wheel carries, else the linker's search (libferry.so.1 by SONAME,
    as `make install` leaves it)."""
    path = os.environ.get("FERRY_LIBRARY")
    if path:
        return path
    return bundled_library() or ctypes.util.find_library("ferry") or "libferry.so.%d" % VERSION_MAJOR


def declare(lib: Any, protos: Dict[str, Tuple[Any, List[Any]]]) -> None:
    """Sets restype and argtypes of every function in protos that lib
    exports; functions a library lacks stay undeclared (callers check
    has() first)."""
    for name, (res, args) in protos.items():
        fn = getattr(lib, name, None)
        if fn is not None:
            fn.restype, fn.argtypes = res, args


def load(path: Optional[str] = None) -> Any:
    """Loads libferry and declares every prototype the package calls."""
    where = path or find_library()
    try:
        lib = C.CDLL(where)
    except OSError as e:
        raise ImportError(
            "ferry: cannot load libferry (%s): %s; install the ferry_rdma wheel, "
            "`make install` the library, or set FERRY_LIBRARY" % (where, e)) from e
    declare(lib, PROTOTYPES)
    if lib.ferry_version() >> 16 != VERSION_MAJOR:
        raise ImportError("libferry %s is not ABI version %d" % (lib.ferry_version_string().decode(), VERSION_MAJOR))
    lib._ferry_path = where
    return lib
