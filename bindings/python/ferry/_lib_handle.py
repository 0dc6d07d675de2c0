"""The one loaded libferry of this process and the calls that check codes."""

from __future__ import annotations

import ctypes as C
import threading
from typing import Any, Optional

from . import _abi
from .errors import FerryError, error_for

_lib: Optional[Any] = None
_lock = threading.Lock()


def lib() -> Any:
    """libferry, loaded on first use (FERRY_LIBRARY, the wheel's copy, or
    the system's)."""
    global _lib
    if _lib is None:
        with _lock:
            if _lib is None:
                _lib = _abi.load()
    return _lib


def has(name: str) -> bool:
    """Whether the loaded library exports the function name (a 1.1 library
    has no all-to-all, for instance)."""
    return getattr(lib(), name, None) is not None


def last_error() -> str:
    buf = C.create_string_buffer(1024)
    n = lib().ferry_last_error(buf, len(buf))
    if n >= len(buf):
        buf = C.create_string_buffer(n + 1)
        lib().ferry_last_error(buf, len(buf))
    return buf.value.decode(errors="replace")


def raise_for(func: str, rc: int) -> None:
    """Raises the exception of code rc (call right after the failing call:
    the message is the calling thread's)."""
    name = lib().ferry_strerror(rc).decode()
    raise error_for(rc)(func, rc, name, last_error())


def check(func: str, *args: Any) -> int:
    """Calls lib().func(*args) and raises the error of a nonzero code."""
    rc = getattr(lib(), func)(*args)
    if rc != _abi.OK:
        raise_for(func, rc)
    return int(rc)


def text(func: str, *args: Any) -> str:
    """Calls a function that writes NUL-terminated text (buf, cap, *len),
    growing the buffer when the library says it is too small."""
    n = C.c_size_t(0)
    buf = C.create_string_buffer(4096)
    try:
        check(func, *args, buf, len(buf), C.byref(n))
    except FerryError as e:
        if e.code != _abi.E_BUFFER_TOO_SMALL:
            raise
        buf = C.create_string_buffer(n.value + 1)
        check(func, *args, buf, len(buf), C.byref(n))
    return buf.value.decode()


def binary(func: str, *args: Any) -> bytes:
    """Calls a function that writes bytes (buf, cap, *len)."""
    n = C.c_size_t(0)
    buf = (C.c_uint8 * 512)()
    try:
        check(func, *args, buf, len(buf), C.byref(n))
    except FerryError as e:
        if e.code != _abi.E_BUFFER_TOO_SMALL:
            raise
        buf = (C.c_uint8 * n.value)()
        check(func, *args, buf, len(buf), C.byref(n))
    return bytes(buf[: n.value])


def ms(timeout: float) -> int:
    """Seconds (the Python convention) to the ABI's milliseconds; negative
    timeouts are bad arguments, as the ABI has no 'wait forever'."""
    if timeout is None or timeout < 0:
        raise ValueError("timeout must be >= 0 seconds, got %r" % (timeout,))
    return int(round(timeout * 1000))
