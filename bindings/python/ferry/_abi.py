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
E_CALL_ORDER = -22
E_BROKEN = -23
E_EXPERT_OVERFLOW = -24
E_NOT_FOUND = -25
E_EXISTS = -26
E_UNAVAILABLE = -27
E_STALE_DESCRIPTOR = -28
# Leases and notifications (1.5):
E_NOT_LEASED = -29
E_NOTIFY_TOO_LARGE = -30
E_LEASES_EXHAUSTED = -31
LEASE_BASE = 0xC0000000
MAX_LEASE_IMMS = 4096
MAX_NOTIFY_PAYLOAD = 4096
E_NOT_READABLE = -32  # 1.5 reads
# Notified requests, registration stats, huge pages (1.6):
E_NOTIFICATIONS_LOST = -33
MAILBOX_DEPTH = 8
REGISTER_ON_WORKER = 0
REGISTER_NICS_IN_PARALLEL = 1
REGISTER_BESIDE = 2
HUGE_PAGES_AUTO = 0
HUGE_PAGES_NEVER = 1
HUGE_PAGES_REQUIRED = 2
E_INTERNAL = -99

POLL_ADAPTIVE = 0
POLL_SPIN = 1
LOG_DEFAULT, LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR, LOG_NONE = range(6)
ACCESS_LOCAL = 0
ACCESS_REMOTE_WRITE = 1
ACCESS_REMOTE_READ = 2  # 1.5: a bit, or-ed with ACCESS_REMOTE_WRITE
ROUTE_SHARDED = 0
ROUTE_PINNED = 1
ROUTE_SHARD_BYTES = 2
SHAPE_SINGLE = 0  # 1.5: ferry_expected_imms
SHAPE_PAGED = 1
SHAPE_SCATTER = 2
SHAPE_IMM = 3
SHAPE_BARRIER = 4
GPU_PATH_DMABUF = 1
GPU_PATH_PEER_MEMORY = 2
GPU_PLACE_TOPOLOGY = 0
GPU_PLACE_FIRST_NICS = 1

DTYPE_FP8 = 1
DTYPE_BF16 = 2
DTYPE_FP16 = 3
DTYPE_FP32 = 4
DTYPE_INT32 = 5
DTYPE_UINT32 = 6
DTYPE_UINT8 = 7
MEMORY_HOST = 0
MEMORY_CUDA = 1
TENSOR_MAX_DIMS = 4
A2A_BACKEND_HOST = 0
A2A_BACKEND_CUDA = 1
A2A_BACKEND_CUDA_EMU = 2
A2A_NO_PRIVATE_WINDOW = -1
DIR_JOINED = 1
DIR_UPDATED = 2
DIR_LOST = 3
DIR_CLOSED = 4
DIR_REJECTED = 5

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


class Tensor(C.Structure):
    _c_name_ = "ferry_tensor"
    _fields_ = [
        ("data", C.c_void_p),
        ("nbytes", C.c_uint64),
        ("dtype", C.c_int32),
        ("ndim", C.c_int32),
        ("shape", C.c_int64 * 4),
        ("strides", C.c_int64 * 4),
        ("memory", C.c_int32),
        ("device", C.c_int32),
    ]


class A2AConfig(C.Structure):
    _c_name_ = "ferry_a2a_config"
    _fields_ = [
        ("struct_size", C.c_uint32),
        ("backend", C.c_int32),
        ("group", handle),
        ("rank", C.c_int32),
        ("world_size", C.c_int32),
        ("world_name", C.c_char_p),
        ("engine", handle),
        ("transport", C.c_char_p),
        ("node", C.c_char_p),
        ("nvlink_size", C.c_int32),
        ("replica_size", C.c_int32),
        ("nics_per_rank", C.c_int32),
        ("max_tokens", C.c_int32),
        ("hidden", C.c_int32),
        ("hidden_scales", C.c_int32),
        ("num_experts", C.c_int32),
        ("experts_per_token", C.c_int32),
        ("dispatch_dtype", C.c_int32),
        ("combine_dtype", C.c_int32),
        ("expert_padding", C.c_int32),
        ("max_private_tokens", C.c_int32),
        ("max_tokens_per_expert", C.c_int32),
        ("imm_base", C.c_uint32),
        ("cuda_device", C.c_int32),
        ("timeout_ms", C.c_int64),
    ]


class A2AInfo(C.Structure):
    _c_name_ = "ferry_a2a_info"
    _fields_ = [
        ("struct_size", C.c_uint32),
        ("rank", C.c_int32),
        ("world_size", C.c_int32),
        ("local_experts", C.c_int32),
        ("output_rows", C.c_int32),
        ("max_tokens_per_expert", C.c_int32),
        ("token_bytes", C.c_int32),
        ("combine_bytes", C.c_int32),
        ("private_tokens", C.c_int32),
        ("backend", C.c_int32),
        ("generation", C.c_uint32),
        ("reserved0", C.c_int32),
    ]


# 1.5 reads.
class SingleRead(C.Structure):
    _c_name_ = "ferry_single_read"
    _fields_ = [
        ("dst", handle),
        ("dst_offset", C.c_uint64),
        ("length", C.c_uint64),
        ("src", handle),
        ("src_offset", C.c_uint64),
        ("route", Route),
    ]


class PagedRead(C.Structure):
    _c_name_ = "ferry_paged_read"
    _fields_ = [
        ("dst", handle),
        ("dst_pages", C.POINTER(C.c_uint32)),
        ("dst_stride", C.c_uint64),
        ("dst_offset", C.c_uint64),
        ("src", handle),
        ("src_pages", C.POINTER(C.c_uint32)),
        ("src_stride", C.c_uint64),
        ("src_offset", C.c_uint64),
        ("pages", C.c_size_t),
        ("length", C.c_uint64),
    ]


class ScatterSource(C.Structure):
    _c_name_ = "ferry_scatter_source"
    _fields_ = [
        ("src", handle),
        ("length", C.c_uint64),
        ("src_offset", C.c_uint64),
        ("dst_offset", C.c_uint64),
    ]


class ScatterRead(C.Structure):
    _c_name_ = "ferry_scatter_read"
    _fields_ = [
        ("dst", handle),
        ("sources", C.POINTER(ScatterSource)),
        ("count", C.c_size_t),
        ("route", Route),
    ]


# 1.6: notified requests, registration stats.
class Notification(C.Structure):
    _c_name_ = "ferry_notification"
    _fields_ = [
        ("mailbox", C.POINTER(C.c_uint8)),
        ("mailbox_len", C.c_size_t),
        ("payload", C.c_void_p),
        ("len", C.c_size_t),
    ]


class RegistrationStats(C.Structure):
    _c_name_ = "ferry_registration_stats"
    _fields_ = [
        ("struct_size", C.c_uint32),
        ("groups", C.c_uint32),
        ("handles", C.c_uint64),
        ("registrations", C.c_uint64),
        ("hits", C.c_uint64),
        ("misses", C.c_uint64),
        ("modes", C.c_int32 * 16),
    ]


STRUCTS: List[Any] = [Config, Stats, Route, SingleWrite, PagedWrite, ScatterTarget, ScatterWrite, Tensor,
                      A2AConfig, A2AInfo, SingleRead, PagedRead, ScatterSource, ScatterRead, Notification,
                      RegistrationStats]

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

# name: (result type, argument types). Every function of ferry.h 1.6.
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
    "ferry_group_join_env": (C.c_int, [C.POINTER(C.c_char_p), C.c_size_t, C.c_int64, _pu64]),
    "ferry_group_rank": (C.c_int, [_u64, _pi32, _pi32]),
    "ferry_group_all_gather": (C.c_int, [_u64, C.c_void_p, C.c_size_t, C.c_void_p, C.c_size_t, _psz, C.c_int64]),
    "ferry_group_broadcast": (C.c_int, [_u64, C.c_int32, C.c_void_p, C.c_size_t, _psz, C.c_int64]),
    "ferry_group_barrier": (C.c_int, [_u64, C.c_int64]),
    "ferry_group_close": (C.c_int, [_u64]),
    # 1.2
    "ferry_register_gpu": (C.c_int, [_u64, _u64, _u64, C.c_int32, _pu64, _pi32]),
    "ferry_gpu_dmabuf_supported": (C.c_int, [C.c_int32]),
    "ferry_a2a_config_init_size": (None, [C.POINTER(A2AConfig), C.c_size_t]),
    "ferry_a2a_create": (C.c_int, [C.POINTER(A2AConfig), C.c_int64, _pu64]),
    "ferry_a2a_get_info": (C.c_int, [_u64, C.POINTER(A2AInfo)]),
    "ferry_a2a_dispatch": (C.c_int, [_u64] + [C.POINTER(Tensor)] * 8 + [C.c_int32, C.c_int32, _u64, C.c_int64]),
    "ferry_a2a_combine": (C.c_int, [_u64] + [C.POINTER(Tensor)] * 5 +
                          [C.c_int32, C.c_int32, C.c_int32, _u64, C.c_int64]),
    "ferry_a2a_dropped": (C.c_int, [_u64, _pi64, _pi32, C.c_size_t]),
    "ferry_a2a_set_active": (C.c_int, [_u64, C.c_uint32, _pu8, C.c_size_t, C.c_int64]),
    "ferry_a2a_close": (C.c_int, [_u64]),
    # 1.3
    "ferry_directory_open": (C.c_int, [C.c_char_p, C.c_int64, C.c_int64, _pu64]),
    "ferry_directory_close": (C.c_int, [_u64]),
    "ferry_directory_publish": (C.c_int, [_u64, _u64, C.c_char_p, C.POINTER(C.c_char_p), C.c_size_t, C.c_int64,
                                          _pu64]),
    "ferry_publication_add_region": (C.c_int, [_u64, C.c_char_p, _u64, C.POINTER(C.c_char_p), C.c_size_t,
                                               C.c_int64]),
    "ferry_publication_remove_region": (C.c_int, [_u64, C.c_char_p, C.c_int64]),
    "ferry_publication_set_labels": (C.c_int, [_u64, C.POINTER(C.c_char_p), C.c_size_t, C.c_int64]),
    "ferry_publication_close": (C.c_int, [_u64, C.c_int64]),
    "ferry_directory_lookup": (C.c_int, [_u64, C.c_char_p, C.c_int64, C.c_char_p, C.c_size_t, _psz]),
    "ferry_directory_select": (C.c_int, [_u64, C.c_char_p, C.c_int64, C.c_char_p, C.c_size_t, _psz]),
    "ferry_directory_wait_for": (C.c_int, [_u64, C.c_char_p, C.c_int32, C.c_int64, C.c_char_p, C.c_size_t, _psz]),
    "ferry_directory_region": (C.c_int, [_u64, C.c_char_p, C.c_char_p, C.c_int64, _pu64, C.c_char_p, C.c_size_t,
                                         _psz]),
    "ferry_directory_watch": (C.c_int, [_u64, C.c_int64, _pu64]),
    "ferry_dir_watch_next": (C.c_int, [_u64, C.c_int64, _pi32, C.c_char_p, C.c_size_t, _psz]),
    "ferry_dir_watch_close": (C.c_int, [_u64]),
    "ferry_directory_lose_on_leave": (C.c_int, [_u64, _u64, C.c_int64]),
    "ferry_address_from_hex": (C.c_int, [C.c_char_p, _pu8, C.c_size_t, _psz]),
    # 1.4
    "ferry_connect": (C.c_int, [_u64, C.POINTER(_pu8), _psz, C.c_size_t, C.c_int64]),
    # 1.5: leases and notifications
    "ferry_lease_imms": (C.c_int, [_u64, C.c_uint32, _pu64, C.POINTER(C.c_uint32)]),
    "ferry_lease_retire": (C.c_int, [_u64]),
    "ferry_lease_mailbox": (C.c_int, [_u64, _pu8, C.c_size_t, _psz]),
    "ferry_notify": (C.c_int, [_u64, _pu8, C.c_size_t, C.c_void_p, C.c_size_t, _u64]),
    "ferry_lease_wait_notification": (C.c_int, [_u64, C.c_int64, C.c_void_p, C.c_size_t, _psz, _pu64]),
    "ferry_engine_drops": (C.c_int, [_u64, _pu64, _pu64]),
    # 1.5 reads
    "ferry_submit_read": (C.c_int, [_u64, C.POINTER(SingleRead), _u64]),
    "ferry_submit_paged_read": (C.c_int, [_u64, C.POINTER(PagedRead), _u64]),
    "ferry_submit_scatter_read": (C.c_int, [_u64, C.POINTER(ScatterRead), _u64]),
    "ferry_expected_imms": (C.c_int, [C.c_int32, C.POINTER(Route), C.c_int64, C.c_int32, C.c_int32, _pi64]),
    # 1.6: notified requests, registration stats, huge pages
    "ferry_submit_notified": (C.c_int, [_u64, C.c_int32, C.c_void_p, C.POINTER(Notification), C.c_size_t, _u64]),
    "ferry_engine_registration_stats": (C.c_int, [_u64, C.POINTER(RegistrationStats)]),
    "ferry_host_alloc_with": (C.c_int, [C.c_size_t, C.c_int32, C.POINTER(C.c_void_p), _psz]),
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
    setattr(lib, "_ferry_path", where)
    return lib
