"""The directory (ABI 1.3): where engines that come and go find each other.

An engine publishes its entry (a name, its NIC addresses, labels such as
role=prefill) and named regions (a descriptor and metadata); others look
them up by name or label selector, wait for enough of them, and watch for
joins and leaves:

    with ferry.Directory("etcd://127.0.0.1:2379/serving", ttl=5) as d, \\
            ferry.Engine("ipc") as eng:
        with d.publish(eng, "prefill-0", {"role": "prefill"}) as pub:
            pub.add_region("kv", region.descriptor(), {"layer": "0"})
            ...
    # elsewhere, started later:
    with ferry.Directory(url) as d:
        pool = d.wait_for("role=prefill", 2, timeout=30)
        with d.watch() as w:
            for ev in w.events(timeout=1.0):   # stops after 1 s without one
                if ev.kind == "lost": ...

URLs: etcd://HOST:PORT[,HOST:PORT]/PREFIX (entries under a lease of ttl
seconds that this process renews: a process that dies is gone, and "lost"
to watchers, within the TTL; an orderly close is "closed"), or mem://NAME
(in-process: every Directory of this process with the same NAME shares
it). Durations are seconds; every wait has a timeout.
"""

from __future__ import annotations

import ctypes as C
import json
import threading
import time
import weakref
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Mapping, Optional, Set, Tuple

from . import _abi
from ._handles import Handle
from ._lib_handle import check, lib, ms, text
from .engine import Descriptor, Engine
from .errors import FerryError, FerryTimeoutError

# Event kinds, as Event.kind names them.
JOINED, UPDATED, LOST, CLOSED, REJECTED = "joined", "updated", "lost", "closed", "rejected"


@dataclass(frozen=True)
class Entry:
    """An engine's entry: its NIC count, NIC addresses (binary, the main
    address first: what Engine.send and peer_status take) and labels."""

    name: str
    nics: int
    addrs: Tuple[bytes, ...]
    labels: Dict[str, str] = field(default_factory=dict)

    @property
    def address(self) -> bytes:
        """The main address (NIC 0 of the main group)."""
        return self.addrs[0]

    @classmethod
    def _from_json(cls, j: Mapping[str, Any]) -> "Entry":
        return cls(name=str(j["name"]), nics=int(j["nics"]),
                   addrs=tuple(bytes.fromhex(a) for a in j.get("addrs") or ()),
                   labels={str(k): str(v) for k, v in (j.get("labels") or {}).items()})


@dataclass(frozen=True)
class Event:
    """One change a watch saw: kind is "joined", "updated", "lost" (the
    entry's lease ran out: its process died, hung or was cut off),
    "closed" (an orderly close) or "rejected" (a malformed value under the
    prefix; error says why, entry is None)."""

    kind: str
    entry: Optional[Entry]
    error: str = ""


def _pairs(what: str, m: Optional[Mapping[str, str]]) -> Tuple[Any, int]:
    """A mapping as the C array of "key=value" strings."""
    if not m:
        return None, 0
    items = []
    for k, v in m.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise TypeError("%s: keys and values must be str, got %r=%r" % (what, k, v))
        items.append(("%s=%s" % (k, v)).encode())
    return (C.c_char_p * len(items))(*items), len(items)


def _entries(raw: str) -> List[Entry]:
    return [Entry._from_json(j) for j in json.loads(raw)]


class Publication(Handle):
    """This process's live entry of one engine. close() (or leaving a with
    block) removes it and its regions in order: watchers see "closed".
    One not closed lives as long as its Directory (which holds it, so
    dropping the object does not end it); when the directory closes, or
    the process exits or dies with it open, its renewal stops and watchers
    see "lost" (within the TTL on etcd)."""

    _free_ = "ferry_publication_close"

    def __init__(self, h: int, directory: "Directory", name: str, timeout_ms: int) -> None:
        # No finaliser of its own: the directory's close releases it.
        super().__init__(h, release=_keep)
        self.name = name
        self._directory = directory
        self._timeout_ms = timeout_ms

    def add_region(self, name: str, descriptor: Descriptor, meta: Optional[Mapping[str, str]] = None, *,
                   timeout: Optional[float] = None) -> None:
        """Publishes (or replaces) the region name: the descriptor of a
        region of this engine (NICMismatchError otherwise) and its
        metadata."""
        arr, n = _pairs("meta", meta)
        check("ferry_publication_add_region", self.handle, name.encode(), descriptor.handle, arr, n,
              self._ms(timeout))

    def remove_region(self, name: str, *, timeout: Optional[float] = None) -> None:
        """Withdraws the region name (NotFoundError if not published)."""
        check("ferry_publication_remove_region", self.handle, name.encode(), self._ms(timeout))

    def set_labels(self, labels: Mapping[str, str], *, timeout: Optional[float] = None) -> None:
        """Replaces the entry's labels: watchers see "updated"."""
        arr, n = _pairs("labels", labels)
        check("ferry_publication_set_labels", self.handle, arr, n, self._ms(timeout))

    def close(self, timeout: Optional[float] = None) -> None:
        if self._h is not None:
            h, self._h = self._h, None
            self._finalizer.detach()
            self._directory._pubs.discard(self)
            check(self._free_, h, self._ms(timeout))

    def _ms(self, timeout: Optional[float]) -> int:
        return self._timeout_ms if timeout is None else ms(timeout)


def _keep(func: str, h: int) -> None:
    pass


class Watch(Handle):
    """A stream of directory events: first one "joined" per live engine,
    then every change, in order. next(timeout) returns one; events(idle)
    iterates until idle seconds pass without one, or the directory
    closes."""

    _free_ = "ferry_dir_watch_close"

    def __init__(self, h: int, directory: "Directory") -> None:
        super().__init__(h)
        self._directory = directory

    def next(self, timeout: float) -> Event:
        """The next event; FerryTimeoutError when none came within timeout
        (0 polls), ClosedError once the directory closed."""
        kind = C.c_int32()
        raw = text("ferry_dir_watch_next", self.handle, ms(timeout), C.byref(kind))
        j = json.loads(raw)
        entry = Entry._from_json(j["entry"]) if j.get("entry") else None
        return Event(kind=str(j["kind"]), entry=entry, error=str(j.get("error", "")))

    def events(self, idle: float) -> Iterator[Event]:
        """Yields events until idle seconds pass without one."""
        while True:
            try:
                yield self.next(idle)
            except FerryTimeoutError:
                return

    def until(self, kind: str, name: Optional[str] = None, *, timeout: float) -> Event:
        """Reads events until one of kind (for engine name, if given)
        arrives; FerryTimeoutError when none did within timeout in all."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise FerryTimeoutError("ferry_dir_watch_next", _abi.E_TIMEOUT, "FERRY_E_TIMEOUT",
                                        "no %s event%s within %.1f s" % (kind, " for " + name if name else "",
                                                                          timeout))
            try:
                ev = self.next(min(left, 1.0))
            except FerryTimeoutError:
                continue
            if ev.kind == kind and (name is None or (ev.entry is not None and ev.entry.name == name)):
                return ev

    def close(self) -> None:
        if self._h is not None:
            self._directory._children.discard(self)
        super().close()


def _close_directory(func: str, h: int) -> None:
    try:
        lib().ferry_directory_close(h)
    except Exception:
        pass


class Directory(Handle):
    """An open directory (etcd://HOST:PORT/PREFIX or mem://NAME). ttl is
    the lease of this handle's publications on etcd (whole seconds; the
    server raises it to its minimum, about 2 s); timeout bounds opening
    and is the default timeout of every call. close() ends its watches and
    releases its publications and watches; publications not closed first
    are lost to watchers (at once on mem://, within the TTL on etcd)."""

    _free_ = "ferry_directory_close"

    def __init__(self, url: str, *, ttl: float = 10.0, timeout: float = 10.0) -> None:
        if not isinstance(url, str):
            raise TypeError("url must be a str, got %r" % (url,))
        h = C.c_uint64()
        self._timeout_ms = ms(timeout)
        check("ferry_directory_open", url.encode(), ms(ttl), self._timeout_ms, C.byref(h))
        self.url = url
        self._children: "weakref.WeakSet[Handle]" = weakref.WeakSet()
        self._pubs: Set[Publication] = set()
        self._lock = threading.Lock()
        super().__init__(h.value, release=_close_directory)

    def _ms(self, timeout: Optional[float]) -> int:
        return self._timeout_ms if timeout is None else ms(timeout)

    def close(self) -> None:
        with self._lock:
            if self._h is None:
                return
            children = list(self._children) + list(self._pubs)
            self._pubs.clear()
        try:
            super().close()
        finally:
            for c in children:
                c._forget()

    def publish(self, engine: Engine, name: str, labels: Optional[Mapping[str, str]] = None, *,
                timeout: Optional[float] = None) -> Publication:
        """Publishes engine as name with labels. ExistsError while another
        live publication holds name."""
        arr, n = _pairs("labels", labels)
        h = C.c_uint64()
        t = self._ms(timeout)
        check("ferry_directory_publish", self.handle, engine.handle, name.encode(), arr, n, t, C.byref(h))
        p = Publication(h.value, self, name, t)
        self._pubs.add(p)
        return p

    def lookup(self, name: str, *, timeout: Optional[float] = None) -> Entry:
        """The entry of engine name (NotFoundError if none)."""
        return Entry._from_json(json.loads(text("ferry_directory_lookup", self.handle, name.encode(),
                                                self._ms(timeout))))

    def select(self, selector: str = "", *, timeout: Optional[float] = None) -> List[Entry]:
        """The live entries whose labels match selector ("role=prefill",
        "model=x,shard!=3", "role" for present; "" for all), by name."""
        return _entries(text("ferry_directory_select", self.handle, selector.encode(), self._ms(timeout)))

    def wait_for(self, selector: str, n: int, *, timeout: float) -> List[Entry]:
        """Waits until at least n live entries match selector and returns
        them: how a process started late finds the engines it needs.
        FerryTimeoutError when fewer matched within timeout."""
        return _entries(text("ferry_directory_wait_for", self.handle, selector.encode(), n, ms(timeout)))

    def region(self, engine: str, name: str, *, timeout: Optional[float] = None) -> Tuple[Descriptor, Dict[str, str]]:
        """The region name of engine: its descriptor (close it after use)
        and its metadata."""
        d = C.c_uint64()
        raw = text("ferry_directory_region", self.handle, engine.encode(), name.encode(), self._ms(timeout),
                   C.byref(d))
        return Descriptor(d.value), {str(k): str(v) for k, v in json.loads(raw).items()}

    def watch(self, *, timeout: Optional[float] = None) -> Watch:
        """A new watch (a context manager); starting it reads the live
        entries, within timeout."""
        h = C.c_uint64()
        check("ferry_directory_watch", self.handle, self._ms(timeout), C.byref(h))
        w = Watch(h.value, self)
        self._children.add(w)
        return w

    def lose_on_leave(self, engine: Engine, *, timeout: Optional[float] = None) -> None:
        """Ties engine's peer liveness to this directory until it closes:
        when an engine leaves (lost or closed), every address it published
        is declared lost in engine, so work queued to it fails with
        PeerLostError at once."""
        check("ferry_directory_lose_on_leave", self.handle, engine.handle, self._ms(timeout))


def address_from_hex(hex_text: str) -> bytes:
    """An address's hex text (ferry_engine_address_hex) as binary."""
    n = C.c_size_t(0)
    buf = (C.c_uint8 * 512)()
    check("ferry_address_from_hex", hex_text.encode(), buf, len(buf), C.byref(n))
    return bytes(buf[: n.value])


__all__ = ["Directory", "Publication", "Watch", "Entry", "Event", "address_from_hex",
           "JOINED", "UPDATED", "LOST", "CLOSED", "REJECTED", "FerryError"]
