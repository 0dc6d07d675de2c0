"""ferry.a2a.AllToAll: dispatch and combine in W processes from torch
tensors, equal to the numpy oracle (ferry.oracle), through
python -m ferry.bench_a2a; errors in one process; a killed rank.

make test runs the emulator backend at W=2 and W=4 (fp8 with scales, bf16
combine, accumulate, split send/recv) and a subset of the pplx-garden
configurations on the host backend with torch.distributed (gloo) groups;
make test-python-full runs the whole matrix."""

import os
import socket
import subprocess
import sys
import time

import pytest
import torch

import ferry
from ferry.a2a import AllToAll

# Small shapes: the emulator runs every GPU thread of a kernel on the CPU.
EMU = ["--backend", "cuda-emu", "--tokens", "16", "--hidden", "256", "--hidden-scale", "8", "--experts", "16",
       "--topk", "4", "--warmup", "0", "--iters", "2"]
HOST = ["--backend", "host", "--group", "torch", "--tokens", "16", "--hidden", "128", "--experts", "16",
        "--topk", "4", "--warmup", "0", "--iters", "2"]

# (id, W, extra arguments, in make test)
CASES = [
    ("emu-w2-fp8-scales-split-accumulate", 2, EMU + ["--split", "--accumulate", "--transport", "shm"], True),
    ("emu-w4-fp8-scales-bf16", 4, EMU + ["--transport", "shm"], True),
    ("emu-w4-bf16-split-tcp", 4, EMU + ["--in-dtype", "bf16", "--hidden-scale", "0", "--split",
                                        "--transport", "tcp;ofi_rxm"], False),
    ("emu-w2-fp32-bound-m", 2, EMU + ["--in-dtype", "fp32", "--out-dtype", "fp32", "--hidden-scale", "0",
                                      "--bound-m", "9", "--transport", "shm"], False),
    ("host-w2-fp32", 2, HOST + ["--in-dtype", "fp32", "--out-dtype", "fp32", "--transport", "shm"], True),
    ("host-w4-bf16-pad16-node2-private2", 4, HOST + ["--in-dtype", "bf16", "--pad", "16", "--nvlink", "2",
                                                     "--private", "2", "--transport", "shm"], True),
    ("host-w4-dp2-bf16", 4, HOST + ["--in-dtype", "bf16", "--dp-size", "2", "--transport", "shm"], True),
    ("host-w2-fp8-scales-batched", 2, HOST + ["--in-dtype", "fp8", "--hidden-scale", "16",
                                              "--max-tokens-per-expert", "48", "--transport", "shm"], True),
    ("host-w2-bf16", 2, HOST + ["--in-dtype", "bf16", "--transport", "tcp;ofi_rxm"], False),
    ("host-w2-bf16-pad16", 2, HOST + ["--in-dtype", "bf16", "--pad", "16", "--transport", "shm"], False),
    ("host-w4-fp8-scales-node2", 4, HOST + ["--in-dtype", "fp8", "--hidden-scale", "16", "--nvlink", "2",
                                            "--transport", "shm"], False),
    ("host-w4-fp32-private1-tcp", 4, HOST + ["--in-dtype", "fp32", "--out-dtype", "fp32", "--private", "1",
                                             "--transport", "tcp;ofi_rxm"], False),
    ("host-w4-dp2-node4-fp32", 4, HOST + ["--in-dtype", "fp32", "--out-dtype", "fp32", "--dp-size", "2",
                                          "--nvlink", "4", "--transport", "shm"], False),
    ("host-w4-batched-accumulate-split", 4, HOST + ["--in-dtype", "bf16", "--max-tokens-per-expert", "32",
                                                    "--accumulate", "--split", "--transport", "shm"], False),
    ("host-w4-fp8-ferry-group-ipc", 4, ["--backend", "host", "--tokens", "16", "--hidden", "128",
                                        "--hidden-scale", "16", "--experts", "16", "--topk", "4", "--iters", "2",
                                        "--transport", "ipc"], False),
    # The issue's own command: the default (small) shape, W=4, the emulator.
    ("emu-w4-default-shape", 4, ["--backend", "cuda-emu", "--transport", "shm", "--iters", "1"], False),
]


@pytest.mark.parametrize("case,world,args,fast", CASES, ids=[c[0] for c in CASES])
def test_bench_a2a_matches_oracle(case, world, args, fast, helpers):
    if not fast and not helpers.full:
        pytest.skip("make test-python-full runs %s" % case)
    r = helpers.run(["-m", "ferry.bench_a2a", "--world-size", str(world), "--check", "--timeout", "400"] + args,
                    timeout=480)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert out.strip().splitlines()[-1] == "verified", out
    assert out.count("  ok (") == world, out  # every rank checked against the oracle


def one_rank(**kw):
    args = dict(max_num_tokens=8, num_experts=4, expert_padding=1, hidden_dim=16, hidden_dim_scale=None,
                in_dtype=torch.float32, out_dtype=torch.float32, scale_dtype=None, num_experts_per_token=2,
                nets_per_gpu=1, max_private_tokens=None, device="cpu", dp_group=None, node_group=None,
                backend="host", transport="mem")
    args.update(kw)
    return args


def test_errors_in_one_process():
    with ferry.Group(env={}) as world:  # a world of one
        a = AllToAll(global_group=world, **one_rank())
        cnt = torch.zeros(4, dtype=torch.int32)
        ox = torch.zeros(a.output_rows, 16)
        x, w = torch.randn(8, 16), torch.full((8, 2), 0.5)
        idx = torch.tensor([[0, 3]] * 8, dtype=torch.int32)
        base = dict(out_expert_num_tokens=cnt, out_expert_x=ox, out_expert_x_scale=None, dp_x=x, dp_x_scale=None,
                    indices=idx, weights=w)
        bad = [("dp_x", torch.randn(8, 15)), ("dp_x", torch.randn(9, 16)), ("out_expert_x", torch.zeros(2, 16)),
               ("out_expert_num_tokens", torch.zeros(3, dtype=torch.int32)), ("indices", idx[:, :1].contiguous()),
               ("out_expert_x", torch.zeros(a.output_rows, 16, dtype=torch.bfloat16))]
        for name, value in bad:
            with pytest.raises(ferry.InvalidArgumentError) as e:
                a.dispatch(**dict(base, **{name: value}))
            assert name in str(e.value), e.value
            assert isinstance(e.value, ValueError)
        with pytest.raises(ValueError, match="dp_x"):
            a.dispatch(**dict(base, dp_x=torch.randn(8, 16, dtype=torch.float64)))  # no such ferry dtype
        with pytest.raises(TypeError, match="indices"):
            a.dispatch(**dict(base, indices=[[0, 3]] * 8))
        with pytest.raises(ferry.CallOrderError):
            a.combine(torch.zeros(8, 16), idx, w, ox)
        a.dispatch(**base)
        assert cnt.tolist() == [8, 0, 0, 8]
        out = torch.zeros(8, 16)
        a.combine(out, idx, w, ox * 2)
        assert torch.equal(out, x * 2)
        a.destroy()
        with pytest.raises(ferry.ClosedError):
            a.dispatch(**base)
        with pytest.raises(ValueError, match="scale_dtype"):
            AllToAll(global_group=world, **one_rank(scale_dtype=torch.float16, hidden_dim_scale=4))
        with pytest.raises(ferry.InvalidArgumentError, match="num_experts|experts"):
            AllToAll(global_group=world, **one_rank(num_experts=1))
        with pytest.raises(ValueError, match="backend"):
            AllToAll(global_group=world, **one_rank(backend="tpu"))


@pytest.mark.parametrize("how", ["no g++ on PATH", "a FERRY_EMU_CXX that is not there"])
def test_emulator_needs_a_compiler(how, helpers, tmp_path):
    """Without a C++20 compiler the cuda-emu backend says so."""
    code = ("import ferry, torch\n"
            "from ferry.a2a import AllToAll\n"
            "w = ferry.Group(env={})\n"
            "try:\n"
            "    AllToAll(global_group=w, **%r)\n"
            "except ferry.NotSupportedError as e:\n"
            "    print('refused:', e)\n" % dict(one_rank(backend="cuda-emu", in_dtype="fp32", out_dtype="fp32")))
    env = helpers.env(PATH=str(tmp_path))
    if how.startswith("a FERRY"):
        env = helpers.env(FERRY_EMU_CXX=str(tmp_path / "no-such-g++"))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert "refused:" in r.stdout, r.stdout + r.stderr
    assert "compiler" in r.stdout or "g++" in r.stdout, r.stdout


def test_killed_rank(helpers):
    peer = os.path.join(os.path.dirname(os.path.abspath(__file__)), "a2a_peer.py")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        master = "127.0.0.1:%d" % s.getsockname()[1]
    ps = [subprocess.Popen([sys.executable, peer, str(r), master, "tcp;ofi_rxm"], stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=helpers.env())
          for r in range(2)]
    try:
        for p in ps:
            assert p.stdout.readline().strip() == "ready", p.stderr.read()
        ps[1].kill()
        ps[1].wait()
        ps[0].stdin.write("go\n")
        ps[0].stdin.flush()
        out, err = ps[0].communicate(timeout=120)
        words = out.split()
        assert words[:1] == ["failed"], out + err
        kind, seconds, second, live = words[1], float(words[2]), words[3], int(words[4])
        # StaleDescriptorError is the PeerLostError of a peer gone for good.
        assert kind in ("PeerLostError", "StaleDescriptorError", "FerryTimeoutError"), out
        assert seconds < 30, out  # the context's deadline is 8 s
        assert second == "BrokenError", out
        assert live == 0, out
    finally:
        for p in ps:
            p.kill()
            p.wait()
