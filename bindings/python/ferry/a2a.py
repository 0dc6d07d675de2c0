"""Mixture-of-Experts dispatch and combine: AllToAll, a drop-in for
pplx-garden's P2PAllToAll over libferry's ferry_a2a_* calls.

    from ferry.a2a import AllToAll        # instead of pplx_garden's P2PAllToAll

    a2a = AllToAll(max_num_tokens=T, num_experts=E, expert_padding=1, hidden_dim=H,
                   hidden_dim_scale=Hs, in_dtype=torch.float8_e4m3fn, out_dtype=torch.bfloat16,
                   scale_dtype=torch.float32, num_experts_per_token=K, nets_per_gpu=1,
                   max_private_tokens=None, device=torch.device("cpu"), dp_group=None,
                   node_group=None, global_group=world, backend="cuda-emu", transport="shm")
    a2a.dispatch(expert_num_tokens, expert_x, expert_x_scale, x, x_scale, indices, weights)
    ...                                                     # the experts
    a2a.combine(out_tokens, indices, weights, expert_y)
    a2a.destroy()

Shapes and dtypes are pplx-garden's: out_expert_num_tokens int32 [L],
out_expert_x [R, H] (or [L, max_tokens_per_expert, H] in the batched
layout), scales float32 [.., Hs], dp_x [m, H], indices int32 or uint32
[m, K], weights float32 [m, K], out_tokens [m, H] in out_dtype, bound_m an
int32 scalar. Every tensor is checked by the library, and a wrong shape or
dtype raises InvalidArgumentError (a ValueError) naming the argument,
before anything moves. fp8 travels as torch.float8_e4m3fn where torch has
it, else as a uint8 view of the same bytes.

Groups are objects with rank, size, all_gather_object and barrier:
ferry.Group (ferry's rendezvous), ferry.TorchGroup or a torch.distributed
ProcessGroup (gloo on CPU). dp_group (D ranks holding the same tokens) and
node_group (S ranks sharing memory) must be runs of consecutive global
ranks; without node_group, S is D. ferry's library needs its own
bootstrap group for the world: a global_group that is not a ferry.Group
is bridged (rank 0 hands out a store address and token over it).

Backends: "host" (loops over host memory), "cuda-emu" (ferry's CUDA
kernels compiled with a C++20 compiler at run time and run on the CPU: it
needs g++ on PATH or FERRY_EMU_CXX, else NotSupportedError says so) and "cuda" (a GPU).
Every backend works on host memory in this version: CUDA tensors are
copied to host memory before a call and its outputs back after it (the
library does it with the CUDA driver; synchronize streams other than the
legacy default stream first). Calls must follow dispatch send, dispatch recv, combine send, combine recv
(CallOrderError otherwise); a lost rank or a timeout breaks the context
(PeerLostError / FerryTimeoutError, then BrokenError) until set_active.
"""

from __future__ import annotations

import ctypes as C
import os
import shutil
import weakref
from typing import Any, List, Optional, Sequence, Tuple

from . import _abi
from ._lib_handle import check, has, lib, ms
from ._tensor import dtype_code, ref, tensor
from .errors import NotSupportedError, closed
from .group import Group, as_group, bridge

_BACKENDS = {"host": _abi.A2A_BACKEND_HOST, "cuda": _abi.A2A_BACKEND_CUDA, "cuda-emu": _abi.A2A_BACKEND_CUDA_EMU}


def _close_context(h: int, bridged: Optional[Group]) -> None:
    try:
        lib().ferry_a2a_close(h)
    except Exception:
        pass
    if bridged is not None:
        try:
            bridged.close()
        except Exception:
            pass


def _consecutive(group: Any, world: Any, what: str) -> Tuple[int, int]:
    """(size, first global rank) of a group that must be a run of
    consecutive global ranks aligned to its size."""
    ranks = group.all_gather_object(world.rank)
    n = len(ranks)
    if ranks != list(range(ranks[0], ranks[0] + n)) or ranks[0] % n:
        raise ValueError("%s must hold consecutive global ranks starting at a multiple of its size; got %s"
                         % (what, ranks))
    return n, ranks[0]


def _dtype(dtype: Any, what: str, allowed: Sequence[int]) -> int:
    code = dtype_code(dtype)
    if code == _abi.DTYPE_UINT8 and _abi.DTYPE_FP8 in allowed:
        code = _abi.DTYPE_FP8
    if code is None or code not in allowed:
        raise ValueError("%s: unsupported dtype %s" % (what, dtype))
    return code


class AllToAll:
    """This rank's all-to-all context: constructed by every rank of
    global_group together (a collective), used by one thread at a time,
    released by destroy() (a collective too), or by its finaliser."""

    def __init__(self, *, max_num_tokens: int, num_experts: int, expert_padding: int, hidden_dim: int,
                 hidden_dim_scale: Optional[int], in_dtype: Any, out_dtype: Any, scale_dtype: Any,
                 num_experts_per_token: int, nets_per_gpu: int, max_private_tokens: Optional[int],
                 device: Any, dp_group: Any, node_group: Any, global_group: Any,
                 max_tokens_per_expert: Optional[int] = None, backend: Optional[str] = None,
                 transport: Optional[str] = None, node: Optional[str] = None, timeout: float = 60.0) -> None:
        if not has("ferry_a2a_create"):
            raise NotSupportedError("ferry_a2a_create", _abi.E_NOT_SUPPORTED, "FERRY_E_NOT_SUPPORTED",
                                    "libferry %s has no all-to-all (1.2 or later needed)" %
                                    lib().ferry_version_string().decode())
        dev_type, dev_index = _device(device)
        if backend is None:
            backend = "cuda" if dev_type == "cuda" else "host"
        if backend not in _BACKENDS:
            raise ValueError("backend must be one of %s, got %r" % (sorted(_BACKENDS), backend))
        if backend == "cuda-emu":
            _require_compiler()
        if scale_dtype is not None and dtype_code(scale_dtype) != _abi.DTYPE_FP32:
            raise ValueError("scale_dtype must be float32 (or None), got %s" % (scale_dtype,))
        world = as_group(global_group)
        if world is None:
            raise ValueError("global_group is required")
        replicas, nvlink = 1, 1
        if dp_group is not None:
            replicas, _ = _consecutive(as_group(dp_group), world, "dp_group")
            nvlink = replicas
        if node_group is not None:
            nvlink, _ = _consecutive(as_group(node_group), world, "node_group")

        self._bridged: Optional[Group] = None
        cgroup = world if isinstance(world, Group) else None
        if cgroup is None:
            self._bridged = cgroup = bridge(world, timeout)
        self._world = world
        cfg = _abi.A2AConfig()
        lib().ferry_a2a_config_init_size(C.byref(cfg), C.sizeof(cfg))
        cfg.backend = _BACKENDS[backend]
        cfg.group = cgroup.handle
        self._strings = [(transport or "auto").encode(), node.encode() if node else None]
        cfg.transport, cfg.node = self._strings[0], self._strings[1]
        cfg.nvlink_size = nvlink
        cfg.replica_size = replicas
        cfg.nics_per_rank = nets_per_gpu
        cfg.max_tokens = max_num_tokens
        cfg.hidden = hidden_dim
        cfg.hidden_scales = hidden_dim_scale or 0
        cfg.num_experts = num_experts
        cfg.experts_per_token = num_experts_per_token
        cfg.dispatch_dtype = _dtype(in_dtype, "in_dtype",
                                    [_abi.DTYPE_FP8, _abi.DTYPE_BF16, _abi.DTYPE_FP16, _abi.DTYPE_FP32])
        cfg.combine_dtype = _dtype(out_dtype, "out_dtype", [_abi.DTYPE_BF16, _abi.DTYPE_FP16, _abi.DTYPE_FP32])
        cfg.expert_padding = expert_padding
        # None: the default window; 0: none at all; n: n rows.
        if max_private_tokens is None:
            cfg.max_private_tokens = 0
        elif max_private_tokens == 0:
            cfg.max_private_tokens = _abi.A2A_NO_PRIVATE_WINDOW
        else:
            cfg.max_private_tokens = max_private_tokens
        cfg.max_tokens_per_expert = max_tokens_per_expert or 0
        cfg.cuda_device = dev_index if dev_type == "cuda" else -1
        cfg.timeout_ms = ms(timeout)
        self._timeout_ms = ms(timeout)
        h = C.c_uint64()
        try:
            check("ferry_a2a_create", C.byref(cfg), ms(timeout), C.byref(h))
        except BaseException:
            if self._bridged is not None:
                self._bridged.close()
            raise
        self._h: Optional[int] = h.value
        self._finalizer = weakref.finalize(self, _close_context, h.value, self._bridged)
        info = self.info()
        self.rank, self.world_size = info["rank"], info["world_size"]
        self.num_local_experts = info["local_experts"]
        self.output_rows = info["output_rows"]
        self.max_tokens_per_expert = max_tokens_per_expert
        self.hidden_dim, self.hidden_dim_scale = hidden_dim, hidden_dim_scale or 0
        self.num_experts, self.num_experts_per_token = num_experts, num_experts_per_token
        self.max_num_tokens, self.expert_padding = max_num_tokens, expert_padding
        self.dp_size, self.node_size, self.backend = replicas, nvlink, backend

    @property
    def handle(self) -> int:
        if self._h is None:
            raise closed("AllToAll")
        return self._h

    def info(self) -> dict:
        """The derived sizes: rank, world_size, local_experts (L),
        output_rows (rows out_expert_x needs at least), private_tokens, ..."""
        i = _abi.A2AInfo()
        i.struct_size = C.sizeof(i)
        check("ferry_a2a_get_info", self.handle, C.byref(i))
        return {name: int(getattr(i, name)) for name, _ in _abi.A2AInfo._fields_
                if not name.startswith("reserved") and name != "struct_size"}

    def dispatch(self, out_expert_num_tokens: Any, out_expert_x: Any, out_expert_x_scale: Any, dp_x: Any,
                 dp_x_scale: Any, indices: Any, weights: Any, bound_m: Any = None, do_send: bool = True,
                 do_recv: bool = True) -> None:
        """Sends each token to the ranks of its experts (do_send) and/or
        receives this rank's experts' tokens (do_recv): counts into
        out_expert_num_tokens, rows into out_expert_x (expert-major; each
        expert's rows start at a multiple of expert_padding, or at row i*B
        in the batched layout) with their scales."""
        if not (do_send or do_recv):
            raise ValueError("dispatch: do_send and do_recv are both False")
        args = [(out_expert_num_tokens, "out_expert_num_tokens"), (out_expert_x, "out_expert_x"),
                (out_expert_x_scale, "out_expert_x_scale"), (dp_x, "dp_x"), (dp_x_scale, "dp_x_scale"),
                (indices, "indices"), (weights, "weights"), (bound_m, "bound_m")]
        ts, keep = self._views(args)
        check("ferry_a2a_dispatch", self.handle, *[ref(t) for t in ts], int(do_send), int(do_recv), 0,
              self._timeout_ms)
        del keep

    def combine(self, out_tokens: Any, indices: Any, weights: Any, expert_y: Any, bound_m: Any = None,
                do_send: bool = True, do_recv: bool = True, accumulate: bool = False) -> None:
        """Sends expert_y (the row layout of the dispatch's out_expert_x)
        back (do_send) and/or sums each token's K results with its weights
        into out_tokens (do_recv), added to what is there with accumulate."""
        if not (do_send or do_recv):
            raise ValueError("combine: do_send and do_recv are both False")
        args = [(out_tokens, "out_tokens"), (indices, "indices"), (weights, "weights"), (expert_y, "expert_y"),
                (bound_m, "bound_m")]
        ts, keep = self._views(args)
        check("ferry_a2a_combine", self.handle, *[ref(t) for t in ts], int(do_send), int(do_recv),
              int(accumulate), 0, self._timeout_ms)
        del keep

    def _views(self, args: List[Tuple[Any, str]]) -> Tuple[List[Any], List[Any]]:
        ts: List[Any] = []
        keep: List[Any] = []
        for obj, name in args:
            if obj is None:
                ts.append(None)
                continue
            t, k = tensor(obj, name)
            ts.append(t)
            keep.append(k)
        return ts, keep

    def dropped(self) -> Tuple[int, List[int]]:
        """(total, per expert) copies of this rank's tokens the last
        dispatch dropped because their experts' ranks are inactive."""
        total = C.c_int64()
        per = (C.c_int32 * self.num_experts)()
        check("ferry_a2a_dropped", self.handle, C.byref(total), per, self.num_experts)
        return total.value, list(per)

    def set_active(self, generation: int, active: Sequence[bool]) -> None:
        """Changes the ranks taking part from the next iteration on; a
        collective of the active ranks, each passing the same generation
        (larger than the last) and mask. Revives a broken context."""
        arr = (C.c_uint8 * len(active))(*[1 if a else 0 for a in active])
        check("ferry_a2a_set_active", self.handle, generation, arr, len(active), self._timeout_ms)

    def close(self) -> None:
        """Releases the context (not collective: see destroy)."""
        if self._h is not None:
            h, self._h = self._h, None
            self._finalizer.detach()
            try:
                check("ferry_a2a_close", h)
            finally:
                if self._bridged is not None:
                    self._bridged.close()

    def destroy(self) -> None:
        """Collective release: waits for every rank, then closes."""
        if self._h is None:
            return
        self._world.barrier()
        if self._bridged is not None:
            # rank 0's store must outlive the others' last use of it
            self._bridged.barrier()
        self.close()

    def __enter__(self) -> "AllToAll":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _require_compiler() -> None:
    """The cuda-emu backend compiles ferry's kernels at run time with a
    C++20 compiler: FERRY_EMU_CXX, else g++ on PATH. Say so before the
    library tries."""
    cxx = os.environ.get("FERRY_EMU_CXX")
    where = shutil.which(cxx) if cxx else shutil.which("g++")
    if where is None:
        raise NotSupportedError(
            "ferry_a2a_create", _abi.E_NOT_SUPPORTED, "FERRY_E_NOT_SUPPORTED",
            "backend cuda-emu compiles ferry's CUDA kernels for the CPU at run time and needs a C++20 compiler: "
            + ("FERRY_EMU_CXX=%s is not an executable" % cxx if cxx else
               "no g++ on PATH (install g++ 10 or later, or set FERRY_EMU_CXX)"))


def _device(device: Any) -> Tuple[str, int]:
    if device is None:
        return "cpu", 0
    kind = getattr(device, "type", None)
    if kind is not None:
        return str(kind), int(getattr(device, "index", None) or 0)
    text = str(device)
    kind, _, idx = text.partition(":")
    if kind not in ("cpu", "cuda"):
        raise ValueError("device must be cpu or cuda[:N], got %r" % (device,))
    return kind, int(idx or 0)


__all__ = ["AllToAll"]
