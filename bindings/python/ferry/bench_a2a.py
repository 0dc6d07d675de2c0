"""python -m ferry.bench_a2a: dispatch and combine through ferry.a2a.AllToAll
in W processes on this host, torch tensors in and out, timed and checked
against the numpy oracle (ferry.oracle).

    python -m ferry.bench_a2a --world-size 4 --backend cuda-emu --transport shm --check

prints one row per rank (median and min of each phase over the timed
iterations) and, when every rank matched the oracle on every checked
iteration, the line "verified". Exit status 0 only then (or with
--no-check, when every rank finished). --shape small (the default: 32
tokens, hidden 2048, 16 fp32 scales, 64 experts, top-4, fp8 in, bf16
out) keeps W=4 on the emulator within minutes on a small machine;
--shape decode and prefill are the DeepSeek-like sizes (128 and 4096
tokens, hidden 7168, 56 scales, 256 experts, top-8). Every size is also a
flag. The cuda-emu backend compiles ferry's kernels with a C++20 compiler
at run time (g++ or $CXX).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional

SHAPES = {
    "small": dict(tokens=32, hidden=2048, hidden_scale=16, experts=64, topk=4),
    "decode": dict(tokens=128, hidden=7168, hidden_scale=56, experts=256, topk=8),
    "prefill": dict(tokens=4096, hidden=7168, hidden_scale=56, experts=256, topk=8),
}


def parse(argv: Optional[List[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m ferry.bench_a2a", description=__doc__.split("\n\n")[0])
    p.add_argument("--world-size", type=int, required=True)
    p.add_argument("--backend", choices=["host", "cuda-emu", "cuda"], default="cuda-emu")
    p.add_argument("--transport", "--provider", dest="transport", default="shm",
                   help='"shm", "tcp;ofi_rxm" (pinned to 127.0.0.1), "ipc", "efa", "verbs", "auto"')
    p.add_argument("--check", dest="check", action="store_true", default=True)
    p.add_argument("--no-check", dest="check", action="store_false")
    p.add_argument("--shape", choices=sorted(SHAPES), default="small")
    for name in ("tokens", "hidden", "hidden-scale", "experts", "topk"):
        p.add_argument("--" + name, type=int, default=None)
    p.add_argument("--in-dtype", choices=["fp8", "bf16", "fp16", "fp32"], default="fp8")
    p.add_argument("--out-dtype", choices=["bf16", "fp16", "fp32"], default="bf16")
    p.add_argument("--dp-size", type=int, default=1, help="ranks holding the same tokens (dp_group)")
    p.add_argument("--nvlink", type=int, default=0, help="node_group size (0: none; the dp_group's size)")
    p.add_argument("--pad", type=int, default=1, help="expert_padding")
    p.add_argument("--private", type=int, default=None, help="max_private_tokens (default: the library's)")
    p.add_argument("--max-tokens-per-expert", type=int, default=None, help="the batched layout")
    p.add_argument("--nics", type=int, default=1, help="nets_per_gpu")
    p.add_argument("--group", choices=["ferry", "torch"], default="ferry",
                   help="ferry's rendezvous or torch.distributed (gloo)")
    p.add_argument("--split", action="store_true", help="send and receive halves as separate calls")
    p.add_argument("--accumulate", action="store_true", help="combine adds to out_tokens")
    p.add_argument("--bound-m", type=int, default=None, help="tokens used of --tokens (an int32 tensor)")
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--iters", type=int, default=3)
    p.add_argument("--timeout", type=float, default=240.0, help="seconds for the whole run")
    p.add_argument("--rank", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--master", default=None, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    for k, v in SHAPES[a.shape].items():
        if getattr(a, k) is None:
            setattr(a, k, v)
    if a.in_dtype != "fp8" and a.shape == "small" and "--hidden-scale" not in (argv or sys.argv):
        a.hidden_scale = 0  # scales go with fp8 unless asked for
    return a


def _torch_dtype(name: str) -> Any:
    import torch
    return {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32,
            "fp8": getattr(torch, "float8_e4m3fn", torch.uint8)}[name]


def _to_torch(raw: Any, dtype: str) -> Any:
    """Raw bytes [rows, H*size] (numpy) as a torch tensor of dtype."""
    import numpy as np
    import torch
    t = torch.from_numpy(np.ascontiguousarray(raw))
    if dtype == "fp8":
        return t.view(_torch_dtype("fp8")) if hasattr(torch, "float8_e4m3fn") else t
    return t.view(_torch_dtype(dtype))


def _raw(t: Any) -> Any:
    """A torch tensor's bytes as numpy uint8 [rows, H*size]."""
    import torch
    return t.contiguous().view(torch.uint8).numpy()


def rank_main(a: argparse.Namespace) -> Dict[str, Any]:
    import numpy as np
    import torch

    import ferry
    from ferry import oracle
    from ferry.a2a import AllToAll

    rank, W, D = a.rank, a.world_size, a.dp_size
    S = a.nvlink or D
    if a.group == "torch":
        import torch.distributed as dist
        dist.init_process_group("gloo", init_method="tcp://" + a.master, rank=rank, world_size=W)
        world: Any = ferry.TorchGroup()
        dp = node = None
        for g0 in range(0, W, D):
            pg = dist.new_group(list(range(g0, g0 + D)))
            if g0 <= rank < g0 + D:
                dp = pg
        for n0 in range(0, W, S):
            pg = dist.new_group(list(range(n0, n0 + S)))
            if n0 <= rank < n0 + S:
                node = pg
    else:
        world = ferry.Group(env={"FERRY_RANK": str(rank), "FERRY_WORLD_SIZE": str(W), "FERRY_MASTER": a.master,
                                 "FERRY_JOB_TOKEN": "bench-a2a"}, timeout=a.timeout)
        dp = world.subgroup(range(rank // D * D, rank // D * D + D))
        node = world.subgroup(range(rank // S * S, rank // S * S + S))
    if D == 1:
        dp = None
    if a.nvlink == 0:
        node = None
    T, H, Hs, E, K = a.tokens, a.hidden, a.hidden_scale, a.experts, a.topk
    transport = a.transport
    a2a = AllToAll(max_num_tokens=T, num_experts=E, expert_padding=a.pad, hidden_dim=H,
                   hidden_dim_scale=Hs or None, in_dtype=_torch_dtype(a.in_dtype),
                   out_dtype=_torch_dtype(a.out_dtype), scale_dtype=torch.float32 if Hs else None,
                   num_experts_per_token=K, nets_per_gpu=a.nics, max_private_tokens=a.private,
                   device=torch.device("cpu"), dp_group=dp, node_group=node, global_group=world,
                   max_tokens_per_expert=a.max_tokens_per_expert, backend=a.backend, transport=transport,
                   node="127.0.0.1" if transport.startswith("tcp") else None, timeout=min(a.timeout, 120.0))
    ow = oracle.World(W, D, E)
    L, B = a2a.num_local_experts, a.max_tokens_per_expert
    rows = a2a.output_rows
    counts = torch.zeros(L, dtype=torch.int32)
    xshape = (L, B, H) if B else (rows, H)
    out_x = torch.zeros(xshape, dtype=_torch_dtype(a.in_dtype) if a.in_dtype != "fp8" else torch.uint8)
    if a.in_dtype == "fp8" and hasattr(torch, "float8_e4m3fn"):
        out_x = out_x.view(torch.float8_e4m3fn)
    out_s = torch.zeros(xshape[:-1] + (Hs,), dtype=torch.float32) if Hs else None
    out_tok = torch.zeros((T, H), dtype=_torch_dtype(a.out_dtype))
    m_used = a.bound_m if a.bound_m is not None else T
    bound = torch.tensor([m_used], dtype=torch.int32) if a.bound_m is not None else None
    times: Dict[str, List[float]] = {"dispatch": [], "combine": []}
    errors: List[str] = []
    checked = 0
    for it in range(a.warmup + a.iters):
        groups = [oracle.make_group_input(1000 * it + h, T, H, Hs, E, K, a.in_dtype) for h in range(W // D)]
        g = groups[rank // D]
        x = _to_torch(g.x, a.in_dtype)
        xs = torch.from_numpy(g.scales) if Hs else None
        idx = torch.from_numpy(g.indices)
        w = torch.from_numpy(g.weights)
        prior = None
        if a.accumulate:
            rng = np.random.default_rng(7 + it)
            prior = oracle.encode(rng.standard_normal((T, H)).astype(np.float32), a.out_dtype)
            out_tok.copy_(_to_torch(prior, a.out_dtype))
        world.barrier()
        t0 = time.perf_counter()
        if a.split:
            a2a.dispatch(counts, out_x, out_s, x, xs, idx, w, bound_m=bound, do_recv=False)
            a2a.dispatch(counts, out_x, out_s, x, xs, idx, w, bound_m=bound, do_send=False)
        else:
            a2a.dispatch(counts, out_x, out_s, x, xs, idx, w, bound_m=bound)
        t1 = time.perf_counter()
        cn = counts.numpy().copy()
        ox = _raw(out_x).reshape(L * B if B else rows, -1)
        osc = out_s.reshape(-1, Hs).numpy() if out_s is not None else None
        y = oracle.run_experts(ow, rank, ox, osc, cn, a.pad, B, a.in_dtype, a.out_dtype, ox.shape[0])
        ty = _to_torch(y, a.out_dtype).reshape(xshape)
        world.barrier()
        t2 = time.perf_counter()
        if a.split:
            a2a.combine(out_tok, idx, w, ty, bound_m=bound, do_recv=False, accumulate=a.accumulate)
            a2a.combine(out_tok, idx, w, ty, bound_m=bound, do_send=False, accumulate=a.accumulate)
        else:
            a2a.combine(out_tok, idx, w, ty, bound_m=bound, accumulate=a.accumulate)
        t3 = time.perf_counter()
        if it >= a.warmup:
            times["dispatch"].append(t1 - t0)
            times["combine"].append(t3 - t2)
        if a.check:
            m = [m_used] * len(groups)
            errors += ["iteration %d: %s" % (it, e) for e in
                       oracle.check_rank(ow, rank, groups, m, cn, ox, osc, a.pad, B, _raw(out_tok), a.in_dtype,
                                         a.out_dtype, prior)]
            checked += 1
    a2a.destroy()
    live = ferry.live_handles() if a.group == "torch" else None
    if a.group == "ferry":
        world.barrier()
        world.close()
        live = ferry.live_handles()
    else:
        import torch.distributed as dist
        dist.destroy_process_group()
    return {"rank": rank, "times": times, "errors": errors, "checked": checked, "live_handles": live,
            "received": int(counts.sum())}


def _port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main(argv: Optional[List[str]] = None) -> int:
    a = parse(argv)
    if a.rank is not None:
        try:
            res = rank_main(a)
        except Exception as e:  # the parent prints it beside the others
            res = {"rank": a.rank, "failed": "%s: %s" % (type(e).__name__, e)}
        print("FERRY_RESULT " + json.dumps(res), flush=True)
        return 0 if "failed" not in res else 1
    if a.world_size < 1 or a.world_size % a.dp_size or (a.nvlink and a.world_size % a.nvlink):
        print("bench_a2a: the world size must be a multiple of --dp-size and --nvlink", file=sys.stderr)
        return 2
    master = "127.0.0.1:%d" % _port()
    base = [sys.executable, "-m", "ferry.bench_a2a"] + list(argv if argv is not None else sys.argv[1:])
    procs = [subprocess.Popen(base + ["--rank", str(r), "--master", master], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for r in range(a.world_size)]
    deadline = time.monotonic() + a.timeout
    results: List[Dict[str, Any]] = []
    for r, p in enumerate(procs):
        try:
            out, err = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            out, err = p.communicate()
            err += "\n(killed after --timeout %gs)" % a.timeout
        line = [ln for ln in out.splitlines() if ln.startswith("FERRY_RESULT ")]
        if line:
            results.append(json.loads(line[-1][len("FERRY_RESULT "):]))
        else:
            results.append({"rank": r, "failed": "exit %s: %s" % (p.returncode, err.strip()[-2000:])})
        if "failed" in results[-1] and err.strip():
            sys.stderr.write("rank %d stderr:\n%s\n" % (r, err.strip()[-4000:]))
    print("bench_a2a: W=%d D=%d S=%d backend=%s transport=%s group=%s T=%d H=%d Hs=%d E=%d K=%d %s->%s pad=%d "
          "private=%s batched=%s split=%s accumulate=%s bound_m=%s iters=%d" % (
              a.world_size, a.dp_size, a.nvlink or a.dp_size, a.backend, a.transport, a.group, a.tokens,
              a.hidden, a.hidden_scale, a.experts, a.topk, a.in_dtype, a.out_dtype, a.pad, a.private,
              a.max_tokens_per_expert, a.split, a.accumulate, a.bound_m, a.iters))
    print("%-5s %10s %14s %14s %14s %14s  %s" % ("rank", "received", "dispatch_med", "dispatch_min",
                                                 "combine_med", "combine_min", "check"))
    ok = True
    for res in results:
        if "failed" in res:
            ok = False
            print("%-5d FAILED: %s" % (res["rank"], res["failed"]))
            continue
        d, c = res["times"]["dispatch"], res["times"]["combine"]

        def us(v: List[float], f: Any) -> str:
            return "%.0f us" % (f(v) * 1e6) if v else "-"
        status = "-"
        if a.check:
            status = "ok (%d iterations)" % res["checked"] if not res["errors"] else "MISMATCH"
            ok = ok and not res["errors"] and res["checked"] > 0
        if res.get("live_handles"):
            ok = False
            status += ", %d handles left" % res["live_handles"]
        print("%-5d %10d %14s %14s %14s %14s  %s" % (res["rank"], res["received"], us(d, statistics.median),
                                                    us(d, min), us(c, statistics.median), us(c, min), status))
        for msg in res["errors"][:5]:
            print("      %s" % msg)
    if ok and a.check:
        print("verified")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
