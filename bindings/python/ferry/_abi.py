"""ctypes declarations of ferry.h: constants, structs and prototypes.

Every struct here mirrors one of ferry.h; tests/test_abi.py compiles a C
program against the header and checks each size and field offset, and
checks every constant against its #define.
"""

import ctypes as C
import ctypes.util
import os

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
E_CALL_ORDER = -22
E_BROKEN = -23
E_EXPERT_OVERFLOW = -24
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
        # 1.2: GPU groups
        ("gpus", C.POINTER(C.c_int32)),
        ("gpu_count", C.c_int32),
        ("reserved0", C.c_int32),
        ("gpu_placement", C.c_int32),
        ("reserved1", C.c_int32),
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


STRUCTS = [Config, Stats, Route, SingleWrite, PagedWrite]


def _find_library():
    """FERRY_LIBRARY, else the linker's search (libferry.so.1 by SONAME)."""
    path = os.environ.get("FERRY_LIBRARY")
    if path:
        return path
    return ctypes.util.find_library("ferry") or "libferry.so.%d" % VERSION_MAJOR


def load(path=None):
    """Loads libferry and declares every prototype this package calls."""
    lib = C.CDLL(path or _find_library())
    u64, pu64, psz = C.c_uint64, C.POINTER(C.c_uint64), C.POINTER(C.c_size_t)
    protos = {
        "ferry_strerror": (C.c_char_p, [C.c_int]),
        "ferry_last_error": (C.c_size_t, [C.c_char_p, C.c_size_t]),
        "ferry_version": (C.c_uint32, []),
        "ferry_version_string": (C.c_char_p, []),
        "ferry_live_handles": (C.c_int, [pu64]),
        "ferry_transports": (C.c_int, [C.c_char_p, C.c_size_t, psz]),
        "ferry_config_init": (None, [C.c_void_p]),
        "ferry_config_init_size": (None, [C.POINTER(Config), C.c_size_t]),
        "ferry_engine_open": (C.c_int, [C.POINTER(Config), C.c_int64, pu64]),
        "ferry_engine_close": (C.c_int, [u64, C.c_int64]),
        "ferry_engine_nics": (C.c_int, [u64, C.POINTER(C.c_int32)]),
        "ferry_engine_info": (C.c_int, [u64, C.c_char_p, C.c_size_t, psz]),
        "ferry_engine_stats": (C.c_int, [u64, C.POINTER(Stats)]),
        "ferry_host_alloc": (C.c_int, [C.c_size_t, C.POINTER(C.c_void_p)]),
        "ferry_host_free": (C.c_int, [C.c_void_p]),
        "ferry_register": (C.c_int, [u64, C.c_void_p, u64, C.c_int32, pu64]),
        "ferry_unregister": (C.c_int, [u64]),
        "ferry_region_descriptor": (C.c_int, [u64, pu64]),
        "ferry_descriptor_to_hex": (C.c_int, [u64, C.c_char_p, C.c_size_t, psz]),
        "ferry_descriptor_from_hex": (C.c_int, [C.c_char_p, pu64]),
        "ferry_descriptor_free": (C.c_int, [u64]),
        "ferry_transfer_new": (C.c_int, [pu64]),
        "ferry_transfer_wait": (C.c_int, [u64, C.c_int64]),
        "ferry_transfer_free": (C.c_int, [u64]),
        "ferry_submit_single": (C.c_int, [u64, C.POINTER(SingleWrite), u64]),
        "ferry_submit_paged": (C.c_int, [u64, C.POINTER(PagedWrite), u64]),
        "ferry_submit_imm": (C.c_int, [u64, C.c_uint32, u64, C.POINTER(Route), u64]),
        "ferry_imm_counter_new": (C.c_int, [u64, C.c_uint32, pu64]),
        "ferry_imm_counter_wait": (C.c_int, [u64, C.c_int64, C.c_int64]),
        "ferry_imm_counter_count": (C.c_int, [u64, C.POINTER(C.c_int64)]),
        "ferry_imm_counter_free": (C.c_int, [u64]),
    }
    for name, (res, args) in protos.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, args
    if lib.ferry_version() >> 16 != VERSION_MAJOR:
        raise ImportError("libferry %s is not ABI version %d" % (lib.ferry_version_string().decode(), VERSION_MAJOR))
    return lib
