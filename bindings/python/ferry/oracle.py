"""An independent numpy oracle of dispatch and combine, written from the
semantics alone (no code shared with the library): test data, the
expected counts and expert rows, a deterministic stand-in for the experts,
and the expected combine results bit for bit.

Rows inside one expert's segment are compared as a multiset: the contract
fixes which rows an expert receives and where its segment starts, and the
combine result does not depend on their order.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import numpy as np

FP8, BF16, FP16, FP32 = "fp8", "bf16", "fp16", "fp32"
SIZES = {FP8: 1, BF16: 2, FP16: 2, FP32: 4}


def round_up(n: int, m: int) -> int:
    return (n + m - 1) // m * m


def bf16_bits(f: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bits (uint16), round to nearest even."""
    b = np.ascontiguousarray(f, dtype=np.float32).view(np.uint32).astype(np.uint64)
    r = (b + 0x7FFF + ((b >> 16) & 1)) >> 16
    return r.astype(np.uint16)


def bf16_float(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def encode(f: np.ndarray, dtype: str) -> np.ndarray:
    """float32 values to the raw bytes of dtype, shape [..., n*size]."""
    if dtype == FP32:
        raw = f.astype(np.float32)
    elif dtype == BF16:
        raw = bf16_bits(f)
    elif dtype == FP16:
        raw = f.astype(np.float16)
    else:
        raise ValueError(dtype)
    return np.ascontiguousarray(raw).view(np.uint8).reshape(f.shape[:-1] + (-1,))


def decode(raw: np.ndarray, dtype: str) -> np.ndarray:
    """Raw bytes [..., n*size] of dtype to float32 [..., n]. fp8 bytes are
    opaque to the exchange: the stand-in expert reads each byte as its
    unsigned value."""
    raw = np.ascontiguousarray(raw)
    if dtype == FP8:
        return raw.astype(np.float32)
    if dtype == FP32:
        return raw.view(np.float32).copy()
    if dtype == BF16:
        return bf16_float(raw.view(np.uint16))
    if dtype == FP16:
        return raw.view(np.float16).astype(np.float32)
    raise ValueError(dtype)


class GroupInput:
    """One source group's tokens (identical on all its replicas): x as raw
    bytes [m, H*size], scales float32 [m, Hs] or None, indices int32
    [m, K] (K distinct experts per token), weights float32 [m, K]."""

    def __init__(self, x: np.ndarray, scales: Optional[np.ndarray], indices: np.ndarray,
                 weights: np.ndarray) -> None:
        self.x, self.scales, self.indices, self.weights = x, scales, indices, weights


def make_group_input(seed: int, m: int, hidden: int, scales: int, experts: int, k: int,
                     in_dtype: str) -> GroupInput:
    rng = np.random.default_rng(seed)
    if in_dtype == FP8:
        x = rng.integers(0, 256, size=(m, hidden), dtype=np.uint8)
    else:
        x = encode(rng.standard_normal((m, hidden)).astype(np.float32), in_dtype)
    s = rng.standard_normal((m, scales)).astype(np.float32) if scales else None
    idx = np.argsort(rng.random((m, experts)), axis=1)[:, :k].astype(np.int32)
    w = rng.random((m, k)).astype(np.float32) + np.float32(0.05)
    w = (w / w.sum(axis=1, keepdims=True)).astype(np.float32)
    return GroupInput(x, s, idx, w)


class World:
    """W ranks in groups of D replicas; experts split L = ceil(E/W) per rank."""

    def __init__(self, world: int, replicas: int, experts: int) -> None:
        self.W, self.D, self.E = world, replicas, experts
        self.G = world // replicas
        self.L = -(-experts // world)

    def local_experts(self, rank: int) -> List[int]:
        return [e for e in range(rank * self.L, (rank + 1) * self.L) if e < self.E]


def expected_dispatch(world: World, groups: List[GroupInput], rank: int, m: List[int]
                      ) -> Tuple[np.ndarray, List[List[bytes]]]:
    """(counts int32 [L], per local expert the sorted rows it receives, each
    row the token bytes followed by its scales' bytes)."""
    counts = np.zeros(world.L, dtype=np.int32)
    rows: List[List[bytes]] = [[] for _ in range(world.L)]
    for i, e in enumerate(world.local_experts(rank)):
        for h, g in enumerate(groups):
            hit = np.nonzero((g.indices[: m[h]] == e).any(axis=1))[0]
            counts[i] += len(hit)
            for t in hit:
                row = g.x[t].tobytes() + (g.scales[t].tobytes() if g.scales is not None else b"")
                rows[i].append(row)
        rows[i].sort()
    return counts, rows


def segment_starts(counts: np.ndarray, pad: int, per_expert: Optional[int]) -> List[int]:
    """Where each local expert's rows start: flat, at multiples of pad one
    after the other; batched, at i * per_expert."""
    if per_expert:
        return [i * per_expert for i in range(len(counts))]
    out, off = [], 0
    for c in counts:
        out.append(off)
        off += round_up(int(c), pad)
    return out


def received_rows(out_x: np.ndarray, out_scales: Optional[np.ndarray], counts: np.ndarray, pad: int,
                  per_expert: Optional[int]) -> List[List[bytes]]:
    """The rows a rank received, per local expert, sorted (out_x raw bytes
    [rows, H*size], out_scales float32 [rows, Hs])."""
    res = []
    for i, start in enumerate(segment_starts(counts, pad, per_expert)):
        seg = []
        for r in range(start, start + int(counts[i])):
            seg.append(out_x[r].tobytes() + (np.ascontiguousarray(out_scales[r]).tobytes()
                                             if out_scales is not None else b""))
        seg.sort()
        res.append(seg)
    return res


def expert(x_raw: np.ndarray, scales: Optional[np.ndarray], e: int, in_dtype: str, out_dtype: str) -> np.ndarray:
    """The stand-in expert e: y = x * c_e + mean(scales), c_e exact in
    binary, so a row reaching the wrong expert or losing its scales gives
    a different result. Raw bytes in, raw out_dtype bytes out."""
    f = decode(x_raw, in_dtype)
    c = np.float32(0.5 + (e % 4) * 0.25)
    y = (f * c).astype(np.float32)
    if scales is not None and scales.shape[-1]:
        y = (y + scales.mean(axis=-1, dtype=np.float32, keepdims=True).astype(np.float32)).astype(np.float32)
    return encode(y, out_dtype)


def run_experts(world: World, rank: int, out_x: np.ndarray, out_scales: Optional[np.ndarray],
                counts: np.ndarray, pad: int, per_expert: Optional[int], in_dtype: str, out_dtype: str,
                rows: int) -> np.ndarray:
    """expert_y raw bytes [rows, H*out_size] for what rank received (rows
    outside every segment are zero)."""
    hidden = out_x.shape[1] // SIZES[in_dtype]
    y = np.zeros((rows, hidden * SIZES[out_dtype]), dtype=np.uint8)
    for i, start in enumerate(segment_starts(counts, pad, per_expert)):
        n = int(counts[i])
        if n:
            e = rank * world.L + i
            sc = out_scales[start:start + n] if out_scales is not None else None
            y[start:start + n] = expert(out_x[start:start + n], sc, e, in_dtype, out_dtype)
    return y


def expected_combine(g: GroupInput, m: int, in_dtype: str, out_dtype: str,
                     prior: Optional[np.ndarray] = None) -> np.ndarray:
    """out_tokens raw bytes [m, H*out_size] of a rank of group g: the sum
    over k, in column order, of w[t,k] * y(t,k) in float32, each product
    and sum rounded, started from prior's values (accumulate), rounded once
    into out_dtype."""
    hidden = g.x.shape[1] // SIZES[in_dtype]
    acc = decode(prior[:m], out_dtype) if prior is not None else np.zeros((m, hidden), dtype=np.float32)
    for k in range(g.indices.shape[1]):
        y = np.stack([decode(expert(g.x[t:t + 1], g.scales[t:t + 1] if g.scales is not None else None,
                                    int(g.indices[t, k]), in_dtype, out_dtype)[0], out_dtype)
                      for t in range(m)]) if m else np.zeros((0, hidden), dtype=np.float32)
        prod = (g.weights[:m, k:k + 1] * y).astype(np.float32)
        acc = (acc + prod).astype(np.float32)
    return encode(acc, out_dtype)


def compare(what: str, got: Any, want: Any, errors: List[str]) -> None:
    """Appends a message to errors when got differs from want."""
    if isinstance(want, np.ndarray):
        if got.shape != want.shape or not np.array_equal(got, want):
            bad = "shape %s != %s" % (got.shape, want.shape) if got.shape != want.shape else \
                "%d of %d elements differ" % (int((got != want).sum()), want.size)
            errors.append("%s: %s" % (what, bad))
    elif got != want:
        errors.append("%s: differs" % what)


def check_rank(world: World, rank: int, groups: List[GroupInput], m: List[int], counts: np.ndarray,
               out_x: np.ndarray, out_scales: Optional[np.ndarray], pad: int, per_expert: Optional[int],
               out_tokens: np.ndarray, in_dtype: str, out_dtype: str,
               prior: Optional[np.ndarray] = None) -> List[str]:
    """Every difference between one rank's results and the oracle's."""
    errors: List[str] = []
    want_counts, want_rows = expected_dispatch(world, groups, rank, m)
    compare("expert_num_tokens", counts, want_counts, errors)
    if not errors:
        got_rows = received_rows(out_x, out_scales, counts, pad, per_expert)
        for i, (g, w) in enumerate(zip(got_rows, want_rows)):
            if g != w:
                errors.append("expert %d: rows differ (%d received)" % (rank * world.L + i, len(g)))
    h = rank // world.D
    want_out = expected_combine(groups[h], m[h], in_dtype, out_dtype, prior)
    compare("out_tokens", out_tokens[: m[h]], want_out, errors)
    return errors


def summary(d: Dict[str, Any]) -> str:
    return ", ".join("%s=%s" % kv for kv in sorted(d.items()))
