"""The lifetime of library handles from Python: close() or a with block
releases one at once; a forgotten one is released by its finaliser when
the garbage collector (or interpreter exit) reaches it."""

from __future__ import annotations

import weakref
from typing import Any, Callable, Optional

from ._lib_handle import check, lib
from .errors import closed


def _release_quietly(func: str, h: int, *keep: Any) -> None:
    # keep holds what must outlive the handle (the exported memory of a
    # region, callback trampolines of an engine) until this call returns.
    try:
        getattr(lib(), func)(h)
    except Exception:
        pass


class Handle:
    """A library handle released by the C function named _free_."""

    _free_: str = ""

    def __init__(self, h: int, *keep: Any, release: Optional[Callable[..., Any]] = None) -> None:
        self._h: Optional[int] = h
        self._finalizer = weakref.finalize(self, release or _release_quietly, self._free_, h, *keep)

    @property
    def handle(self) -> int:
        """The raw handle (for ctypes users); ClosedError once closed."""
        if self._h is None:
            raise closed(type(self).__name__)
        return self._h

    @property
    def closed(self) -> bool:
        return self._h is None

    def _forget(self) -> None:
        """The library released the handle already (its engine closed)."""
        self._h = None
        self._finalizer()  # drops what it kept; the free call fails quietly

    def close(self) -> None:
        """Releases the handle. Idempotent."""
        if self._h is not None:
            h, self._h = self._h, None
            self._finalizer.detach()
            check(self._free_, h)

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return "<ferry.%s %s>" % (type(self).__name__, "closed" if self._h is None else "handle %d" % self._h)
