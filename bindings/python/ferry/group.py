"""Process groups: who the other processes of a job are, and small
collectives to exchange addresses and descriptors before the first write.

Both kinds have the interface ferry.a2a.AllToAll expects of its groups:
rank, size, all_gather_object(obj) -> list and barrier().

  Group          ferry's own rendezvous (ferry_group_join): torchrun, Open MPI,
                 Slurm or FERRY_* variables, a small TCP store run by rank 0
  TorchGroup     an adapter over a torch.distributed process group (gloo on CPU)
"""

from __future__ import annotations

import ctypes as C
import os
import pickle
import secrets
import socket
import struct
from typing import Any, List, Mapping, Optional, Sequence

from ._handles import Handle
from ._lib_handle import check, ms


class Group(Handle):
    """This process's place in a job, joined from the environment.

    Every rank must issue the same sequence of collectives; a failed
    collective breaks the group. One thread at a time. close() leaves the
    job (not collective: call barrier() first when others may still need
    rank 0's store)."""

    _free_ = "ferry_group_close"

    def __init__(self, timeout: float = 60.0, env: Optional[Mapping[str, str]] = None) -> None:
        """Joins from the process environment, or, with env, from those
        settings alone (FERRY_RANK, FERRY_WORLD_SIZE, FERRY_MASTER=host:port,
        FERRY_JOB_TOKEN, ...; the process environment is then not read)."""
        h = C.c_uint64()
        if env is None:
            check("ferry_group_join", ms(timeout), C.byref(h))
        else:
            items = [("%s=%s" % kv).encode() for kv in env.items()]
            arr = (C.c_char_p * max(len(items), 1))(*items)
            check("ferry_group_join_env", arr, len(items), ms(timeout), C.byref(h))
        super().__init__(h.value)
        r, w = C.c_int32(), C.c_int32()
        check("ferry_group_rank", h.value, C.byref(r), C.byref(w))
        self._rank, self._size = r.value, w.value
        self.timeout = timeout

    @property
    def rank(self) -> int:
        return self._rank

    @property
    def size(self) -> int:
        return self._size

    def all_gather(self, data: bytes, slot: Optional[int] = None) -> List[bytes]:
        """Every rank's bytes, in rank order. slot bounds one rank's
        contribution; by default the ranks agree on the largest first."""
        if slot is None:
            lens = self.all_gather(struct.pack("<Q", len(data)), slot=8)
            slot = max(struct.unpack("<Q", b)[0] for b in lens)
        slot = max(slot, 1)
        out = (C.c_uint8 * (slot * self._size))()
        lens_arr = (C.c_size_t * self._size)()
        src = C.create_string_buffer(data, max(len(data), 1))
        check("ferry_group_all_gather", self.handle, src, len(data), out, slot, lens_arr, ms(self.timeout))
        raw = bytes(out)
        return [raw[i * slot: i * slot + lens_arr[i]] for i in range(self._size)]

    def all_gather_object(self, obj: Any) -> List[Any]:
        """Every rank's obj (pickled), in rank order."""
        return [pickle.loads(b) for b in self.all_gather(pickle.dumps(obj))]

    def broadcast(self, data: Optional[bytes], root: int = 0, cap: int = 1 << 20) -> bytes:
        """Rank root's bytes on every rank (cap bounds them elsewhere)."""
        n = C.c_size_t(len(data) if data is not None and self._rank == root else 0)
        size = max(cap, n.value, 1)
        buf = C.create_string_buffer(size)
        if self._rank == root and data:
            C.memmove(buf, data, len(data))
        check("ferry_group_broadcast", self.handle, root, buf, size, C.byref(n), ms(self.timeout))
        return buf.raw[: n.value]

    def broadcast_object(self, obj: Any, root: int = 0) -> Any:
        data = pickle.dumps(obj) if self._rank == root else None
        size = self.all_gather_object(len(data) if data is not None else 0)[root]
        return pickle.loads(self.broadcast(data, root, cap=size))

    def barrier(self) -> None:
        check("ferry_group_barrier", self.handle, ms(self.timeout))

    def subgroup(self, ranks: Sequence[int]) -> "SubGroup":
        """The ranks listed (this rank among them) as a group that runs its
        collectives over this one: every rank of the parent must call the
        subgroup's collectives at the same time, each with its own subgroup."""
        return SubGroup(self, ranks)


class SubGroup:
    """Part of a parent group (ferry's Group or anything with the same
    interface). Its collectives run over the whole parent, so every parent
    rank calls each collective together, each with the subgroup it belongs
    to: enough for the setup-time exchanges of AllToAll."""

    def __init__(self, parent: Any, ranks: Sequence[int]) -> None:
        self.parent, self.ranks = parent, list(ranks)
        if parent.rank not in self.ranks:
            raise ValueError("rank %d is not in the subgroup %s" % (parent.rank, self.ranks))

    @property
    def rank(self) -> int:
        return self.ranks.index(self.parent.rank)

    @property
    def size(self) -> int:
        return len(self.ranks)

    def all_gather_object(self, obj: Any) -> List[Any]:
        every = self.parent.all_gather_object(obj)
        return [every[r] for r in self.ranks]

    def barrier(self) -> None:
        self.parent.barrier()


class TorchGroup:
    """A torch.distributed process group seen through the group interface
    (rank and size within the group; collectives over its backend, gloo on
    CPU). group=None is the default (world) group."""

    def __init__(self, group: Any = None) -> None:
        import torch.distributed as dist
        self._dist, self.group = dist, group

    @property
    def rank(self) -> int:
        return int(self._dist.get_rank(self.group))

    @property
    def size(self) -> int:
        return int(self._dist.get_world_size(self.group))

    def all_gather_object(self, obj: Any) -> List[Any]:
        out: List[Any] = [None] * self.size
        self._dist.all_gather_object(out, obj, group=self.group)
        return out

    def barrier(self) -> None:
        self._dist.barrier(group=self.group)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def bridge(group: Any, timeout: float = 60.0) -> Group:
    """A ferry Group with the same ranks as group (anything with the group
    interface, e.g. a TorchGroup): rank 0 picks a store address and a job
    token and shares them over group. On one host the store listens on
    127.0.0.1; across hosts on rank 0's address, which needs
    FERRY_ALLOW_REMOTE=1 (set by the caller: the token then guards it)."""
    g = as_group(group)
    host = socket.gethostname()
    hosts = g.all_gather_object(host)
    if len(set(hosts)) == 1:
        master_host = "127.0.0.1"
    else:
        if os.environ.get("FERRY_ALLOW_REMOTE") not in ("1", "true"):
            raise ValueError("the group spans hosts %s: set FERRY_ALLOW_REMOTE=1 to let ferry's store listen "
                             "beyond loopback" % sorted(set(hosts)))
        master_host = socket.gethostbyname(hosts[0])
    offer = ("%s:%d" % (master_host, _free_port()), secrets.token_hex(16)) if g.rank == 0 else None
    master, token = g.all_gather_object(offer)[0]
    env = {"FERRY_RANK": str(g.rank), "FERRY_WORLD_SIZE": str(g.size), "FERRY_MASTER": master,
           "FERRY_JOB_TOKEN": token}
    if master_host != "127.0.0.1":
        env["FERRY_ALLOW_REMOTE"] = "1"
    return Group(timeout, env=env)


def as_group(g: Any) -> Any:
    """g itself when it has the group interface, a TorchGroup for a
    torch.distributed ProcessGroup."""
    if g is None:
        return None
    if all(hasattr(g, a) for a in ("rank", "size", "all_gather_object", "barrier")) and \
            not callable(getattr(g, "rank")):
        return g
    try:
        import torch.distributed as dist
        if isinstance(g, dist.ProcessGroup):
            return TorchGroup(g)
    except ImportError:
        pass
    raise TypeError("a group needs rank, size, all_gather_object and barrier (ferry.Group, ferry.TorchGroup, "
                    "or a torch.distributed ProcessGroup); got %s" % type(g).__name__)
